/// @file
/// @brief `convlab grade-all DIR --slurm`: the class as one Slurm job array, one task per team.
/// The submitting grade-all writes the script, submits it, follows it (squeue, scontrol),
/// resubmits once the tasks the cluster lost (node failure, preemption, cancellation) but never
/// a task whose grade failed, and on completion is the one writer: it merges the tasks' results
/// into the summary and ingests their reports into the database. A task grades its team as the
/// local grade-all does (`convlab grade` in the sandbox, the other teams hidden) and writes
/// OUT/TEAM/ only: report.json and task.json (how its grade ended); never the database.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "grader/class/grade_all.hpp"
#include "grader/class/slurm_commands.hpp"

namespace convlab::grader {

/// What --slurm adds to GradeAllOptions.
struct SlurmOptions {
  std::string partition;  ///< --partition; empty: the cluster's default
  std::string account;    ///< --account; empty: the user's default
  /// --gres of each task. GPU milestones: "gpu:1" when empty; CPU milestones ask for none.
  std::string gres;
  std::optional<int> time_min;  ///< --time of each task, minutes; nullopt: the partition's
  int max_parallel = 0;         ///< tasks running at once (the array's %N); 0: no limit
  std::vector<std::string> sbatch_options;  ///< more `#SBATCH` lines, verbatim (--qos=...)
  double poll_s = 5.0;                      ///< seconds between two looks at the queue
  /// A task that ended COMPLETED with no task.json in sight: how long to wait for the file
  /// (a network file system may show it late) before it counts as failed.
  double result_grace_s = 30.0;
};

/// The batch script `grade-all --slurm` submits, for the teams of a class run. Throws Error
/// on bad options (a gres for a CPU milestone, a path Slurm cannot take).
std::string slurm_script(const GradeAllOptions& options, const SlurmOptions& slurm);

/// Grades the class as a Slurm job array and waits for it (see the file comment). Throws
/// Error on bad options or when Slurm refuses the job.
ClassSummary grade_all_slurm(const GradeAllOptions& options, const SlurmOptions& slurm,
                             const GradeAllEvents& events = {});

/// Inside an array task: grades the team of line `index` of OUT/.slurm/teams.txt and writes
/// OUT/TEAM/task.json. Returns the exit status (0 once task.json is written, whatever the
/// grade; 143 when stopped, leaving no task.json, so the submitter sees a lost task).
int run_slurm_task(const GradeAllOptions& options, int index);

}  // namespace convlab::grader
