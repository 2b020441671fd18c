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
const char* status_name(CheckStatus s);

/// One graded check. `reason` is a stable code the tests and the database use:
/// ok, wrong_count, mismatch, timeout, crash, cuda_error, output_limit, not_implemented,
/// exit_code, no_result, build_failed, forbidden_file, forbidden_include, forbidden_symbol,
/// no_gpu, skipped.
struct CheckResult {
  std::string id;    ///< unique in a report, e.g. "network/best/ece408-high/10000"
  std::string name;  ///< what a student reads, e.g. "best: ece408-high, 10000 images"
  std::string kind;  ///< files, build, symbols, network, elementwise, time
  CheckStatus status = CheckStatus::failed;
  std::string reason = "ok";
  double score = 0.0;
  double max_score = 0.0;
  /// What the student reads: what happened and what to do next (the first mismatches with
  /// coordinates, the crash and the tail of the output, the forbidden symbol...).
  std::string output;
  bool hidden = false;  ///< a hidden model: students see the outcome, not the model's name

  // Filled where they apply.
  std::string variant;  ///< GPU variant, or "cpu"
  std::string model;
  std::int64_t images = 0;
  std::optional<std::int64_t> expected_correct, correct;
  std::optional<double> op_time_s;         ///< fastest timed run (the original rule)
  std::optional<double> op_time_median_s;  ///< median of the timed runs
  std::vector<double> op_time_runs_s;      ///< every timed run
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
  std::string cpu_name;
  std::string hostname;
};

/// The whole grade of one submission for one milestone.
struct GradeResult {
  std::string team;
  std::string milestone;  ///< m2, m3, final, or all
  std::string submission;  ///< absolute path of what was graded
  std::string started_at;  ///< UTC, ISO 8601
  double duration_s = 0.0;
  std::uint64_t seed = 0;  ///< element-wise inputs were drawn from it
  double score = 0.0;
  double max_score = 0.0;
  /// The ranked time: Op Time of the ranked variant on the milestone's default model and N,
  /// present only when that check passed.
  std::optional<double> op_time_s, op_time_median_s, reference_time_s;
  std::optional<double> speedup;  ///< reference_time_s / op_time_s
  std::string ranked_variant;
  std::string ranked_model;        ///< the milestone's default model
  std::int64_t ranked_images = 0;  ///< and N
  /// Reasons for a human to look (e.g. "best is 14.2x faster than cuDNN").
  std::vector<std::string> flags;
  MachineInfo machine;
  std::string sandbox_json;  ///< the SandboxFeatures and limits, as a JSON object
  std::vector<CheckResult> checks;
};

}  // namespace convlab::grader
