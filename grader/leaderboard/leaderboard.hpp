/// @file
/// @brief `convlab leaderboard`: best correct time per team, ranking points by the original
/// rule (standard deviations from the class median, linear onto 0-25) or by a threshold rule,
/// as a table, CSV and a self-contained HTML page with charts.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "grader/db/results_db.hpp"

namespace convlab::grader {

/// How times become points; read from the milestone's checks.json "ranking" object.
struct RankingRule {
  /// "stddev_from_median" (the original) or "threshold".
  std::string rule = "stddev_from_median";
  double points = 25.0;  ///< full credit
  /// stddev_from_median: the median team gets points/2; each standard deviation faster
  /// (slower) adds (takes) `points_per_stddev`, clamped to [0, points].
  double points_per_stddev = 6.25;
  /// threshold: full credit at or under full_ms, zero at or over zero_ms, linear between.
  double full_ms = 0.0;
  /// threshold: no credit at or over this time.
  double zero_ms = 0.0;
  /// The milestone runs on the CPU: teams are compared with the CPU library convolution, not
  /// cuDNN (its default_device).
  bool cpu = false;
};

/// The rule of `milestones/<milestone>/checks.json` under `root`: its "ranking" object, or
/// the original rule (25 points, 6.25 per standard deviation) when the milestone has none.
/// `rule_override` ("stddev_from_median" or "threshold") picks the other rule with the same
/// file's numbers. Throws Error for an unknown milestone or rule, or inconsistent numbers.
RankingRule load_ranking_rule(const std::filesystem::path& root, const std::string& milestone,
                              const std::optional<std::string>& rule_override = std::nullopt);

/// Points for a time by `rule`: `sigma` is the time's standard deviations from the median
/// (stddev_from_median), `time_s` the time itself (threshold).
double ranking_points(const RankingRule& rule, double sigma, double time_s);

/// One row of the leaderboard.
struct LeaderboardRow {
  int rank = 0;      ///< 1 for the fastest; equal times share a rank
  std::string team;  ///< or its anonymous label ("Team 3f9a0c") in the anonymised view
  TeamBest best;     ///< the run it comes from (its team field anonymised too)
  double stddevs_from_median = 0.0;  ///< negative: faster than the median
  double points = 0.0;               ///< ranking points by the board's rule
};

/// The whole board and its statistics.
struct Leaderboard {
  std::string milestone;             ///< m2, m3 or final
  RankingRule rule;                  ///< how points were given
  double median_s = 0.0;             ///< median of the teams' best times
  double stddev_s = 0.0;             ///< their population standard deviation
  bool anonymized = false;           ///< team names replaced by labels
  std::vector<LeaderboardRow> rows;  ///< fastest first
};

/// The anonymous label of `team` under `key` (ResultsDb::anonymize_key()): "Team " and the
/// first `hex_digits` hex digits of a keyed hash (SipHash-2-4) of the name.
std::string anonymous_label(const std::string& team, const std::string& key, int hex_digits = 6);

/// Ranks `teams` by `rule`. With `anonymize_key`, names are replaced by stable labels that
/// do not reveal the name (anonymous_label; lengthened where two would collide), so a student
/// can find their own row by its label only if told it; flags (staff business) and run ids
/// are dropped from that view too.
Leaderboard rank_teams(const std::string& milestone, std::vector<TeamBest> teams,
                       const RankingRule& rule,
                       const std::optional<std::string>& anonymize_key = std::nullopt);

/// The board as CSV (rank, team, op time ms, median ms, cuDNN ms, speedup, sigma, points,
/// flagged, GPU). Fields that a spreadsheet would run as a formula are quoted as text.
std::string leaderboard_csv(const Leaderboard& board);
/// The board as one self-contained HTML page (inline CSS and SVG, no script, no external
/// asset): the ranked table, the distribution of team times around the median, and each
/// team's variants. `live_refresh_s` > 0: the page is served live (convlab serve) and a
/// browser reloads it after that many seconds.
std::string leaderboard_html(const Leaderboard& board, int live_refresh_s = 0);
/// The leaderboard page's style sheet, for the pages served beside it.
const char* leaderboard_css();
/// The board as a fixed-width text table for the terminal.
std::string leaderboard_text(const Leaderboard& board);

}  // namespace convlab::grader
