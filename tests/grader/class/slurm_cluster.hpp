/// @file
/// @brief A real single-node Slurm cluster on localhost for the length of a test: munged as
/// the munge user with its own key and socket, slurmctld and slurmd in the foreground with a
/// generated slurm.conf (one small CPU partition, proctrack/linuxproc, task/none: no cgroup,
/// no systemd), every file under one folder. The destructor cancels every job, stops every
/// daemon it started and kills whatever still holds a file under the test's folder (job steps
/// live apart from slurmd), whatever happened.
#pragma once

#include <sys/types.h>

#include <filesystem>
#include <functional>
#include <string>
#include <vector>

namespace convlab::test {

class SlurmCluster {
 public:
  /// Starts the cluster in `root`/slurm with a node of `cpus` CPUs; `root` is the test's own
  /// temporary folder (what is left running under it is killed at the end). When it cannot
  /// (Slurm or munge not installed, not root, a daemon that does not come up), ok() is false
  /// and why() says what and holds the daemons' logs.
  explicit SlurmCluster(const std::filesystem::path& root, int cpus = 2);
  ~SlurmCluster();
  SlurmCluster(const SlurmCluster&) = delete;
  SlurmCluster& operator=(const SlurmCluster&) = delete;

  bool ok() const { return why_.empty(); }
  const std::string& why() const { return why_; }
  /// The generated slurm.conf; Slurm's commands find it through SLURM_CONF.
  const std::filesystem::path& conf() const { return conf_; }
  /// "SLURM_CONF='...' ", to put before a shell command.
  std::string env() const;
  /// Runs a Slurm command (squeue, scancel...) on this cluster, returns its exit status.
  int run(const std::string& command, std::string* output) const;
  /// The cluster's logs, for a failing test's message.
  std::string logs() const;

 private:
  bool start(int cpus);
  pid_t spawn(const std::vector<std::string>& argv, const std::filesystem::path& log, uid_t uid,
              gid_t gid);
  bool wait_until(const std::string& what, const std::function<bool()>& ready, double seconds);
  void stop();

  std::filesystem::path root_, dir_, conf_;
  std::string why_;
  std::vector<pid_t> daemons_;  // in start order; stopped in reverse
};

}  // namespace convlab::test
