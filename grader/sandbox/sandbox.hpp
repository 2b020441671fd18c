/// @file
/// @brief Runs one untrusted command (a submission's build or one check) in a sandbox: its own
/// process group (and PID namespace where allowed), wall-clock and resource limits, captured
/// and capped output, no network, an unprivileged user when the grader is root, a private
/// temporary directory, and a result channel (fd 3) that is not stdout.
///
/// Where a mount namespace is available the whole file system is read-only for the run except
/// its private directory, its working directory and SandboxSpec::writable_paths; /dev/shm is a
/// fresh empty tmpfs, /proc shows only the run's own processes (with a PID namespace), and each
/// of SandboxSpec::hide_paths is mounted over. The private directory (HOME, TMPDIR) is a tmpfs
/// of limited size and file count; with SandboxSpec::visible_paths the run sees only the system
/// folders and the paths it names (an allow-list view). Each run has its own IPC namespace
/// (SysV shared memory, semaphores and message queues die with it) and a memory limit. Every
/// isolation step that the kernel or the privileges refuse is skipped and recorded in
/// SandboxFeatures: a run never fails because of it; isolation_problems() tells a grader which
/// are missing, so that it can refuse to grade (fail closed).
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
#include <optional>
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
  /// Memory of the whole run (every process; 0: none): cgroup v2 memory.max (swap 0) where the
  /// grader can make a child cgroup, else RLIMIT_AS per process (not with uses_gpu) and the
  /// grader polling the run's memory (proportional set sizes, every 100 ms). Passing it ends
  /// the run (memory_limit).
  std::uint64_t max_memory_bytes = 4ull << 30;
  std::uint64_t tmp_bytes = 512u << 20;  ///< size of the private tmpfs (HOME, TMPDIR)
  std::uint64_t tmp_inodes = 65536;      ///< files and folders the private tmpfs may hold
};

/// How a run's memory limit was enforced (SandboxFeatures::memory_limit).
enum class MemoryLimitKind {
  none,           ///< no limit (Limits::max_memory_bytes == 0)
  cgroup,         ///< a cgroup v2 child: memory.max, memory.swap.max = 0, pids.max
  address_space,  ///< the run's memory polled, and RLIMIT_AS (twice the limit) per process
  rss_poll,       ///< the run's memory polled only (GPU runs: CUDA reserves huge ranges)
};

/// "cgroup", "address_space", "rss_poll" or "none".
const char* memory_limit_name(MemoryLimitKind kind);

/// Which isolation features a run actually got (they depend on the kernel and on privileges).
struct SandboxFeatures {
  bool network_namespace = false;   ///< no network: a fresh network namespace
  bool mount_namespace = false;     ///< hidden paths were mounted over
  bool pid_namespace = false;       ///< its own PID namespace: every process dies with it
  bool dropped_privileges = false;  ///< ran as `user`, not as the grader's user
  bool user_namespace = false;      ///< namespaces came from an unprivileged user namespace
  bool read_only_root = false;      ///< writable only: private dir, workdir, writable_paths
  bool ipc_namespace = false;       ///< its own SysV IPC (shm, semaphores, message queues)
  bool private_tmpfs = false;       ///< the private directory is a size-limited tmpfs
  bool allow_list_view = false;     ///< saw only the system folders and visible_paths
  MemoryLimitKind memory_limit = MemoryLimitKind::none;  ///< how memory was limited
  std::string user;                                      ///< the user it ran as
};

/// One isolation feature a grade needs and this machine does not give.
struct IsolationProblem {
  std::string feature;  ///< its name as in SandboxFeatures and report.json: "ipc_namespace"
  std::string why;      ///< what is at stake without it
  std::string fix;      ///< how to get it
};

/// The features of `probed` that a grade needs and lacks: the network, mount, PID and IPC
/// namespaces, a read-only root, the private tmpfs, a memory limit and an unprivileged run user
/// (a root grader drops to `user`; a grader that is not root needs a user namespace).
std::vector<IsolationProblem> isolation_problems(const SandboxFeatures& probed);

