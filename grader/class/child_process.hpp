/// @file
/// @brief A child process in its own process group, its output sent to a log file, that the
/// class grader polls without blocking and can kill with everything it started.
#pragma once

#include <sys/types.h>

#include <filesystem>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace convlab::grader {

/// How a child ended.
struct ChildExit {
  int exit_code = -1;      ///< when it exited
  int signal = 0;          ///< when a signal killed it
  bool timed_out = false;  ///< killed by ChildProcess::kill_group after its time limit

  /// "exited with code 1", "killed by signal 11 (Segmentation fault)".
  std::string describe() const;
};

/// One running child. Not copyable; the destructor kills a child that is still running.
class ChildProcess {
 public:
  /// Starts `argv` (argv[0] is looked up in PATH unless it holds a '/'), stdin from
  /// /dev/null, stdout and stderr appended to `log`. `exe`, when given, is the file executed
  /// instead of argv[0] (e.g. /proc/self/exe). `env`: variables set in the child only (name,
  /// value). Throws Error when it cannot start.
  ChildProcess(const std::vector<std::string>& argv, const std::filesystem::path& log,
               const std::optional<std::filesystem::path>& exe = std::nullopt,
               const std::vector<std::pair<std::string, std::string>>& env = {});
  ~ChildProcess();
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  /// The exit status if the child has ended (reaped once, then remembered), else nullopt.
  std::optional<ChildExit> poll();
  /// Waits for the child to end.
  ChildExit wait();
  /// Kills the child's whole process group (SIGKILL) and reaps the child.
  ChildExit kill_group(bool timed_out);
  /// The child's process id (its process group id too).
  pid_t pid() const { return pid_; }

 private:
  pid_t pid_ = -1;
  std::optional<ChildExit> exit_;
};

/// What a short command printed and how it ended.
struct CommandOutput {
  ChildExit exit;
  std::string output;  ///< stdout and stderr together

  /// Exited with code 0.
  bool ok() const { return exit.signal == 0 && !exit.timed_out && exit.exit_code == 0; }
};

/// Runs a short command (sbatch, squeue...) to its end, or kills it after `timeout_s`, and
/// returns what it printed. Throws Error when it cannot start.
CommandOutput run_captured(const std::vector<std::string>& argv, double timeout_s);

/// Whether `name` is an executable in PATH (or, holding a '/', that file).
bool find_program(const std::string& name);

}  // namespace convlab::grader
