/// @file
/// @brief The results database: one row per grading run and one per check, in SQLite (WAL,
/// a schema version, migrations), safe for several graders writing at once.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "grader/result/grade_result.hpp"

namespace convlab::grader {

/// One team's best correct time on a milestone, for the leaderboard.
struct TeamBest {
  std::string team;                        ///< as graded (--team)
  std::int64_t run_id = 0;                 ///< the grading run it came from
  double op_time_s = 0.0;                  ///< fastest correct ranked time over the team's runs
  std::optional<double> op_time_median_s;  ///< median of that run's timed runs
  std::optional<double> reference_time_s;  ///< cuDNN in that same run
  std::string gpu_name;                    ///< where that run was timed
  std::string graded_at;                   ///< that run's start (UTC, ISO 8601)
  bool flagged = false;                    ///< that run carries a flag for a human to look
  std::vector<std::string> flags;          ///< the flags' texts
  std::string ranked_variant;              ///< the variant whose time ranks
  std::string ranked_model;                ///< the model it was timed on
  std::int64_t ranked_images = 0;          ///< and N
  /// The run is the team's last grade submitted to the service (convlab serve) before its
  /// deadline, ranked whatever its time; false: the team's fastest run.
  bool submitted = false;
  /// Best correct time of every variant in that run: (variant, seconds), in the order the
  /// run checked them. Network checks that passed on ranked_model with ranked_images only.
  std::vector<std::pair<std::string, double>> variants;
};

/// One stored grading run, read back.
struct StoredRun {
  std::int64_t id = 0;      ///< the run's row id
  GradeResult result;       ///< every field record() stored, checks in their original order
  std::string report_json;  ///< the report as recorded
  std::string recorded_at;  ///< when the row was written (UTC, ISO 8601)
  std::string report_id;    ///< report_id(report_json); empty for a placeholder report
  /// The report's `allow_degraded` (the grade was allowed to run without some sandbox
  /// feature); nullopt when the report does not say.
  std::optional<bool> allow_degraded;
  /// The report's `degraded_features` (sandbox features the grade ran without); empty when the
  /// report does not say.
  std::vector<std::string> degraded_features;
};

/// What record_once() did.
struct Recorded {
  std::int64_t id = 0;    ///< the run's row id, new or already there
  bool inserted = false;  ///< false: the same report was already recorded as run `id`
};

/// The stable id of a grade report: "fnv1a64:" and the hash of its canonical form (parsed and
/// written back compactly, keys sorted), so that layout does not change it. nullopt for text
/// that is not a JSON object with a "schema" key (a placeholder: such rows are never merged).
std::optional<std::string> report_id(const std::string& report_json);

/// How to open the database.
struct ResultsDbOptions {
  /// Create the file when missing (the grader); false: it must exist (the leaderboard).
  bool create = true;
  /// Migrate up to this schema version; 0: the current one. An older one is only for tests
  /// that build an old file and then check its upgrade; such a handle cannot record().
  int migrate_to = 0;
};

/// A handle on the database file; opening creates or migrates it. Several processes may open
/// the same file and record at once: writes wait and retry while another holds the lock. One
/// handle serves one thread; threads that record in parallel each open their own.
class ResultsDb {
 public:
  /// Opens (creating if needed) and migrates to the current schema. Throws Error with the
  /// file name on a file that is not a convlab results database or is newer than this grader.
  explicit ResultsDb(const std::filesystem::path& file, const ResultsDbOptions& options = {});
  ~ResultsDb();
  ResultsDb(const ResultsDb&) = delete;
  ResultsDb& operator=(const ResultsDb&) = delete;

  /// The schema version this grader writes.
  static int current_schema_version();
  /// The file's schema version.
  int schema_version() const;
  /// The database file.
  const std::filesystem::path& file() const;

  /// Stores one grading run and its checks in one transaction (retried while another grader
  /// holds the lock); returns the run's id. `report_json` is kept verbatim.
  /// A report already recorded (same report_id and the same document) is not recorded again:
  /// its existing id is returned.
  std::int64_t record(const GradeResult& result, const std::string& report_json);
  /// record(), saying whether a row was added. Throws Error when another document has the same
  /// report id (a hash collision: never merged silently).
  Recorded record_once(const GradeResult& result, const std::string& report_json);
  /// The run holding the report with this report_id, or nullopt.
  std::optional<std::int64_t> find_report(const std::string& report_id) const;
  /// The run `id` as stored, or nullopt when there is none.
  std::optional<StoredRun> load_run(std::int64_t id) const;

  /// Every team's ranked run on `milestone`, fastest first (ties: earlier run): for a team
  /// that graded through the submission service, its last grade submitted there; for any
  /// other, its best correct time. Runs without an op time (the ranked check failed or was not
  /// timed) never count, so a team whose last submission failed is not ranked.
  std::vector<TeamBest> best_per_team(const std::string& milestone) const;
  /// Number of grading runs and of check rows (for tests and summaries).
  std::int64_t run_count() const;
  /// Number of check rows over all runs.
  std::int64_t check_count() const;

  /// A random secret made when the file was created (hex): the key of the leaderboard's
  /// anonymous labels, so a label stays the same for a team in this database and cannot be
  /// computed from the name without the file.
  std::string anonymize_key() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace convlab::grader
