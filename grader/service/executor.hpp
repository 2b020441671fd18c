/// @file
/// @brief The executors: local threads that take the oldest queued job of their device, lay
/// its files into a fresh folder and run this build's `convlab grade` on it as a child process
/// (an argument vector, no shell; the grade sandboxes the team's code itself), its output
/// appended to the database as it comes, one job per GPU at a time, CPU jobs in parallel; or,
/// with SlurmSettings, one Slurm job per queued job (slurm_executor.hpp).
#pragma once

#include <atomic>
#include <condition_variable>
#include <filesystem>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "grader/service/job_request.hpp"
#include "grader/service/job_store.hpp"
#include "grader/service/slurm_executor.hpp"

namespace convlab::service {

/// How the executors run.
struct ExecutorSettings {
  std::filesystem::path program;  ///< the convlab binary to run (this build's)
  std::filesystem::path work;     ///< where each job gets a folder (Slurm: seen by every node)
  GradeSettings grade;
  std::vector<std::string> gpus;  ///< GPU ids: one executor each (CUDA_VISIBLE_DEVICES=id)
  int cpu_jobs = 2;         ///< CPU jobs run at once
  double time_limit_s = 7200;  ///< a job still running after this is killed
  bool keep_work = false;   ///< keep each job's folder (for staff debugging)
  /// Set: every job goes to Slurm (gpus and cpu_jobs are not used); else the local executors.
  std::optional<SlurmSettings> slurm;
};

/// The executors. Stopping (or destroying) kills running jobs' processes (cancels their Slurm
/// jobs) and leaves the jobs `running`, so the next start queues them again
/// (JobStore::recover_interrupted).
class Executors {
 public:
  /// Starts the executors. Throws Error when the Slurm executor cannot start.
  Executors(JobStore& store, ExecutorSettings settings);
  ~Executors();
  Executors(const Executors&) = delete;
  Executors& operator=(const Executors&) = delete;

  /// Wakes the executors: a job was queued.
  void notify();
  /// Stops every executor.
  void stop();

 private:
  void loop(const std::string& device, int slot);
  void run_job(const JobInfo& job, const std::map<std::string, std::string>& files,
               const std::string& device, int slot);

  JobStore& store_;
  ExecutorSettings settings_;
  std::atomic<bool> stopping_{false};
  std::mutex mutex_;
  std::condition_variable wake_;
  std::vector<std::thread> threads_;
  std::unique_ptr<SlurmExecutor> slurm_;
};

}  // namespace convlab::service
