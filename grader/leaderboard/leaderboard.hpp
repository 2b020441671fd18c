/// @file
/// @brief `convlab leaderboard`: best correct time per team, ranking points by the original
/// rule (standard deviations from the class median, linear onto 0-25) or by a threshold rule,
/// as a table, CSV and a self-contained HTML page with charts.
#pragma once

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
  double full_ms = 0.0, zero_ms = 0.0;
};

/// One row of the leaderboard.
struct LeaderboardRow {
  int rank = 0;
  std::string team;  ///< or its anonymous label ("Team 07") in the anonymised view
  TeamBest best;
  double stddevs_from_median = 0.0;  ///< negative: faster than the median
  double points = 0.0;
};

/// The whole board and its statistics.
struct Leaderboard {
  std::string milestone;
  RankingRule rule;
  double median_s = 0.0, stddev_s = 0.0;
  std::vector<LeaderboardRow> rows;  ///< fastest first
};

/// Ranks `teams` by `rule`. anonymize: replace names with stable labels that do not reveal
/// the name (a keyed hash), so a student can find their own row by its label only if told it.
Leaderboard rank_teams(const std::string& milestone, std::vector<TeamBest> teams,
                       const RankingRule& rule, bool anonymize);

/// The board as CSV (rank, team, op time ms, median ms, cuDNN ms, speedup, sigma, points).
std::string leaderboard_csv(const Leaderboard& board);
/// The board as one self-contained HTML page (inline CSS and SVG, no external asset).
std::string leaderboard_html(const Leaderboard& board);
/// The board as a fixed-width text table for the terminal.
std::string leaderboard_text(const Leaderboard& board);

}  // namespace convlab::grader
