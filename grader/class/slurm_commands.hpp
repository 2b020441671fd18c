/// @file
/// @brief Slurm's commands as the grader uses them, in one place for every caller (the job
/// arrays of `grade-all --slurm`, the Slurm executor of `convlab serve`): sbatch, squeue,
/// scontrol and sacct run with a time limit, and what they print read into records. No
/// scheduling of its own: Slurm decides where and when a job runs.
#pragma once

#include <filesystem>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace convlab::grader {

/// Seconds one Slurm command may take: they answer in a second, and a stuck controller must
/// not hang the caller.
constexpr double kSlurmCommandTimeout = 60.0;

/// One job, or one task of a job array, as squeue, scontrol or sacct shows it.
struct SlurmTaskState {
  std::string job;        ///< the job's id (an array's: the array's id)
  int task = -1;          ///< the array index; -1 for a job that is not an array
  std::string state;      ///< PENDING, RUNNING, COMPLETED, CANCELLED, NODE_FAIL...
  std::string reason;     ///< scontrol's Reason
  std::string exit_code;  ///< scontrol's ExitCode ("0:15": code 0, signal 15)
  std::string node;       ///< where it runs or ran; empty when not known (yet)
};

/// "12_3" for task 3 of array 12, "12" for job 12.
std::string slurm_task_id(const std::string& job, int task);

/// The job id in `sbatch --parsable` output ("123" or "123;cluster"); empty when none.
std::string parse_sbatch_job(const std::string& output);
/// Lines of `squeue -h -r -o "%F %K %T %N"` (the node is optional): the jobs and array tasks
/// still queued or running. A job that is not an array ("N/A" as its task) has task -1.
std::vector<SlurmTaskState> parse_squeue(const std::string& output);
/// `scontrol -o show job J` lines: one record per job or array task (pending ranges of an
/// array are left out).
std::vector<SlurmTaskState> parse_scontrol(const std::string& output);
/// `sacct -n -X -P -o JobID,State,ExitCode,NodeList` lines: one record per job or array task
/// ("CANCELLED by 0" reads as CANCELLED).
std::vector<SlurmTaskState> parse_sacct(const std::string& output);
/// Whether a job that ended in `state` was lost for a reason of the cluster's (node failure,
/// preemption, cancellation...), so that its grade is worth one more try.
bool is_cluster_failure(const std::string& state);
/// Whether a job in `state` has not ended yet (pending, running, completing...).
bool is_between_states(const std::string& state);

/// Throws Error naming the first of sbatch, squeue, scontrol and scancel not in PATH;
/// `leave_out` says what to do without Slurm ("leave --slurm out").
void require_slurm_commands(const std::string& leave_out);
/// Throws Error when `p` cannot stand in an #SBATCH line (Slurm splits those on white space).
/// `what` names it in the message ("--out").
void check_sbatch_path(const std::filesystem::path& p, const std::string& what);
/// `s` as one word of a POSIX shell (a batch script's command line).
std::string shell_quote(const std::string& s);

/// Submits `script` with `sbatch --parsable`, `options` before it (e.g. "--array=0,3"), and
/// returns the job's id. Throws Error with what sbatch said when Slurm refuses the job.
std::string sbatch(const std::filesystem::path& script,
                   const std::vector<std::string>& options = {});

/// What squeue says of some jobs.
struct QueueLook {
  bool ok = false;  ///< squeue answered; else `error` holds what it printed
  std::string error;  ///< what squeue printed when it failed
  std::vector<SlurmTaskState> queued;  ///< jobs and array tasks still pending or running
};
/// Asks squeue about `jobs` (ids; an array's id covers its tasks). Jobs Slurm no longer knows
/// are simply not listed.
QueueLook squeue(const std::set<std::string>& jobs);

/// How jobs that left the queue ended.
struct EndLook {
  bool ok = false;                    ///< the controller (or the accounting) answered
  std::vector<SlurmTaskState> ended;  ///< empty when neither knows the job any more
};
/// Asks scontrol how `job` ended, and sacct when the controller has forgotten it (where the
/// cluster keeps accounting).
EndLook job_end(const std::string& job);

/// Cancels `job` (scancel); false when scancel failed. A job that already ended is fine.
bool scancel(const std::string& job);

}  // namespace convlab::grader