/// Fails closed: probes this machine, sweeps the folders of graders that were killed
/// (sweep_stale_temp_dirs on the temporary folder), and throws Error naming every missing
/// feature and how to get it, unless `allow_degraded`. Returns the missing features' names
/// (empty when nothing is missing).
std::vector<std::string> require_isolation(bool allow_degraded, const std::string& user = "nobody");

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
  /// Non-zero (a root grader): the user id the run gets, from sandbox_uid(), so that the runs
  /// of one build share their files. Zero: a fresh one per run (RLIMIT_NPROC apart).
  std::uint32_t uid = 0;
  /// Parent folder of the private directory; empty: the temporary folder ($TMPDIR, else
  /// /tmp). Without the allow-list view it must be traversable by `user`.
  std::filesystem::path private_parent;
  /// Keep the private directory after the run (for debugging a grade).
  bool keep_private_dir = false;
  /// One more open descriptor for the command, after extra_fds (fd 4 alone; named in
  /// $CONVLAB_PASS_FD):
  /// a socket to a trusted process that feeds the run. -1: none. run_sandboxed() takes it
  /// over: it is closed in the grader as soon as the run holds it (and in the run's supervisor
  /// and init), so the other end sees the run's end as the end of the socket.
  int pass_fd = -1;
  /// false: create no namespace at all, as on a kernel that refuses them (tests of that
  /// fallback; debugging).
  bool use_namespaces = true;
  /// The command uses the GPU: no RLIMIT_AS (the CUDA runtime reserves terabytes of address
  /// space); the memory limit is the cgroup's or the polled memory.
  bool uses_gpu = false;
  /// The allow-list view (where a mount namespace is available): the run's root is a fresh
  /// tmpfs holding only read-only binds of the system folders (kViewSystemPaths), these paths
  /// (read-only), the writable paths and working directory (read-write), the private directory,
  /// a fresh /proc and /dev/shm; everything else (/home, /root, /srv, /opt, other checkouts)
  /// does not exist. nullopt: the whole file system, read-only.
  std::optional<std::vector<std::filesystem::path>> visible_paths;
  /// With visible_paths: false leaves the system folders out too, so the run sees only
  /// visible_paths (its program's linking closure and device nodes: runtime_view.hpp), the
  /// writable paths, the private directory, a fresh /proc and /dev/shm.
  bool system_folders = true;
  /// Open file descriptors handed to the command as fds 4, 5, ... (in this order; their
  /// numbers also in $CONVLAB_EXTRA_FDS, comma-separated). At most 8. The caller keeps and
  /// closes its own copies.
  std::vector<int> extra_fds;
};

/// Folders of the system every allow-list view shows read-only (those that exist): the
/// toolchains, libraries and configuration under /usr, /bin, /sbin, /lib*, /etc, and /dev and
/// /sys. /etc/shadow, /etc/gshadow and the like are mounted over.
extern const std::vector<std::filesystem::path> kViewSystemPaths;

/// How a sandboxed run ended.
enum class Outcome {
  exited,        ///< the process exited (see exit_code)
  signaled,      ///< killed by a signal it got or raised (segfault, abort, CPU limit...)
  timed_out,     ///< wall-clock limit: the group was killed
  output_limit,  ///< stdout, stderr or the channel passed its cap: the group was killed
  memory_limit,  ///< the run passed Limits::max_memory_bytes: every process was killed
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
  /// The most memory the run's processes held together (proportional set sizes), as polled
  /// every 100 ms.
  std::uint64_t peak_resident_bytes = 0;

  /// One readable line: "exited with code 3", "killed by SIGSEGV (segmentation fault: an
  /// invalid memory access)", "timed out after 60 s (wall-clock limit): every process of the run
  /// was killed", "stdout passed its limit of 1 MiB: killed", "passed its memory limit of
  /// 4 GiB (...): every process of the run was killed"...
  std::string describe() const;
};

/// "SIGSEGV (segmentation fault: an invalid memory access)"; "signal 42" for unknown ones.
std::string describe_signal(int signal);

/// File descriptor of the result channel in the child (also in $CONVLAB_RESULT_FD).
inline constexpr int kResultFd = 3;
/// First fd of SandboxSpec::extra_fds in the child.
inline constexpr int kFirstExtraFd = 4;

/// Removes the folders that graders killed with SIGKILL left in `parent`: those whose name
/// starts with "convlab-run-" or "convlab-grade-" and whose lock file (kTempDirLockName) exists
/// and can be locked (a live grader holds it). Returns how many it removed.
int sweep_stale_temp_dirs(const std::filesystem::path& parent);

/// Name of the lock file inside a grader's temporary folder.
inline constexpr const char* kTempDirLockName = ".convlab-lock";

/// An exclusive flock on DIR/kTempDirLockName, held while the folder is in use: a sweeper
/// leaves the folder alone. Released when destroyed (or when the process dies).
class TempDirLock {
 public:
  TempDirLock() = default;
  /// Creates the lock file and locks it; throws Error when it cannot.
  explicit TempDirLock(const std::filesystem::path& dir);
  ~TempDirLock();
  TempDirLock(TempDirLock&& other) noexcept;
  TempDirLock& operator=(TempDirLock&& other) noexcept;
  TempDirLock(const TempDirLock&) = delete;
  TempDirLock& operator=(const TempDirLock&) = delete;

 private:
  int fd_ = -1;
};

/// A user id of the sandboxed runs' range (far above any account's) for `key`: the same key
/// gives the same id.
std::uint32_t sandbox_uid(const std::string& key);

/// The variable that names SandboxSpec::pass_fd in the child (fd 4 when there are no
/// extra_fds: it comes after them).
inline constexpr const char* kPassFdEnv = "CONVLAB_PASS_FD";

/// Runs `spec` and waits for it. Never throws for anything the child does; throws Error only
/// when the grader itself cannot work (no pipes, no fork, an input that cannot be copied, an
/// unknown `user`).
SandboxResult run_sandboxed(const SandboxSpec& spec);

/// What this machine allows, probed once per user (for reports and for tests that need a
/// feature): the features a run with default settings would get.
SandboxFeatures probe_sandbox_features(const std::string& user = "nobody");

}  // namespace convlab::grader
