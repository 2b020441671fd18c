#include "grader/leaderboard/board_format.hpp"
#include "reference/core/text.hpp"

#include <cstdio>

namespace convlab::grader::board {

std::string fixed(double value, int decimals) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, value);
  return buf;
}

std::string ms(std::optional<double> seconds, const std::string& missing) {
  return seconds ? fixed(*seconds * 1e3, 3) : missing;
}

std::string speedup(const TeamBest& best) {
  if (!best.reference_time_s || !(best.op_time_s > 0.0)) return "";
  return fixed(*best.reference_time_s / best.op_time_s, 2);
}

std::string rule_sentence(const RankingRule& rule) {
  auto num = [](double v) {
    std::string s = fixed(v, 2);
    while (s.back() == '0') s.pop_back();
    if (s.back() == '.') s.pop_back();
    return s;
  };
  if (rule.rule == "threshold") {
    return num(rule.points) + " points at or under " + num(rule.full_ms) + " ms, none at or over " +
           num(rule.zero_ms) + " ms, linear between";
  }
  return num(rule.points / 2) + " points at the median time, " + num(rule.points_per_stddev) +
         " more per standard deviation faster (fewer per one slower), between 0 and " +
         num(rule.points);
}

std::string ranked_what(const Leaderboard& board) {
  if (board.rows.empty()) return "Op Time";
  const TeamBest& b = board.rows.front().best;
  std::string s = "Op Time";
  if (!b.ranked_variant.empty()) s += " of variant " + b.ranked_variant;
  if (!b.ranked_model.empty()) {
    s += " on " + b.ranked_model;
    if (b.ranked_images > 0) s += ", " + std::to_string(b.ranked_images) + " images";
  }
  return s;
}

std::string common_gpu(const Leaderboard& board) {
  if (board.rows.empty()) return "";
  const std::string& first = board.rows.front().best.gpu_name;
  for (const LeaderboardRow& r : board.rows) {
    if (r.best.gpu_name != first) return "";
  }
  return first;
}

namespace {

// Length of the valid UTF-8 sequence at s[i], or 0 when it is not one.
std::size_t utf8_length(const std::string& s, std::size_t i) {
  const auto c = static_cast<unsigned char>(s[i]);
  std::size_t n = c < 0x80           ? 1
                  : (c >> 5) == 0x6  ? 2
                  : (c >> 4) == 0xe  ? 3
                  : (c >> 3) == 0x1e ? 4
                                     : 0;
  if (n == 0 || i + n > s.size()) return 0;
  for (std::size_t k = 1; k < n; ++k) {
    if ((static_cast<unsigned char>(s[i + k]) & 0xc0) != 0x80) return 0;
  }
  return n;
}

}  // namespace

std::string printable(const std::string& text) {
  return strip_control_chars(text);
}

std::size_t width(const std::string& text) {
  std::size_t w = 0;
  for (unsigned char c : text) w += (c & 0xc0) != 0x80;
  return w;
}

std::string truncate(const std::string& text, std::size_t max, bool unicode) {
  if (width(text) <= max) return text;
  const std::size_t keep = max - (unicode ? 1 : 3);
  std::size_t i = 0, w = 0;
  while (i < text.size() && w < keep) {
    const std::size_t n = utf8_length(text, i);
    i += n == 0 ? 1 : n;
    ++w;
  }
  return text.substr(0, i) + (unicode ? "\u2026" : "...");
}

}  // namespace convlab::grader::board
