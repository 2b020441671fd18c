/// @file
/// @brief `convlab grade`: builds one submission against a pristine copy of the framework and
/// runs every check of a milestone in the sandbox.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "grader/result/grade_result.hpp"

namespace convlab::grader {

/// Everything `convlab grade` accepts.
struct GradeOptions {
  std::filesystem::path submission;  ///< folder holding student/ (or its files, flat)
  std::string milestone;             ///< m2, m3, final or all
  std::string team;                  ///< default: the submission folder's name
  std::filesystem::path out;         ///< report.json, results.json, logs/ (default ./grade-TEAM)
  std::optional<std::filesystem::path> db;        ///< results database to add a row to
  std::vector<std::filesystem::path> model_dirs;  ///< hidden models (never shown to students)
  std::optional<std::filesystem::path> data;      ///< Fashion-MNIST directory
  std::optional<std::uint64_t> seed;              ///< element-wise inputs; default: drawn now
  std::optional<int> runs;                        ///< timed runs; default: the milestone's (3)
  /// Untimed checks run at once (the timed ones always alone, first); default: a quarter of
  /// the cores, 2 to 4.
  std::optional<int> check_jobs;
  /// Wall-clock limit of each check, in seconds; default: the milestone's time_limit_s.
  std::optional<double> time_limit_s;
  /// Memory limit of each process of the team's build, in MiB; default 4096.
  std::optional<int> build_memory_mib;
  /// Where the pristine framework is built once and reused (default: $CONVLAB_CACHE, else
  /// $XDG_CACHE_HOME/convlab, else ~/.cache/convlab).
  std::optional<std::filesystem::path> cache;
  bool keep_work = false;  ///< keep the build folder and sandbox folders
  /// Grade even where an isolation feature is missing (recorded in the report); without it
  /// the grade refuses to start and says which feature is missing and how to get it.
  bool allow_degraded = false;
  /// Run only the checks whose id matches one of these globs (fnmatch, `*` crosses `/`);
  /// files, build and symbols always run. Empty: every check. A glob that matches no check
  /// is bad input.
  std::vector<std::string> only;
  /// Time every network check as the ranked one is, and give its Op Time: the submission
  /// service's `run` jobs, which print each as `convlab run` does (grade --as-run).
  bool time_networks = false;
  /// More paths the checks may not read, besides the data set, the --models folders, the
  /// staff solutions and --db (grade-all adds the class's other submissions and outputs).
  std::vector<std::filesystem::path> hide_paths;
};

/// Exit status of `convlab grade` when the grade is incomplete (GradeResult::incomplete): some
/// checks could not run here, so the score is not the milestone's full grade. 0 is a complete
/// grade whatever the score (or the checks --only chose), 1 bad input, 2 the grader's own
/// failure.
inline constexpr int kExitIncomplete = 4;

/// One line of progress ("building", "network/best/ece408-high/10000: passed").
using ProgressFn = std::function<void(const std::string& line)>;

/// Grades one submission; writes report.json, results.json and logs/ under options.out and a
/// row to options.db. Throws Error only for the grader's own bad input (no such submission
/// folder, unknown milestone, unusable --out, missing data, a --only glob that matches no
/// check, --db without SQLite); anything the submission does becomes a failed check, and a
/// failure of the grader's own (the pristine framework does not build) is returned in
/// GradeResult::grader_error.
GradeResult grade_submission(const GradeOptions& options, const ProgressFn& progress = {});

}  // namespace convlab::grader
