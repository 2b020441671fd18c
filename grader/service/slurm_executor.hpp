/// @file
/// @brief The Slurm executor of `convlab serve --executor slurm`: one Slurm job per queued job,
/// submitted with sbatch and followed with squeue and scontrol (grader/class/slurm_commands.hpp,
/// the helpers `grade-all --slurm` uses); Slurm alone decides where and when each runs.
///
/// A job's folder (under --work, which every node must see) holds the team's files, the batch
/// script, the grade's output (Slurm's --output, sent on to the database as it grows) and, once
/// `convlab grade` has ended by itself, its exit status. A grade job writes no database on the
/// node: the service ingests its report, as the one writer. A Slurm job that ends without an
/// exit status (cancelled, its node lost, preempted) is queued again once, then failed with
/// what Slurm said; one that hit its time limit fails at once.
#pragma once

#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "grader/service/job_store.hpp"

namespace convlab::service {

struct ExecutorSettings;

/// What `--executor slurm` adds.
struct SlurmSettings {
  std::string partition;       ///< --partition of every job; empty: the cluster's default
  std::string gpu_partition;   ///< --partition of GPU jobs; empty: `partition`
  std::string account;         ///< --account; empty: the user's default
  std::string gres = "gpu:1";  ///< --gres of GPU jobs (CPU jobs ask for none)
  std::vector<std::string> sbatch_options;  ///< more #SBATCH lines, verbatim (--qos=...)
  int max_jobs = 64;    ///< jobs handed to Slurm at once; the rest wait in the service's queue
  double poll_s = 5.0;  ///< seconds between two looks at Slurm's queue
  /// A job Slurm says COMPLETED with no exit status in sight: how long to wait for the file
  /// (a network file system may show it late) before the job counts as lost.
  double result_grace_s = 30.0;
};

/// The thread that hands queued jobs to Slurm and follows them. Stopping cancels the Slurm
/// jobs it follows and leaves their jobs `running`, so the next start queues them again, as
/// the local executors do.
class SlurmExecutor {
 public:
  /// Starts following; `settings.slurm` must be set. Throws Error when a Slurm command is
  /// missing or --work cannot stand in a batch script.
  SlurmExecutor(JobStore& store, const ExecutorSettings& settings);
  ~SlurmExecutor();
  SlurmExecutor(const SlurmExecutor&) = delete;
  SlurmExecutor& operator=(const SlurmExecutor&) = delete;

  /// Wakes the executor: a job was queued.
  void notify();
  /// Stops following, cancelling the Slurm jobs of the jobs it followed.
  void stop();

 private:
  struct Followed;
  struct Impl;
  std::unique_ptr<Impl> impl_;
  std::thread thread_;
};

/// The batch script of one job: the #SBATCH lines, `convlab grade` (`grade_argv`: the program
/// and its arguments, each quoted) and the line that records its exit status in
/// `dir`/exit-status when it ended by itself. Throws Error on a path Slurm cannot take.
std::string slurm_job_script(const JobInfo& job, const std::vector<std::string>& grade_argv,
                             const std::filesystem::path& dir, const SlurmSettings& slurm,
                             double time_limit_s);

}  // namespace convlab::service
