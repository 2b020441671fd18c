/// @file
/// @brief `convlab grade-all DIR`: grades every submission of a class (one subfolder per team)
/// by running `convlab grade` on each as a child process, so that no submission can take the
/// class run down; CPU milestones in parallel, GPU milestones one per GPU at a time. Writes one
/// folder per team and a summary (summary.csv, summary.json). With --slurm the same grades run
/// as a Slurm job array (grader/class/slurm.hpp).
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace convlab::grader {

/// Everything `convlab grade-all` accepts.
struct GradeAllOptions {
  std::filesystem::path submissions;        ///< one subfolder per team; the team is the folder name
  std::string milestone;                    ///< m2, m3, final or all
  std::filesystem::path out;                ///< OUT/TEAM/ per team, summary.* at the top
  std::optional<std::filesystem::path> db;  ///< passed on to every `convlab grade`
  std::vector<std::filesystem::path> model_dirs;  ///< hidden models, passed on
  std::optional<std::filesystem::path> data;      ///< Fashion-MNIST directory, passed on
  std::optional<std::uint64_t> seed;              ///< passed on (one seed for the class)
  std::optional<int> runs;                        ///< timed runs, passed on
  std::optional<std::filesystem::path> cache;     ///< framework build cache, passed on
  std::vector<std::string> teams;                 ///< grade only these teams (empty: every team)
  /// Only the checks whose id matches one of these globs (`convlab grade --only`): a partial
  /// grade, for trying a setup quickly; it never ranks.
  std::vector<std::string> only;
  bool allow_degraded = false;                    ///< passed on: grade without full isolation
  /// Graders at once for CPU milestones; 0: half the cores, at least 1. GPU milestones are
  /// graded one per GPU at a time (`gpus`) so that timings do not disturb each other.
  int jobs = 0;
  double team_timeout_s = 7200.0;  ///< one team's whole grade; then it is a grader error
  /// The convlab executable that grades each team (default: this one, /proc/self/exe).
  std::optional<std::filesystem::path> grader;
  /// GPU milestones: the GPUs to grade on, one grade per GPU at a time, each grade seeing only
  /// its GPU (CUDA_VISIBLE_DEVICES). Empty: every visible GPU (visible_gpus()).
  std::vector<std::string> gpus;
};

/// One team's outcome.
struct TeamOutcome {
  std::string team;                        ///< the submission folder's name
  std::filesystem::path submission;        ///< the team's folder
  std::filesystem::path out;               ///< OUT/TEAM: report.json, results.json, grade.log
  bool graded = false;                     ///< a report was written (whatever the score)
  std::string error;                       ///< why not, when !graded
  int exit_code = -1;                      ///< of `convlab grade`; -1 when killed
  double wall_s = 0.0;                     ///< how long the team's grade took
  double score = 0.0;                      ///< from the report
  double max_score = 0.0;                  ///< from the report
  std::optional<double> op_time_s;         ///< the ranked time, when its check passed
  std::optional<double> op_time_median_s;  ///< median of the ranked time's runs
  std::optional<double> speedup;           ///< reference time / ranked time
  int checks_passed = 0;                   ///< checks with status "passed"
  int checks_total = 0;                    ///< checks in the report
  std::vector<std::string> flags;  ///< reasons for a human look (e.g. 10x faster than cuDNN)
  std::string grader_error;  ///< the report's own grader_error (the grader's fault, not the team's)
  /// A check failed with "Resource temporarily unavailable": it could not start a thread or
  /// process because the sandbox user's process limit, shared by every sandbox of that user,
  /// was reached, which another team graded at the same time can cause.
  bool contended = false;
  /// Graded a second time, alone, after a contended first grade (that grade is replaced).
  bool regraded_alone = false;
  /// The GPU the grade saw (CUDA_VISIBLE_DEVICES), when one was chosen for it.
  std::string gpu;
  /// With --slurm: the array task that graded the team ("JOB_TASK"), and whether it is a
  /// second task, after the first was lost for a reason of the cluster's.
  std::string slurm_task;
  bool resubmitted = false;

  /// "graded" or "grader error".
  std::string status() const { return graded ? "graded" : "grader error"; }
};

/// The whole class run.
struct ClassSummary {
  std::string milestone;              ///< m2, m3, final or all
  std::filesystem::path submissions;  ///< the class folder
  std::string started_at;             ///< UTC, ISO 8601
  double duration_s = 0.0;            ///< the whole run
  int jobs = 1;                       ///< graders at once
  bool interrupted = false;        ///< stopped by SIGINT/SIGTERM; the teams not reached are missing
  std::vector<TeamOutcome> teams;  ///< sorted by team (with a --team run: kept rows too)
  std::vector<std::string> gpus;   ///< the GPUs graded on (GPU milestones on this host)
  /// With --slurm: the job ids submitted (the array, then any resubmission).
  std::vector<std::string> slurm_jobs;

  /// Teams with a report.
  int graded() const;
};

/// What the class grader reports while it runs.
struct GradeAllEvents {
  /// Before any team starts: the team count and graders at once.
  std::function<void(int total, int jobs)> begin;
  /// A team's grade started.
  std::function<void(const std::string& team)> started;
  /// A team's grade ended.
  std::function<void(const TeamOutcome& outcome, int done, int total)> finished;
  /// Called about every 200 ms while graders run (redraws a progress bar).
  std::function<void()> tick;
  /// A line worth telling (--slurm: the job submitted, tasks resubmitted, reports ingested).
  std::function<void(const std::string& line)> note;
  /// --slurm: the array's progress ("slurm job 12: 1 queued, 2 running, 1 done, 0 failed of
  /// 4"), each time it changes.
  std::function<void(const std::string& line)> status;
};

/// The team folders of `submissions`, sorted (hidden folders and `exclude` skipped). Throws
/// Error when the folder does not exist or holds no team folder.
std::vector<std::filesystem::path> find_team_folders(const std::filesystem::path& submissions,
                                                     const std::filesystem::path& exclude = {});

/// Whether `milestone` runs on the GPU (m3, final, all) rather than only on the CPU (m2).
bool is_gpu_milestone(const std::string& milestone);

/// The GPUs a grade can be pinned to: the entries of CUDA_VISIBLE_DEVICES where it is set
/// (none when it is empty), else "0".."N-1" for the N GPUs of the NVIDIA driver
/// (/proc/driver/nvidia/gpus), else none (then GPU grades run one at a time, unpinned).
std::vector<std::string> visible_gpus();

/// Reads OUT/TEAM/report.json into `outcome` (score, op time, checks, flags); false, with
/// outcome.error set, when it is missing or not a grade report.
bool read_team_report(TeamOutcome& outcome);

/// Grades every team (or options.teams); writes summary.csv and summary.json into
/// options.out. When only some teams are graded, the summary keeps the other teams' rows from
/// the summary.json already there. Throws Error on bad options (no such folder, unknown
/// milestone or team, unusable --out).
ClassSummary grade_all(const GradeAllOptions& options, const GradeAllEvents& events = {});

/// The summary as CSV (one row per team).
std::string summary_csv(const ClassSummary& summary);
/// The summary as JSON (schema "convlab-class-summary/1").
std::string summary_json(const ClassSummary& summary);
/// The summary as a fixed-width table: team, score/max, op time, status, notes.
std::string summary_table(const ClassSummary& summary);

/// Requests a running grade_all() to stop (safe to call from a signal handler): running
/// graders are killed, the summary holds the teams graded so far.
void request_grade_all_stop();

}  // namespace convlab::grader
