/// @file
/// @brief The three steps of `convlab run`: plan (run_plan.cpp: every option checked before
/// any data is loaded), execute (run_execute.cpp: the network with each chosen convolution)
/// and report (run_report.cpp: the text lines or table, the advice, the JSON), joined by
/// run_command.cpp. The text and the JSON are two views of one RunResult.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <iosfwd>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "reference/commands/run_command.hpp"
#include "reference/conv/precision.hpp"
#include "reference/milestones/milestone.hpp"
#include "reference/network/network.hpp"
#include "reference/profile/report.hpp"

namespace convlab {

/// What a run will do, decided from the options and the milestone before anything loads.
struct RunPlan {
  RunOptions opt;  ///< the options as given
  /// false is --no-fuse: every conv layer is timed alone, even where the variant has a fused
  /// conv + tanh + max-pool launcher.
  bool fuse = true;
  std::chrono::steady_clock::time_point wall_start;  ///< when the command started
  Milestone ms;                                      ///< the milestone's data
  std::string device;                                ///< "cpu" or "gpu"
  bool profiling = false;                            ///< --profile or --profile-json
  std::filesystem::path model_path;                  ///< the model file
  std::int64_t n = 0;  ///< N, checked against the test set once it is loaded
  /// A milestone of CPU variants (m2): its declared convolution of opt.impl, null otherwise.
  /// Run and checked from here, so that the same plan can run any CPU convolution.
  CpuConvFn cpu_code = nullptr;
};

/// How a convolution's run went: it ran; its entry point is a stub; it failed; or wrong: its
/// layer check failed, so the network did not run.
enum class RunStatus { ok, not_implemented, error, wrong };
/// "ok", "not_implemented", "error", "wrong" (run.json's words).
const char* run_status_name(RunStatus s);

/// One convolution run through the whole network.
struct RunRecord {
  std::string label;                     ///< variant name, or the library convolution's name
  std::string code_file;                 ///< where its code lives (for advice)
  RunStatus status = RunStatus::ok;      ///< how its run went
  std::string error;                     ///< why it did not run
  NetworkRun run;                        ///< its times and output
  std::int64_t correct = 0;              ///< correct predictions
  std::optional<std::int64_t> expected;  ///< the count it must reach, if known
  bool reference = false;  ///< a library row shown for comparison, not the team's code
  /// Its declared precision class; a tf32 or fp16 variant is judged by `verdict`, the
  /// precision rule (reference/conv/precision.hpp), instead of the exact count.
  Precision precision = Precision::fp32;
  std::optional<PrecisionVerdict> verdict;  ///< set for tf32 and fp16 rows
  /// Whether it computed what it must: the rule's verdict, else the expected count.
  bool passes() const {
    if (verdict) return verdict->ok();
    return !expected || correct == *expected;
  }
};

/// What a run produced: every record, where it ran, and what --profile recorded.
struct RunResult {
  std::string model_name;                    ///< the model's own name
  std::vector<RunRecord> records;            ///< one, or the --variant all table's rows
  nlohmann::json gpu = nullptr;              ///< the GPU's name, driver, ... (null on the CPU)
  std::optional<profile::Profile> profiled;  ///< what --profile recorded
  std::optional<double> peak_flops;          ///< the --variant all table's fp32 ceiling
  std::string peak_note;                     ///< how it was measured, or why it was not
};

/// Checks every option against the milestone. Throws Error on bad input.
RunPlan plan_run(const RunOptions& opt, bool fuse);

/// Loads the data and the model (printing the original "Loading ..." lines to `out`), checks
/// the team's convolution(s) output by output on the model's conv layers (check_before_run:
/// silent when right; a wrong one is printed, recorded as "wrong" and not run), runs the
/// rest in the network and counts the correct predictions. Throws Error on bad input.
RunResult execute_run(const RunPlan& plan, std::ostream& out);

/// Prints the result (the original two lines, or a table), the advice for a wrong count and
/// the profile; writes the JSON files. Returns 0, or kExitIncorrect (a wrong count, or a
/// convolution that failed its layer check).
int report_run(const RunPlan& plan, const RunResult& result, std::ostream& out, std::ostream& err);

}  // namespace convlab
