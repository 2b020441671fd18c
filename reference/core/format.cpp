#include "reference/core/format.hpp"

#include <algorithm>
#include <array>
#include <charconv>
#include <cstdio>

namespace convlab {

std::string format_accuracy(double accuracy) {
  std::array<char, 64> buf{};
  const auto result = std::to_chars(buf.data(), buf.data() + buf.size(), accuracy);
  std::string s(buf.data(), result.ptr);
  // Python's float repr, which the original output came from, always shows a fraction.
  if (s.find_first_of(".e") == std::string::npos) s += ".0";
  return s;
}

std::string format_seconds(double seconds) {
  std::array<char, 64> buf{};
  std::snprintf(buf.data(), buf.size(), "%f", seconds);
  return buf.data();
}

std::string format_table(const std::vector<std::string>& header,
                         const std::vector<std::vector<std::string>>& rows,
                         const std::vector<int>& right) {
  std::vector<std::size_t> width(header.size());
  for (std::size_t c = 0; c < header.size(); ++c) width[c] = header[c].size();
  for (const auto& row : rows) {
    for (std::size_t c = 0; c < row.size() && c < width.size(); ++c) {
      width[c] = std::max(width[c], row[c].size());
    }
  }
  const auto line = [&](const std::vector<std::string>& cells) {
    std::string out;
    for (std::size_t c = 0; c < width.size(); ++c) {
      const std::string cell = c < cells.size() ? cells[c] : "";
      const std::string pad(width[c] - cell.size(), ' ');
      const bool r = std::find(right.begin(), right.end(), static_cast<int>(c)) != right.end();
      out += (c == 0 ? "" : "  ") + (r ? pad + cell : cell + pad);
    }
    while (!out.empty() && out.back() == ' ') out.pop_back();
    return out + "\n";
  };
  std::string out = line(header);
  std::size_t total = 0;
  for (std::size_t w : width) total += w;
  out += std::string(total + 2 * (width.size() - 1), '-') + "\n";
  for (const auto& row : rows) out += line(row);
  return out;
}

}  // namespace convlab
