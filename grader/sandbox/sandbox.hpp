/// @file
/// @brief Runs one untrusted command (a submission's build or one check) in a sandbox: its own
/// process group (and PID namespace where allowed), wall-clock and resource limits, captured
/// and capped output, no network, an unprivileged user when the grader is root, a private
/// temporary directory, and a result channel (fd 3) that is not stdout.
///
/// Where a mount namespace is available the whole file system is read-only for the run except
/// its private directory, its working directory and SandboxSpec::writable_paths; /dev/shm is a
/// fresh empty tmpfs, /proc shows only the run's own processes (with a PID namespace), and each
/// of SandboxSpec::hide_paths is mounted over. Every isolation step that the kernel or the
/// privileges refuse is skipped and recorded as false in SandboxFeatures: a run never fails
/// because of it.
///
/// run_sandboxed() may be called from several threads at once. The process tree is
/// grader -> supervisor (trusted, outside the namespaces' PID view) -> init (PID 1 of the run's
/// PID namespace, trusted) -> the command; without a PID namespace the supervisor is a child
/// subreaper and kills whatever the command leaves behind. All runs as `user` share that user's
/// RLIMIT_NPROC count: concurrent runs should use distinct users where that matters.
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
  bool network_namespace = false;   ///< no network: a fresh network namespace
  bool mount_namespace = false;     ///< hidden paths were mounted over
  bool pid_namespace = false;       ///< its own PID namespace: every process dies with it
  bool dropped_privileges = false;  ///< ran as `user`, not as the grader's user
  bool user_namespace = false;      ///< namespaces came from an unprivileged user namespace
  bool read_only_root = false;      ///< writable only: private dir, workdir, writable_paths
  std::string user;                 ///< the user it ran as
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
  /// Paths that do not exist are ignored.
  std::vector<std::filesystem::path> hide_paths;
  /// Folders outside the private directory the run may write to (a build folder...). The rest
  /// of the file system is read-only where a mount namespace is available. The working
  /// directory is always writable.
  std::vector<std::filesystem::path> writable_paths;
  /// Time, process, file and output limits.
  Limits limits;
  /// Run as `user` when the grader runs as root (the run user owns the private directory).
  bool drop_privileges = true;
  /// The unprivileged user a root grader runs the command as. RLIMIT_NPROC counts every
  /// process of this user, concurrent runs included.
  std::string user = "nobody";
  /// Parent folder of the private directory (it must be traversable by `user`).
  std::filesystem::path private_parent = "/tmp";
  /// Keep the private directory after the run (for debugging a grade).
  bool keep_private_dir = false;
  /// One more open descriptor for the command, as fd 4 (kPassFd, named in $CONVLAB_PASS_FD):
  /// a socket to a trusted process that feeds the run. -1: none. run_sandboxed() takes it
  /// over: it is closed in the grader as soon as the run holds it (and in the run's supervisor
  /// and init), so the other end sees the run's end as the end of the socket.
  int pass_fd = -1;
  /// false: create no namespace at all, as on a kernel that refuses them (tests of that
  /// fallback; debugging).
  bool use_namespaces = true;
};

/// How a sandboxed run ended.
enum class Outcome {
  exited,        ///< the process exited (see exit_code)
  signaled,      ///< killed by a signal it got or raised (segfault, abort, CPU limit...)
  timed_out,     ///< wall-clock limit: the group was killed
  output_limit,  ///< stdout, stderr or the channel passed its cap: the group was killed
  start_failed,  ///< could not be started (see start_error)
};

/// Everything a sandboxed run produced.
struct SandboxResult {
  Outcome outcome = Outcome::start_failed;  ///< how it ended
  int exit_code = -1;                       ///< when outcome == exited
  int signal = 0;                           ///< when outcome == signaled
  double wall_s = 0.0;                      ///< wall-clock time from start to the last reap
  double cpu_s = 0.0;              ///< user + system time of the process tree that was waited for
  std::string stdout_text;         ///< the first limits.max_output_bytes of stdout
  std::string stderr_text;         ///< the first limits.max_output_bytes of stderr
  bool stdout_truncated = false;   ///< stdout passed its cap (outcome == output_limit)
  bool stderr_truncated = false;   ///< stderr passed its cap (outcome == output_limit)
  std::string channel;             ///< everything written to fd 3 (CONVLAB_RESULT_FD)
  bool channel_truncated = false;  ///< the channel passed its cap (outcome == output_limit)
  std::string start_error;         ///< why it could not start (outcome == start_failed)
  SandboxFeatures features;        ///< the isolation it actually got
  Limits limits;                   ///< the limits it ran under (describe() names them)
  std::filesystem::path private_dir;  ///< removed after the run unless keep_private_dir

  /// One readable line: "exited with code 3", "killed by SIGSEGV (segmentation fault: an
  /// invalid memory access)", "timed out after 60 s (wall-clock limit): every process of the run
  /// was killed", "stdout passed its limit of 1 MiB: killed"...
  std::string describe() const;
};

/// "SIGSEGV (segmentation fault: an invalid memory access)"; "signal 42" for unknown ones.
std::string describe_signal(int signal);

/// File descriptor of the result channel in the child (also in $CONVLAB_RESULT_FD).
inline constexpr int kResultFd = 3;

/// File descriptor of SandboxSpec::pass_fd in the child, and the variable that names it.
inline constexpr int kPassFd = 4;
inline constexpr const char* kPassFdEnv = "CONVLAB_PASS_FD";

/// Runs `spec` and waits for it. Never throws for anything the child does; throws Error only
/// when the grader itself cannot work (no pipes, no fork, an input that cannot be copied, an
/// unknown `user`).
SandboxResult run_sandboxed(const SandboxSpec& spec);

/// What this machine allows, probed once per user (for reports and for tests that need a
/// feature): the features a run with default settings would get.
SandboxFeatures probe_sandbox_features(const std::string& user = "nobody");

}  // namespace convlab::grader
