/// @file
/// @brief Number and text formatting shared by the leaderboard's text, CSV and HTML forms.
#pragma once

#include <optional>
#include <string>

#include "grader/leaderboard/leaderboard.hpp"

namespace convlab::grader::board {

/// `value` with `decimals` decimals ("%.*f").
std::string fixed(double value, int decimals);
/// Seconds as milliseconds with 3 decimals, or `missing` when absent.
std::string ms(std::optional<double> seconds, const std::string& missing = "");
/// cuDNN time over the team's time, e.g. "1.97" (no unit), or "" when there is no reference.
std::string speedup(const TeamBest& best);
/// The rule in one sentence, e.g. "12.5 points at the median time, 6.25 more per standard
/// deviation faster (fewer per one slower), between 0 and 25".
std::string rule_sentence(const RankingRule& rule);
/// What ranks, e.g. "Op Time of variant best on ece408-high, 10000 images", from the rows.
std::string ranked_what(const Leaderboard& board);
/// The GPU every row was timed on, or "" when rows differ or name none.
std::string common_gpu(const Leaderboard& board);
/// The text without control characters, escape sequences and invalid UTF-8
/// (strip_control_chars), so a name cannot drive a terminal; keeps valid UTF-8 letters.
std::string printable(const std::string& text);
/// Number of code points in valid UTF-8 `text` (display width for most names).
std::size_t width(const std::string& text);
/// `text` cut to at most `max` code points, ending in "..." (or "…" with `unicode`) when cut.
std::string truncate(const std::string& text, std::size_t max, bool unicode);

}  // namespace convlab::grader::board
