// The leaderboard as CSV and as a terminal table.
#include <algorithm>
#include <sstream>

#include "grader/leaderboard/board_format.hpp"
#include "grader/leaderboard/leaderboard.hpp"

namespace convlab::grader {

namespace {

// RFC 4180 quoting; a field a spreadsheet would evaluate (=, +, -, @ first) is made text with
// a leading apostrophe, so a team name cannot become a formula.
std::string csv_field(const std::string& s) {
  std::string v = s;
  if (!v.empty() &&
      (v[0] == '=' || v[0] == '+' || v[0] == '-' || v[0] == '@' || v[0] == '\t' || v[0] == '\r')) {
    v.insert(v.begin(), '\'');
  }
  if (v.find_first_of(",\"\r\n") == std::string::npos) return v;
  std::string out = "\"";
  for (char c : v) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + "\"";
}

std::string pad_left(const std::string& s, std::size_t w) {
  const std::size_t n = board::width(s);
  return n >= w ? s : std::string(w - n, ' ') + s;
}

std::string pad_right(const std::string& s, std::size_t w) {
  const std::size_t n = board::width(s);
  return n >= w ? s : s + std::string(w - n, ' ');
}

}  // namespace

std::string leaderboard_csv(const Leaderboard& board) {
  std::ostringstream out;
  out << "rank,team,op_time_ms,median_ms,cudnn_ms,speedup,sigma,points,flagged,gpu,run_id\n";
  for (const LeaderboardRow& r : board.rows) {
    const auto ms = [](std::optional<double> s) { return s ? board::fixed(*s * 1e3, 4) : ""; };
    out << r.rank << ',' << csv_field(r.team) << ',' << ms(r.best.op_time_s) << ','
        << ms(r.best.op_time_median_s) << ',' << ms(r.best.reference_time_s) << ','
        << board::speedup(r.best) << ',' << board::fixed(r.stddevs_from_median, 4) << ','
        << board::fixed(r.points, 3) << ',' << (r.best.flagged ? 1 : 0) << ','
        << csv_field(r.best.gpu_name) << ','
        << (board.anonymized ? std::string() : std::to_string(r.best.run_id)) << '\n';
  }
  return out.str();
}

std::string leaderboard_text(const Leaderboard& board) {
  std::ostringstream out;
  out << "Leaderboard: milestone " << board.milestone << ", " << board.rows.size()
      << (board.rows.size() == 1 ? " team" : " teams") << (board.anonymized ? " (anonymised)" : "")
      << "\n";
  if (board.rows.empty()) {
    out << "No team has a correct timed run on milestone " << board.milestone
        << " yet: record grades with `convlab grade ... --db FILE`.\n";
    return out.str();
  }
  out << "Ranked by " << board::ranked_what(board);
  if (const std::string gpu = board::common_gpu(board); !gpu.empty()) {
    out << " on " << board::printable(gpu);
  }
  out << "\nMedian " << board::ms(board.median_s) << " ms, standard deviation "
      << board::ms(board.stddev_s) << " ms (population)\n"
      << "Points (" << board.rule.rule << "): " << board::rule_sentence(board.rule) << "\n\n";

  // Team names can be anything a student typed: printable() keeps escape codes out.
  std::vector<std::string> names;
  std::size_t name_w = 4;
  for (const LeaderboardRow& r : board.rows) {
    names.push_back(board::truncate(board::printable(r.team), 32, false));
    name_w = std::max(name_w, board::width(names.back()));
  }
  // m2 is timed beside the CPU library convolution, the GPU milestones beside cuDNN.
  const char* reference = board.rule.cpu ? "Lib ms" : "cuDNN ms";
  const char* headers[] = {"Op Time ms", "Median ms", reference, "Speedup", "Sigma", "Points"};
  out << pad_left("Rank", 4) << "  " << pad_right("Team", name_w);
  for (const char* h : headers) out << "  " << pad_left(h, 10);
  out << "\n" << std::string(4 + 2 + name_w + 6 * 12, '-') << "\n";
  bool any_flag = false;
  for (std::size_t i = 0; i < board.rows.size(); ++i) {
    const LeaderboardRow& r = board.rows[i];
    const std::string sp = board::speedup(r.best);
    std::string sigma = board::fixed(r.stddevs_from_median, 2);
    if (r.stddevs_from_median > 0) sigma.insert(sigma.begin(), '+');
    out << pad_left(std::to_string(r.rank), 4) << "  " << pad_right(names[i], name_w) << "  "
        << pad_left(board::ms(r.best.op_time_s), 10) << "  "
        << pad_left(board::ms(r.best.op_time_median_s, "-"), 10) << "  "
        << pad_left(board::ms(r.best.reference_time_s, "-"), 10) << "  "
        << pad_left(sp.empty() ? "-" : sp + "x", 10) << "  " << pad_left(sigma, 10) << "  "
        << pad_left(board::fixed(r.points, 2), 10) << (r.best.flagged ? "  (!)" : "") << "\n";
    any_flag = any_flag || r.best.flagged;
  }
  if (any_flag) {
    out << "\n(!) flagged for a human to look at (e.g. far faster than "
        << (board.rule.cpu ? "the CPU library convolution" : "cuDNN") << ").\n";
  }
  if (board.rule.cpu) {
    out << "Lib ms: the CPU library convolution, timed in the same run.\n";
  }
  return out.str();
}

}  // namespace convlab::grader
