/// @file
/// @brief What every executor does with a running job's output and its end: the log its
/// grade writes, sent on to the database in whole lines with the job's folder shortened to
/// "job/" (it says nothing to a team and shows the server's layout), capped at 8 MiB; and the
/// exit status a team reads.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>

#include "grader/service/job_store.hpp"

namespace convlab::service {

/// Output kept per job: a grade caps each check's output far below this.
constexpr std::int64_t kMaxOutputBytes = 8 << 20;

/// Follows one job's log file and appends what it gains to the job's output.
class OutputForwarder {
 public:
  /// `log`: the file the job writes; `job_dir`: its folder, shown to the team as "job/".
  OutputForwarder(JobStore& store, std::int64_t job, std::filesystem::path log,
                  const std::filesystem::path& job_dir);
  /// Sends the whole lines the log gained; with `last`, everything (the job has ended).
  void forward(bool last);
  /// Whether the log has had any byte yet.
  bool started() const { return read_ > 0; }

 private:
  JobStore& store_;
  std::int64_t job_;
  std::filesystem::path log_;
  std::string job_dir_;
  std::string pending_;
  std::int64_t read_ = 0, kept_ = 0;
  bool capped_ = false;
};

/// The exit status of a finished job: a check or run job fails (1) when a check it ran
/// failed; a grade exits 0 for any score. `grade_exit`: how `convlab grade` exited.
int job_exit_code(const JobInfo& job, int grade_exit, const std::optional<std::string>& report);

}  // namespace convlab::service
