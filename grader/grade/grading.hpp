/// @file
/// @brief Inside `convlab grade`: the state of one grade (Grading), the harness that runs a
/// check's two processes (harness.cpp), and the interface every check kind implements (one
/// file each: check_files.cpp, check_build.cpp, check_symbols.cpp, check_network.cpp,
/// check_hidden_models.cpp, check_elementwise.cpp, check_memcheck.cpp, check_time.cpp).
#pragma once

#include <chrono>
#include <filesystem>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "grader/builder/build_submission.hpp"
#include "grader/grade/grade.hpp"
#include "grader/grade/grading_plan.hpp"
#include "grader/sandbox/runtime_view.hpp"
#include "grader/sandbox/sandbox.hpp"
#include "reference/core/text.hpp"
#include "reference/data/fashion_mnist.hpp"

namespace convlab::grader {

/// A check's failure: its reason code and what the student reads.
struct Failure {
  std::string reason;                        ///< one of CheckResult's reason codes
  std::string output;                        ///< what the student reads
  CheckStatus status = CheckStatus::failed;  ///< failed, or skipped (not the team's doing)
};

/// What one check's two processes produced: the team's (in the sandbox) and the referee's.
struct WorkerOutcome {
  SandboxResult run;                  ///< the team's process (convlab-team); a probe has none
  SandboxResult referee;              ///< the trusted referee (convlab-check)
  std::optional<nlohmann::json> doc;  ///< the referee's well-formed result document
  std::string doc_problem;            ///< why there is none
  /// The document's "status", or "" without one.
  std::string status() const { return doc ? doc->value("status", "") : ""; }
  /// The document's "message", or "" without one.
  std::string message() const { return doc ? doc->value("message", "") : ""; }
};

class Grading;

/// The passes of one network run: the count (the test images in order), the timed passes
/// (fresh inputs, every call verified, then the reference), or both in one run.
enum class NetworkPasses { count, timed, count_and_timed };

/// One kind of check. Each kind lives in its own file and is listed once in check_kinds.cpp;
/// the orchestrator (grading.cpp) runs every planned check through its kind.
class CheckKind {
 public:
  virtual ~CheckKind() = default;
  /// Whether the check runs the team's code: then it needs a good build and, for a GPU
  /// milestone, a usable GPU (files, build and symbols judge the build itself).
  virtual bool runs_team_code() const { return true; }
  /// Runs check `p` of grade `g` and fills `c`: status, reason, score, output, details.
  virtual void run(Grading& g, PlannedCheck& p, CheckResult& c) const = 0;
};

/// The kind that runs `p`: a hidden model's network check is "hidden", else p.check.kind.
/// Throws Error for a kind no file implements.
const CheckKind& check_kind_of(const PlannedCheck& p);

/// The kind named `kind` ("files", "build", "symbols", "network", "hidden", "elementwise",
/// "memcheck", "time"). Throws Error for another name.
const CheckKind& check_kind(const std::string& kind);

/// Passing `f` (or nothing) on to a check's result.
void apply_failure(const Failure& f, CheckResult& c);

/// The referee compared every timed call's output with the library convolution on the same
/// fresh input; a failure there is a wrong result, however the count came out.
std::optional<Failure> judge_verification(const nlohmann::json& doc, const PlannedCheck& p);

/// doc[key], or null where the (untrusted) document lacks it.
const nlohmann::json& field(const nlohmann::json& doc, const char* key);

/// printf of one double.
std::string fmt(const char* format, double v);

/// Points as the reports print them ("%g").
std::string points_text(double v);

/// "0.8562": the accuracy of `correct` of `n`, as the driver prints it.
std::string accuracy(std::int64_t correct, std::int64_t n);

/// The advice of a network check on a public model whose count is wrong (check_network.cpp).
std::string network_advice(const Grading& g, const PlannedCheck& p);

/// The Op Time figures of a timed network run (the referee's "timing") into `c`: the fastest
/// run, the median and every run.
void take_op_times(const nlohmann::json& doc, CheckResult& c);

/// Judges every pass's predictions against the labels; on a wrong count the failure's text
/// ends with `advice` (check_network.cpp).
std::optional<Failure> judge_predictions(Grading& g, const WorkerOutcome& w, const PlannedCheck& p,
                                         CheckResult& c, const std::string& advice);

/// Runs a network check's count and judges it (check_network.cpp). A timed check's failed
/// count is kept for the time check; its timed passes run later, alone (time_network).
void run_counted_network(Grading& g, PlannedCheck& p, CheckResult& c, const std::string& advice);

/// The key of `p`'s timed run in Grading::timed_runs(): its milestone and variant.
inline std::string timed_run_key(const PlannedCheck& p) {
  return p.check.milestone + "/" + p.check.variant;
}

/// The timed passes of timed network check `p`, whose count gave `c`: run alone, after every
/// check that may share the machine, and only when the count passed. A wrong timed call fails
/// `c` (the caller zeroes its score); the run is kept for the time check (check_network.cpp).
void time_network(Grading& g, PlannedCheck& p, CheckResult& c);

/// The state of one grade, shared by the orchestrator, the harness and the check kinds.
class Grading {
 public:
  Grading(const GradeOptions& options, const ProgressFn& progress)
      : opt_(options), progress_(progress) {}

  /// Plans, builds, runs every check and writes the reports.
  GradeResult run();

