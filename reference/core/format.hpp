/// @file
/// @brief Number formats of the driver's output, kept exactly as the original course printed.
#pragma once

#include <string>
#include <vector>

namespace convlab {

/// Accuracy as the original printed it: the shortest decimal that reads back as the same
/// double ("0.8562", "0.629", "1.0", "0.0").
std::string format_accuracy(double accuracy);

/// "Op Time: 0.076815" style seconds, six decimals (printf's %f).
std::string format_seconds(double seconds);

/// A plain-text table: a header row, a rule, then rows; columns padded to their widest cell.
/// Columns whose index is in `right` are right-aligned.
std::string format_table(const std::vector<std::string>& header,
                         const std::vector<std::vector<std::string>>& rows,
                         const std::vector<int>& right = {});

}  // namespace convlab
