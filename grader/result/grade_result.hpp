/// @file
/// @brief The outcome of grading one submission: one CheckResult per check, the ranked time,
/// and where it ran. The report JSON (schema "convlab-grade-report/1"), Gradescope's
/// results.json and the results database are all written from this.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace convlab::grader {

/// How a check ended.
enum class CheckStatus { passed, failed, skipped };

/// "passed", "failed", "skipped"
inline const char* status_name(CheckStatus s) {
  switch (s) {
    case CheckStatus::passed:
      return "passed";
    case CheckStatus::failed:
      return "failed";
    case CheckStatus::skipped:
      return "skipped";
  }
  return "failed";
}

/// One graded check. `reason` is a stable code the tests and the database use:
///
/// | reason | meaning |
/// | --- | --- |
/// | ok | passed |
/// | wrong_count | the network ran, with another number of correct predictions than expected |
/// | mismatch | element-wise: some output element is outside the tolerance (NaN included) |
/// | memory_error | compute-sanitizer memcheck found an invalid access |
/// | input_written | the team's code changed an input (x or k) it was handed |
/// | gpu_memory | the referee ran out of device memory beside the team's process |
/// | timeout | the wall-clock limit killed the run |
/// | crash | killed by a signal (segmentation fault, abort, CPU-time limit...) |
/// | cuda_error | a CUDA call or kernel of the team's code failed |
/// | output_limit | the run printed more than its output limit |
/// | memory_limit | the run passed its memory limit (every process was killed) |
/// | not_implemented | the stub is still there |
/// | error | the team's code threw (or the harness refused its input) |
/// | exit_code | the process ended with a non-zero code before reporting |
/// | no_result | the process ended without a well-formed result document |
/// | build_failed | the submission did not compile (also: the check did not run for it) |
/// | forbidden_file | the submission held files outside the milestone's list (ignored) |
/// | forbidden_include, forbidden_symbol | the team's code uses what it may not |
/// | framework_build_failed | the pristine framework did not build: the grader's problem |
/// | no_gpu | a GPU check on a machine without a usable GPU (skipped, never passed) |
/// | skipped | not run for another stated reason (e.g. compute-sanitizer missing) |
/// | grader_error | the grader itself failed on this check (reported, never blamed) |
struct CheckResult {
  std::string id;    ///< unique in a report, e.g. "network/best/ece408-high/10000"
  std::string name;  ///< what a student reads, e.g. "best: ece408-high, 10000 images"
  /// files, build, symbols, network (hidden models too), elementwise, memcheck, time
  std::string kind;
  std::string milestone;  ///< m2, m3 or final (which milestone's data the check comes from)
  CheckStatus status = CheckStatus::failed;  ///< passed, failed or skipped
  std::string reason = "ok";                 ///< one of the codes above
  double score = 0.0;                        ///< max_score when passed, else 0
  double max_score = 0.0;                    ///< the check's points
  /// What the student reads: what happened and what to do next (the first mismatches with
  /// coordinates, the crash and the tail of the output, the forbidden symbol...).
  std::string output;
  bool hidden = false;  ///< a hidden model: students see the outcome, not the model's name

  // Filled where they apply.
  std::string variant;      ///< GPU variant, or "cpu"
  std::string model;        ///< model name (hidden models: the file's stem, staff reports only)
  std::int64_t images = 0;  ///< N: the first N test images
  std::optional<std::int64_t> expected_correct;  ///< the count the model must reach
  std::optional<std::int64_t> correct;           ///< the count reached (the worst timed run's)
  std::optional<double> op_time_s;               ///< fastest timed run (the original rule)
  std::optional<double> op_time_median_s;        ///< median of the timed runs
  std::vector<double> op_time_runs_s;            ///< every timed run
  std::optional<double> reference_time_s;  ///< cuDNN (GPU) or the library conv (CPU), same run
  std::optional<double> worst_error;       ///< element-wise: largest |got - want|
  double wall_s = 0.0;                     ///< how long the check took, sandbox included
  std::string details_json;  ///< kind-specific details as a JSON object ("{}" if none)
};

/// Where the timed checks ran.
struct MachineInfo {
  std::string gpu_name;     ///< empty for CPU-only milestones
  std::string gpu_driver;   ///< NVIDIA kernel driver version
  std::string cuda_driver;  ///< CUDA driver API version
  std::string cpu_name;     ///< the grading machine's CPU model
  std::string hostname;     ///< the grading machine's name
};

/// The whole grade of one submission for one milestone.
struct GradeResult {
  std::string team;         ///< the team's name
  std::string milestone;    ///< m2, m3, final, or all
  std::string submission;   ///< absolute path of what was graded
  std::string started_at;   ///< UTC, ISO 8601
  double duration_s = 0.0;  ///< wall clock of the whole grade, build included
  std::uint64_t seed = 0;   ///< element-wise inputs were drawn from it
  double score = 0.0;       ///< sum of the checks' scores
  double max_score = 0.0;   ///< sum of the checks' points
  /// The ranked time: Op Time of the ranked variant on the milestone's default model and N,
  /// present only when that check passed.
  std::optional<double> op_time_s;
  std::optional<double> op_time_median_s;  ///< the median timed run of the ranked check
  std::optional<double> reference_time_s;  ///< the library convolution in the same run
  std::optional<double> speedup;           ///< reference_time_s / op_time_s
  std::string ranked_variant;              ///< the variant whose time ranks (cpu for m2)
  std::string ranked_model;                ///< the milestone's default model
  std::int64_t ranked_images = 0;          ///< and N
  /// Reasons for a human to look (e.g. "best is 14.2x faster than cuDNN").
  std::vector<std::string> flags;
  MachineInfo machine;              ///< where it ran
  std::string sandbox_json;         ///< the SandboxFeatures and limits, as a JSON object
  /// Graded with --allow-degraded, and the isolation features this machine lacked then.
  bool allow_degraded = false;
  std::vector<std::string> degraded_features;
  std::vector<CheckResult> checks;  ///< in the order they ran: files, build, symbols, the rest

  /// Only checks matching these globs ran (`--only`; files, build and symbols always run).
  std::vector<std::string> only;
  /// True when the score is not the milestone's full grade: `only` left checks out, a check
  /// could not run here (no usable GPU, no compute-sanitizer), or, in the starter kit, the
  /// course's hidden models were not there to run.
  bool partial = false;
  /// Checks of the plan could not run here (no usable GPU, no compute-sanitizer, the kit
  /// without the hidden models): `convlab grade` exits kExitIncomplete. --only alone is not.
  bool incomplete = false;
  /// Points of the checks that did not run here (skipped): neither scored nor failed.
  double points_not_checked = 0.0;
  /// What this grade did not check, one line each ("4 checks, 32 points: no usable GPU ..."),
  /// for the summary and report.json; empty when every check of the milestone ran.
  std::vector<std::string> not_run;
  /// Set when the grade could not be completed for the grader's own reasons (the pristine
  /// framework did not build...); empty otherwise.
  std::string grader_error;
  std::string grader_version;  ///< convlab's version
  /// Hash of the framework sources the submission was built against ("fnv1a64:<hex>").
  std::string framework_hash;
};

}  // namespace convlab::grader
