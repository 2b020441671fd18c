/// @file
/// @brief Runs one untrusted command (a submission's build or one check) in a sandbox: its own
/// process group (and PID namespace where allowed), wall-clock and resource limits, captured
/// and capped output, no network, an unprivileged user when the grader is root, a private
/// temporary directory, and a result channel (fd 3) that is not stdout.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace convlab::grader {

/// Limits of one sandboxed run. Zero means "no limit" only where stated.
struct Limits {
  double wall_s = 60.0;                        ///< wall clock; the whole group is killed after
  double cpu_s = 600.0;                        ///< RLIMIT_CPU (seconds of CPU time)
  int max_processes = 64;                      ///< RLIMIT_NPROC for the sandbox user
  std::uint64_t max_file_bytes = 256u << 20;   ///< RLIMIT_FSIZE: largest file it may write
  std::size_t max_output_bytes = 1u << 20;     ///< per stream (stdout, stderr); killed beyond
  std::size_t max_channel_bytes = 256u << 20;  ///< result channel; killed beyond
};

/// Which isolation features a run actually got (they depend on the kernel and on privileges).
struct SandboxFeatures {
  bool network_namespace = false;  ///< no network: a fresh network namespace
  bool mount_namespace = false;    ///< hidden paths were mounted over
  bool pid_namespace = false;      ///< its own PID namespace: every process dies with it
  bool dropped_privileges = false;  ///< ran as `user`, not as the grader's user
  std::string user;                ///< the user it ran as
};

/// What to run and how.
struct SandboxSpec {
  /// argv[0] is a path; a relative one is taken inside the private directory.
  std::vector<std::string> argv;
  /// The environment, exactly (nothing is inherited). HOME and TMPDIR are set to the private
  /// directory unless given here.
  std::map<std::string, std::string> env;
  /// Files copied into the private directory before the run: (source, name inside).
  std::vector<std::pair<std::filesystem::path, std::string>> inputs;
  /// Working directory; empty: the private directory.
  std::filesystem::path workdir;
  /// Paths made unreadable (an empty tmpfs or /dev/null mounted over them) where a mount
  /// namespace is available: the data set's labels, hidden models, the staff solutions.
  std::vector<std::filesystem::path> hide_paths;
  Limits limits;
  /// Run as `user` when the grader runs as root (the run user owns the private directory).
  bool drop_privileges = true;
  std::string user = "nobody";
  /// Parent folder of the private directory (it must be traversable by `user`).
  std::filesystem::path private_parent = "/tmp";
  /// Keep the private directory after the run (for debugging a grade).
  bool keep_private_dir = false;
};

/// How a sandboxed run ended.
enum class Outcome {
  exited,         ///< the process exited (see exit_code)
  signaled,       ///< killed by a signal it got or raised (segfault, abort, CPU limit...)
  timed_out,      ///< wall-clock limit: the group was killed
  output_limit,   ///< stdout, stderr or the channel passed its cap: the group was killed
  start_failed,   ///< could not be started (see start_error)
};

/// Everything a sandboxed run produced.
struct SandboxResult {
  Outcome outcome = Outcome::start_failed;
  int exit_code = -1;  ///< when outcome == exited
  int signal = 0;      ///< when outcome == signaled
  double wall_s = 0.0;
  double cpu_s = 0.0;  ///< user + system time of the process tree that was waited for
  std::string stdout_text, stderr_text;  ///< capped at limits.max_output_bytes each
  bool stdout_truncated = false, stderr_truncated = false;
  std::string channel;  ///< everything written to fd 3 (CONVLAB_RESULT_FD)
  bool channel_truncated = false;
  std::string start_error;
  SandboxFeatures features;
  std::filesystem::path private_dir;  ///< removed after the run unless keep_private_dir

  /// One readable line: "exited with code 3", "killed by SIGSEGV (segmentation fault)",
  /// "timed out after 60 s (wall-clock limit)", "output passed 1 MiB (stdout): killed"...
  std::string describe() const;
};

/// File descriptor of the result channel in the child (also in $CONVLAB_RESULT_FD).
inline constexpr int kResultFd = 3;

/// Runs `spec` and waits for it. Never throws for anything the child does; throws Error only
/// when the grader itself cannot work (no pipes, no fork).
SandboxResult run_sandboxed(const SandboxSpec& spec);

/// What this machine allows, probed once (for reports and for tests that need a feature).
SandboxFeatures probe_sandbox_features(const std::string& user = "nobody");

}  // namespace convlab::grader