  /// One line of progress.
  void say(const std::string& line) const {
    const std::lock_guard lock(say_mutex_);
    if (progress_) progress_(escape_control_chars(line, true));
  }

  // The harness (harness.cpp).

  /// Runs one check: the referee with `args`, and (with_team) the team's process in the
  /// sandbox under `prefix` (compute-sanitizer), joined by one socket; logs under `log_id`
  /// (never the team's output of a `hidden` check: it could print the model).
  WorkerOutcome run_worker(const std::string& log_id, const std::vector<std::string>& args,
                           double wall_s, const std::vector<std::string>& prefix = {},
                           bool with_team = true, bool hidden = false);
  /// The grader's own failure (the referee failed or wrote no document), if any.
  std::optional<Failure> referee_failure(const WorkerOutcome& w) const;
  /// How the run of `p` failed (timeout, crash, CUDA error, ...), if it did.
  std::optional<Failure> failure_of(const WorkerOutcome& w, const PlannedCheck& p,
                                    bool sanitizer) const;
  /// Why a GPU check cannot run here (probed once), if it cannot.
  std::optional<Failure> gpu_unavailable(const PlannedCheck& p);
  /// The network run of `p` with `passes`; the timed passes use the referee's clock and fresh
  /// inputs from this grade's seed, and the reference follows them.
  WorkerOutcome run_network(const PlannedCheck& p, const std::string& log_id, NetworkPasses passes);
  /// `convlab run ...` for `p` on `images` images, as a student types it.
  std::string run_command(const PlannedCheck& p, std::int64_t images) const;
  /// How to debug a crash of `p` yourself.
  std::string debug_advice(const PlannedCheck& p) const;
  /// The first `n` test images as an IDX file the referee reads (written once).
  std::filesystem::path images_file(std::int64_t n);
  /// The classes of a model file (read once).
  std::int64_t model_classes(const std::filesystem::path& file);
  /// The wall-clock limit of `p`: --time-limit, else its milestone's.
  double time_limit(const PlannedCheck& p) const {
    return opt_.time_limit_s.value_or(p.spec->milestone.time_limit_s);
  }

  // What the check kinds read and add to.

  const GradeOptions& options() const { return opt_; }
  GradeResult& result() { return result_; }
  const BuildResult& build_result() const { return build_; }
  const data::Dataset& test_set() const { return test_; }
  const std::vector<MilestoneSpec>& specs() const { return specs_; }
  /// Where the logs go (OUT/logs).
  const std::filesystem::path& logs_dir() const { return logs_; }
  /// The timed network run of each (milestone/variant), for its time check.
  std::map<std::string, std::pair<WorkerOutcome, std::optional<Failure>>>& timed_runs() {
    return timed_runs_;
  }

 private:
  // The orchestrator (grading.cpp).
  void validate_options();
  void load_plan();
  void prepare_output();
  void prepare_isolation();
  void build();
  void add_build_checks();
  void run_checks();
  void run_one(PlannedCheck& p, CheckResult& c);
  CheckResult run_planned(std::size_t i);
  void timed_stage(std::size_t i, CheckResult& c);
  void report_check(std::size_t i, const CheckResult& c) const;
  bool runs_alone(const PlannedCheck& p) const;
  int check_jobs() const;
  void rank();
  /// Sums what did not run here into result_.not_run and marks the grade partial.
  void note_not_run();
  void finish();

  // The harness's halves (harness.cpp).
  SandboxSpec team_spec(double wall_s, const std::vector<std::string>& prefix, int fd) const;
  const std::vector<std::filesystem::path>& team_view(const std::vector<std::string>& prefix) const;
  SandboxSpec referee_spec(const std::vector<std::string>& args, double wall_s, int fd) const;
  void keep_logs(const std::string& log_id, const WorkerOutcome& w, bool with_team) const;

  const GradeOptions& opt_;
  const ProgressFn& progress_;
  std::chrono::steady_clock::time_point start_;
  GradeResult result_;
  std::filesystem::path root_, out_, logs_, work_, cache_, data_dir_;
  bool remove_work_ = true;
  std::vector<MilestoneSpec> specs_;
  std::vector<HiddenModel> hidden_;
  std::vector<PlannedCheck> plan_;
  std::vector<std::string> allowed_;          // the milestones' team_writes
  std::vector<std::string> allowed_folders_;  // and team_folders
  data::Dataset test_;
  BuildResult build_;
  bool cuda_build_ = false;
  std::vector<std::filesystem::path> hide_;
  std::map<std::string, std::string> env_;
  std::map<std::int64_t, std::filesystem::path> image_files_;
  std::map<std::string, std::int64_t> classes_;
  // The GPU, probed once with the harness itself: nullopt until probed; then "" when usable
  // or why not.
  std::optional<std::string> gpu_problem_;
  std::map<std::string, std::pair<WorkerOutcome, std::optional<Failure>>> timed_runs_;
  std::optional<SandboxResult> last_run_;
  std::optional<Limits> last_limits_;
  // What the team's process sees, by the program it starts with (the harness, or
  // compute-sanitizer): its linking closure and device nodes, made once.
  mutable std::map<std::string, std::vector<std::filesystem::path>> team_views_;
  mutable std::optional<GpuAssignment> gpu_;
  // Untimed checks run on several threads: the caches above and the progress lines are shared.
  mutable std::mutex shared_mutex_;
  mutable std::mutex say_mutex_;
  TempDirLock work_lock_;
};

}  // namespace convlab::grader
