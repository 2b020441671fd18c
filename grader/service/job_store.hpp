/// @file
/// @brief The service's tables in the results database (schema v5): team tokens, the job
/// queue, each job's output in chunks, and the staff's deadline extensions. One connection,
/// shared by the web handlers and the executors under a lock: every call is a short statement
/// or transaction.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace convlab::service {

/// A job as a team submits it; every field already validated (job_request.hpp).
struct JobSpec {
  std::string team;
  std::string command;    ///< check, run or grade
  std::string milestone;  ///< m2, m3, final
  std::string device;     ///< cpu or gpu: which executor takes it
  std::string args_json;  ///< {"variant": ..., "model": ..., "images": ...}, each optional
  std::map<std::string, std::string> files;  ///< path in the checkout -> content
};

/// A job as the queue holds it (its files left out).
struct JobInfo {
  std::int64_t id = 0;
  std::string team, command, milestone, device, args_json;
  std::string state;  ///< queued, running, done or failed
  int attempts = 0;   ///< how many times an executor started it
  std::optional<int> exit_code;
  std::string error;  ///< why it failed, when the service (not the job) failed it
  std::string submitted_at, started_at, finished_at;
  bool has_report = false;
  /// A grade job: the run it recorded in the results database, once it finished.
  std::optional<std::int64_t> run_id;
};

/// Output of a job from a byte offset on.
struct OutputSlice {
  std::string text;
  std::int64_t next = 0;  ///< the offset to ask for next
};

/// The queue. Thread-safe.
class JobStore {
 public:
  /// How many times a job is started before a restart that interrupts it fails it.
  static constexpr int kMaxAttempts = 2;

  /// Opens (creating or migrating to schema v5) the results database `db`.
  explicit JobStore(const std::filesystem::path& db);
  ~JobStore();

  /// The team whose token has this digest.
  std::optional<std::string> team_of_digest(const std::string& digest);
  /// Whether `team` holds a token.
  bool has_token(const std::string& team);
  /// Stores `digest` as `team`'s token, replacing the one it had.
  void set_token(const std::string& team, const std::string& digest);

  /// Queues a job and returns its id.
  std::int64_t enqueue(const JobSpec& job);
  /// Queues a job unless its team has `limit` jobs queued or running already (checked and
  /// queued in one transaction, so two uploads at once cannot both pass). Returns the id, or
  /// nullopt with the team's count in `in_flight`.
  std::optional<std::int64_t> enqueue_within(const JobSpec& job, int limit, int* in_flight);
  /// What admit() found.
  struct Admission {
    std::optional<std::int64_t> id;  ///< the new job; nullopt when a limit refused it
    int in_flight = 0;               ///< the team's jobs queued or running, before this one
    int last_hour = 0;               ///< the team's jobs submitted in the last hour, before it
    std::string hour_frees_at;       ///< when the oldest of those is an hour old (UTC, ISO 8601)
  };
  /// Queues a job unless its team has `max_in_flight` jobs queued or running, or submitted
  /// `max_per_hour` jobs (0: no such limit) in the last hour: checked and queued in one
  /// transaction.
  Admission admit(const JobSpec& job, int max_in_flight, int max_per_hour);
  /// Queued and running jobs of `team`.
  int in_flight(const std::string& team);
  /// 1 for the next job an executor of its device takes; 0 when the job is no longer queued.
  int position(std::int64_t id);
  /// One job.
  std::optional<JobInfo> get(std::int64_t id);
  /// `team`'s jobs (every job when `team` is empty), newest first, at most `limit`.
  std::vector<JobInfo> list(const std::string& team, int limit);
  /// The report.json of a finished job, if it wrote one.
  std::optional<std::string> report(std::int64_t id);

  /// Takes the oldest queued job of `device`: running, one more attempt. Its files too.
  std::optional<std::pair<JobInfo, std::map<std::string, std::string>>> claim(
      const std::string& device);
  /// Appends to a job's output.
  void append_output(std::int64_t id, const std::string& text);
  /// A job's output from byte `from` on.
  OutputSlice output(std::int64_t id, std::int64_t from);
  /// Ends a job: done (it ran; `exit_code` is its status) or failed (`error` says why). A grade
  /// job whose report the grade recorded is linked to that run: the team's last such job on a
  /// milestone is its submission that counts (ResultsDb::best_per_team).
  void finish(std::int64_t id, const std::string& state, std::optional<int> exit_code,
              const std::string& error, const std::optional<std::string>& report_json);
  /// Puts a running job back in the queue, `note` appended to its output. `counted`: the
  /// attempt it used stays used (its run was lost); else it is given back (it never ran).
  void requeue(std::int64_t id, const std::string& note, bool counted);
  /// At startup: a job left running by a server that stopped is queued again, once; a job
  /// that has had kMaxAttempts, or that its team cancelled, fails. Each gets a line in its output.
  /// Returns how many.
  int recover_interrupted();

  /// `team`'s submission that counts on each milestone: milestone -> the id of its last grade
  /// job that recorded a run.
  std::map<std::string, std::int64_t> counted_jobs(const std::string& team);
  /// Gives `team` until `deadline` (UTC, ISO 8601) for `milestone`'s grade jobs, replacing an
  /// earlier extension; `granted_by` names the staff member (or "admin" for the command line).
  void set_extension(const std::string& team, const std::string& milestone,
                     const std::string& deadline, const std::string& granted_by);
  /// Cancels a job: a queued one fails at once ("cancelled"); a running one is marked, for its
  /// executor to stop ("cancelling"). Otherwise returns its state ("done", "failed"), or ""
  /// when there is no such job.
  std::string cancel(std::int64_t id);
  /// Whether the team asked to cancel the running job `id`.
  bool cancel_requested(std::int64_t id);
  /// `team`'s extensions: milestone -> deadline (UTC, ISO 8601).
  std::map<std::string, std::string> extensions(const std::string& team);

  /// A count of the changes to jobs made through this object (queued, taken, output, ended):
  /// what a stream waits on.
  std::uint64_t generation();
  /// Waits until generation() is no longer `seen`, or `timeout` passes; returns generation().
  std::uint64_t wait_for_change(std::uint64_t seen, std::chrono::milliseconds timeout);

 private:
  void changed();
  struct Impl;
  std::unique_ptr<Impl> impl_;
  std::mutex mutex_;
  std::mutex change_mutex_;
  std::condition_variable change_;
  std::uint64_t generation_ = 0;
};

}  // namespace convlab::service
