/// @file
/// @brief The results database: one row per grading run and one per check, in SQLite (WAL,
/// a schema version, migrations), safe for several graders writing at once.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "grader/grade/grade_result.hpp"

namespace convlab::grader {

/// One team's best correct time on a milestone, for the leaderboard.
struct TeamBest {
  std::string team;
  std::int64_t run_id = 0;     ///< the grading run it came from
  double op_time_s = 0.0;      ///< fastest correct ranked time over the team's runs
  std::optional<double> op_time_median_s;
  std::optional<double> reference_time_s;  ///< cuDNN in that same run
  std::string gpu_name;
  std::string graded_at;
  bool flagged = false;
  /// Best correct time of every variant in that run: (variant, seconds).
  std::vector<std::pair<std::string, double>> variants;
};

/// A handle on the database file; opening creates or migrates it.
class ResultsDb {
 public:
  /// Opens (creating if needed) and migrates to the current schema. Throws Error with the
  /// file name on a file that is not a convlab results database or is newer than this grader.
  explicit ResultsDb(const std::filesystem::path& file);
  ~ResultsDb();
  ResultsDb(const ResultsDb&) = delete;
  ResultsDb& operator=(const ResultsDb&) = delete;

  /// The schema version this grader writes.
  static int current_schema_version();
  /// The file's schema version.
  int schema_version() const;

  /// Stores one grading run and its checks in one transaction (retried while another grader
  /// holds the lock); returns the run's id.
  std::int64_t record(const GradeResult& result, const std::string& report_json);

  /// Every team's best correct ranked time on `milestone`, fastest first.
  std::vector<TeamBest> best_per_team(const std::string& milestone) const;
  /// Number of grading runs and of check rows (for tests and summaries).
  std::int64_t run_count() const;
  std::int64_t check_count() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace convlab::grader
