// The sandbox: everything is prepared in the grader before fork(); after fork() the children
// (supervisor, init, the command up to execve) make only async-signal-safe system calls,
// because the grader may be multithreaded and another thread may hold the allocator's lock.
//
// Process tree:
//   grader
//    └─ supervisor: new session; joins the run's cgroup (where there is one); unshares the
//       user (when not root), network, IPC, mount and PID namespaces; mounts (the private
//       tmpfs, the allow-list view); reports features and pids on the control pipe
//        └─ init (PID 1 of the new PID namespace; only when there is one): mounts /proc,
//           reaps, forwards the command's wait status, exits with it gone so that the kernel
//           kills every other process of the namespace
//            └─ the command: own process group, fds 0-3, limits, unprivileged user, execve
// The command is not PID 1 itself: the kernel drops the signals an init sends itself when it has
// no handler for them, so abort() or the CPU-time limit would not end it as they should.
// Without a PID namespace the supervisor forks the command itself, is a child subreaper, and
// after the command ends kills every descendant it inherits.
#include "grader/sandbox/sandbox.hpp"

#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <pwd.h>
#include <sched.h>
#include <sys/file.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cmath>
#include <csignal>
#include <cstring>
#include <fstream>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <system_error>
#include <vector>

#include "grader/sandbox/sandbox_child.hpp"
#include "grader/sandbox/sandbox_memory.hpp"
#include "reference/core/error.hpp"
#include "reference/core/files.hpp"

namespace convlab::grader {

namespace {

namespace fs = std::filesystem;
using namespace sandbox_child;
using namespace sandbox_memory;

// ---------------------------------------------------------------------------------------------
// The grader's side.

class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() { reset(); }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  Fd(Fd&& o) noexcept : fd_(o.fd_) { o.fd_ = -1; }
  Fd& operator=(Fd&& o) noexcept {
    if (this != &o) {
      reset();
      fd_ = o.fd_;
      o.fd_ = -1;
    }
    return *this;
  }
  int get() const { return fd_; }
  void reset() {
    if (fd_ >= 0) close(fd_);
    fd_ = -1;
  }

 private:
  int fd_ = -1;
};

std::string errno_text(int err) {
  return std::error_code(err, std::generic_category()).message();
}

[[noreturn]] void throw_errno(const std::string& what) {
  throw Error("sandbox: " + what + ": " + errno_text(errno));
}

std::pair<Fd, Fd> make_pipe() {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) throw_errno("cannot create a pipe");
  return {Fd(fds[0]), Fd(fds[1])};
}

// User ids handed to sandboxed runs, one per run, far above any account's (no passwd entry).
constexpr std::uint32_t kRunUidBase = 0x70000000u;
constexpr std::uint32_t kRunUidCount = 1u << 24;

struct UserIds {
  uid_t uid = 0;
  gid_t gid = 0;
  std::string name;
};

std::optional<UserIds> lookup_user(const std::string& name) {
  struct passwd pw;
  struct passwd* found = nullptr;
  std::vector<char> buf(16384);
  if (getpwnam_r(name.c_str(), &pw, buf.data(), buf.size(), &found) != 0 || found == nullptr) {
    return std::nullopt;
  }
  return UserIds{pw.pw_uid, pw.pw_gid, name};
}

std::string user_name(uid_t uid) {
  struct passwd pw;
  struct passwd* found = nullptr;
  std::vector<char> buf(16384);
  if (getpwuid_r(uid, &pw, buf.data(), buf.size(), &found) == 0 && found != nullptr) {
    return pw.pw_name;
  }
  return "uid " + std::to_string(uid);
}

// Tasks (threads count for RLIMIT_NPROC) whose real uid is `uid`.
rlim_t count_tasks_of(uid_t uid) {
  rlim_t total = 0;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator("/proc", ec)) {
    const std::string name = entry.path().filename().string();
    if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream status(entry.path() / "status");
    std::string line;
    bool mine = false;
    rlim_t threads = 0;
    while (std::getline(status, line)) {
      if (line.rfind("Uid:", 0) == 0) {
        std::istringstream in(line.substr(4));
        long real = -1;
        in >> real;
        mine = real == static_cast<long>(uid);
      } else if (line.rfind("Threads:", 0) == 0) {
        threads = std::strtoull(line.c_str() + 8, nullptr, 10);
      }
    }
    if (mine) total += std::max<rlim_t>(threads, 1);
  }
  return total;
}

void chown_tree(const fs::path& root, uid_t uid, gid_t gid) {
  if (lchown(root.c_str(), uid, gid) != 0) throw_errno("cannot chown " + root.string());
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(root, ec); !ec && it != fs::end(it);
       it.increment(ec)) {
    if (lchown(it->path().c_str(), uid, gid) != 0) {
      throw_errno("cannot chown " + it->path().string());
    }
  }
  if (ec) throw Error("sandbox: cannot list " + root.string() + ": " + ec.message());
}

// Removes the private directory; a run may have left folders without write permission.
void remove_private_dir(const fs::path& dir) {
  std::error_code ec;
  fs::remove_all(dir, ec);
  if (!ec) return;
  for (auto it = fs::recursive_directory_iterator(dir, ec); !ec && it != fs::end(it);
       it.increment(ec)) {
    if (it->is_directory(ec) && !it->is_symlink(ec)) chmod(it->path().c_str(), 0700);
  }
  fs::remove_all(dir, ec);
}

double seconds(const struct timeval& tv) {
  return static_cast<double>(tv.tv_sec) + static_cast<double>(tv.tv_usec) * 1e-6;
}

std::string format_bytes(std::size_t n) {
  std::ostringstream out;
  if (n >= (std::size_t{1} << 30) && n % (std::size_t{1} << 30) == 0) {
    out << (n >> 30) << " GiB";
  } else if (n >= (1u << 20) && n % (1u << 20) == 0) {
    out << (n >> 20) << " MiB";
  } else if (n >= 1024 && n % 1024 == 0) {
    out << (n >> 10) << " KiB";
  } else {
    out << n << " bytes";
  }
  return out.str();
}

std::string format_seconds(double s) {
  std::ostringstream out;
  out << s << " s";
  return out.str();
}

const char* step_text(std::int64_t step) {
  switch (step) {
    case step_fork:
      return "cannot fork";
    case step_streams:
      return "cannot set up the standard streams";
    case step_rlimit:
      return "cannot set the resource limits";
    case step_setgroups:
      return "cannot drop supplementary groups";
    case step_setgid:
      return "cannot switch group";
    case step_setuid:
      return "cannot switch user";
    case step_no_new_privs:
      return "cannot forbid new privileges";
    case step_chdir:
      return "cannot enter the working directory";
    case step_exec:
      return "cannot run";
    case step_writable:
      return "cannot make a writable path writable";
    case step_view:
      return "cannot make the allow-list view of the file system";
    case step_cgroup:
      return "cannot join the run's cgroup";
    default:
      return "cannot start";
  }
}

// Appends what fits under cap; returns false when data had to be dropped (the cap was passed).
bool append_capped(std::string& dst, std::size_t cap, const char* data, std::size_t n) {
  if (dst.size() + n <= cap) {
    dst.append(data, n);
    return true;
  }
  dst.append(data, cap - std::min(cap, dst.size()));
  return false;
}

// Everything owned by one run that must be released whatever happens.
struct RunFiles {
  TempDirLock lock;  // released after the folder is gone (members die after the body runs)
  fs::path private_dir;
  bool keep = false;
  ~RunFiles() {
    if (!keep && !private_dir.empty()) remove_private_dir(private_dir);
  }
};

std::vector<char*> c_strings(std::vector<std::string>& strings) {
  std::vector<char*> out;
  out.reserve(strings.size() + 1);
  for (std::string& s : strings) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

SandboxFeatures features_from(std::int32_t bits) {
  SandboxFeatures f;
  f.network_namespace = (bits & kNet) != 0;
  f.mount_namespace = (bits & kMnt) != 0;
  f.pid_namespace = (bits & kPid) != 0;
  f.user_namespace = (bits & kUser) != 0;
  f.read_only_root = (bits & kReadOnlyRoot) != 0;
  f.ipc_namespace = (bits & kIpc) != 0;
  f.private_tmpfs = (bits & kTmpfs) != 0;
  f.allow_list_view = (bits & kView) != 0;
  return f;
}

// Feature bits the operator turned off ($CONVLAB_SANDBOX_DISABLE, comma-separated names): to
// see how a grade behaves on a machine that lacks them, and to test the refusal.
std::int32_t disabled_bits() {
  const char* env = std::getenv("CONVLAB_SANDBOX_DISABLE");
  if (env == nullptr) return 0;
  std::int32_t bits = 0;
  std::istringstream in(env);
  std::string name;
  while (std::getline(in, name, ',')) {
    if (name == "network_namespace") bits |= kNet;
    if (name == "mount_namespace") bits |= kMnt;
    if (name == "pid_namespace") bits |= kPid;
    if (name == "ipc_namespace") bits |= kIpc;
  }
  return bits;
}

// ---- The allow-list view, planned in the grader ---------------------------------------------

struct ViewEntry {
  ViewMount::Kind kind = ViewMount::bind_dir;
  std::string source, target;
  bool writable = false;
};

struct ViewPlan {
  std::vector<std::string> dirs;   // folders to make in the new root, parents first
  std::vector<ViewEntry> entries;  // mounts and links, parents first
  std::string private_target;      // the private directory inside the new root
};

// Files of the system folders no run may read, mounted over in every view.
const char* const kViewHiddenFiles[] = {"/etc/shadow", "/etc/gshadow", "/etc/shadow-",
                                        "/etc/gshadow-", "/etc/sudoers"};

ViewPlan plan_view(const fs::path& root, const std::vector<fs::path>& visible,
                   const std::vector<std::string>& writable, bool system_folders) {
  // (path as the run sees it, the real path or link text, kind, writable); sorted by path so
  // that parents come before what is mounted inside them.
  std::map<std::string, ViewEntry> wanted;
  const auto add = [&](const fs::path& given, bool rw) {
    std::error_code ec;
    const fs::path abs = fs::absolute(given, ec).lexically_normal();
    if (ec) return;
    const auto st = fs::symlink_status(abs, ec);
    if (ec || !fs::exists(st)) return;  // nothing there to show
    ViewEntry e;
    e.writable = rw;
    if (fs::is_symlink(st) && abs.parent_path() == abs.root_path()) {
      // /bin -> usr/bin: the same link in the view.
      e.kind = ViewMount::symlink;
      e.source = fs::read_symlink(abs, ec).string();
      if (ec) return;
      wanted[abs.string()] = e;
      return;
    }
    const fs::path real = fs::canonical(abs, ec);
    if (ec) return;
    e.kind = fs::is_directory(real, ec) ? ViewMount::bind_dir : ViewMount::bind_file;
    e.source = real.string();
    wanted[real.string()] = e;
    if (real != abs) wanted[abs.string()] = e;  // also where the caller named it
  };
  if (system_folders) {
    for (const fs::path& p : kViewSystemPaths) add(p, false);
  }
  // Without a PID namespace /proc is this one, read-only; with one, init mounts a fresh one
  // over it.
  add("/proc", false);
  for (const fs::path& p : visible) add(p, false);
  for (const std::string& p : writable) {
    if (p != root.string()) add(p, true);
  }
  for (const char* f : kViewHiddenFiles) {
    std::error_code ec;
    if (system_folders && fs::is_regular_file(f, ec)) {
      wanted[f] = ViewEntry{ViewMount::hide_file, "", f, false};
    }
  }

  ViewPlan plan;
  std::set<std::string> made;
  const auto make_parents = [&](const fs::path& path) {
    fs::path at = root;
    for (const fs::path& part : path.parent_path().relative_path()) {
      at /= part;
      if (made.insert(at.string()).second) plan.dirs.push_back(at.string());
    }
  };
  // A path under a symbolic link of the view (/lib64/x with /lib64 -> usr/lib64) is reached
  // through the link: nothing to make for it.
  const auto under_link = [&](const std::string& path) {
    for (const auto& [other, e] : wanted) {
      if (e.kind == ViewMount::symlink && path.size() > other.size() &&
          path.compare(0, other.size(), other) == 0 && path[other.size()] == '/') {
        return true;
      }
    }
    return false;
  };
  for (const auto& [path, e] : wanted) {
    if (under_link(path)) continue;
    make_parents(path);
    ViewEntry placed = e;
    placed.target = (root / fs::path(path).relative_path()).string();
    plan.entries.push_back(placed);
  }
  plan.private_target = (root / root.relative_path()).string();
  make_parents(root);
  // Without the system's /dev, the folder a fresh /dev/shm is mounted on.
  if (!system_folders) make_parents("/dev/shm/.");
  // The private directory's parents come after the entries' (a bind may hold them): made by
  // the supervisor in plan order, so they go last, each once.
  return plan;
}

}  // namespace

// ---------------------------------------------------------------------------------------------

const std::vector<fs::path> kViewSystemPaths = {"/usr",   "/bin",    "/sbin", "/lib", "/lib32",
                                                "/lib64", "/libx32", "/etc",  "/dev", "/sys"};

std::uint32_t sandbox_uid(const std::string& key) {
  return kRunUidBase + static_cast<std::uint32_t>(std::hash<std::string>{}(key) % kRunUidCount);
}

const char* memory_limit_name(MemoryLimitKind kind) {
  switch (kind) {
    case MemoryLimitKind::cgroup:
      return "cgroup";
    case MemoryLimitKind::address_space:
      return "address_space";
    case MemoryLimitKind::rss_poll:
      return "rss_poll";
    case MemoryLimitKind::none:
      break;
  }
  return "none";
}

TempDirLock::TempDirLock(const fs::path& dir) {
  // Locked under another name, then renamed into place: a sweeper never finds the lock file
  // unlocked while its folder is being set up.
  const fs::path file = dir / kTempDirLockName;
  const fs::path making = dir / (std::string(kTempDirLockName) + ".new");
  fd_ = open(making.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd_ < 0) throw_errno("cannot create the lock file " + making.string());
  if (flock(fd_, LOCK_EX | LOCK_NB) != 0 || rename(making.c_str(), file.c_str()) != 0) {
    const int err = errno;
    close(fd_);
    fd_ = -1;
    errno = err;
    throw_errno("cannot lock " + file.string());
  }
}

TempDirLock::~TempDirLock() {
  if (fd_ >= 0) close(fd_);
}

TempDirLock::TempDirLock(TempDirLock&& other) noexcept : fd_(other.fd_) {
  other.fd_ = -1;
}

TempDirLock& TempDirLock::operator=(TempDirLock&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) close(fd_);
    fd_ = other.fd_;
    other.fd_ = -1;
  }
  return *this;
}

int sweep_stale_temp_dirs(const fs::path& parent) {
  int removed = 0;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(parent, ec)) {
    const std::string name = entry.path().filename().string();
    if (!name.starts_with("convlab-run-") && !name.starts_with("convlab-grade-")) continue;
    if (!entry.is_directory(ec) || entry.is_symlink(ec)) continue;
    // A folder without its lock file is being made (or is not ours): left alone.
    const fs::path lock = entry.path() / kTempDirLockName;
    const int fd = open(lock.c_str(), O_RDWR | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) continue;
    if (flock(fd, LOCK_EX | LOCK_NB) == 0) {
      // Nobody holds it: its grader is gone. Removed while locked, so that no other sweeper
      // takes it at the same time.
      struct stat st;
      if (fstat(fd, &st) == 0 && (st.st_uid == geteuid() || geteuid() == 0)) {
        remove_private_dir(entry.path());
        ++removed;
      }
    }
    close(fd);
  }
  return removed;
}

std::vector<IsolationProblem> isolation_problems(const SandboxFeatures& f) {
  std::vector<IsolationProblem> out;
  const std::string kernel =
      "run the grader as root, or allow unprivileged user namespaces "
      "(sysctl kernel.unprivileged_userns_clone=1, or "
      "kernel.apparmor_restrict_unprivileged_userns=0); "
      "in a container, give it CAP_SYS_ADMIN (docker run --cap-add SYS_ADMIN "
      "--security-opt seccomp=unconfined, or --privileged)";
  if (!f.network_namespace) {
    out.push_back({"network_namespace", "checks could reach the network", kernel});
  }
  if (!f.mount_namespace) {
    out.push_back({"mount_namespace",
                   "checks and builds could read the hidden models, the labels and every file",
                   kernel});
  }
  if (!f.pid_namespace) {
    out.push_back({"pid_namespace", "checks could see and signal the grader's processes", kernel});
  }
  if (!f.ipc_namespace) {
    out.push_back({"ipc_namespace",
                   "SysV shared memory would outlive a check and pass data between checks and "
                   "teams",
                   kernel});
  }
  if (!f.read_only_root) {
    out.push_back({"read_only_root", "checks could write outside their folder",
                   "a kernel with mount_setattr (Linux 5.12 or newer) and a mount namespace"});
  }
  if (!f.private_tmpfs) {
    out.push_back({"private_tmpfs", "a check could fill the disk through its /tmp folder",
                   "a mount namespace in which tmpfs can be mounted (" + kernel + ")"});
  }
  if (f.memory_limit == MemoryLimitKind::none) {
    out.push_back({"memory_limit", "a check could take all the machine's memory",
                   "keep Limits::max_memory_bytes above 0"});
  }
  if (!f.dropped_privileges && !f.user_namespace) {
    out.push_back({"dropped_privileges", "checks and builds would run with the grader's own rights",
                   geteuid() == 0 ? "create the user '" + f.user + "'"
                                  : "allow unprivileged user namespaces, or run the grader as "
                                    "root (it then runs each check as an unprivileged user)"});
  }
  return out;
}

std::vector<std::string> require_isolation(bool allow_degraded, const std::string& user) {
  std::error_code ec;
  const fs::path tmp = fs::temp_directory_path(ec);
  if (!ec) sweep_stale_temp_dirs(tmp);
  if (ec || fs::path("/tmp") != tmp) sweep_stale_temp_dirs("/tmp");
  const std::vector<IsolationProblem> problems = isolation_problems(probe_sandbox_features(user));
  std::vector<std::string> names;
  for (const IsolationProblem& p : problems) names.push_back(p.feature);
  if (!problems.empty() && !allow_degraded) {
    std::string text = "this machine cannot isolate a grade fully; refusing to grade. Missing:";
    for (const IsolationProblem& p : problems) {
      text += "\n  " + p.feature + ": " + p.why + ". To get it: " + p.fix + ".";
    }
    text +=
        "\nOr pass --allow-degraded to grade anyway; report.json then records allow_degraded "
        "and the missing features.";
    throw Error(text);
  }
  return names;
}

std::string describe_signal(int signal) {
  struct Known {
    int signal;
    const char* name;
    const char* meaning;
  };
  static constexpr Known known[] = {
      {SIGSEGV, "SIGSEGV", "segmentation fault: an invalid memory access"},
      {SIGABRT, "SIGABRT", "abort: abort() was called or an assert failed"},
      {SIGXCPU, "SIGXCPU", "CPU-time limit reached"},
      {SIGXFSZ, "SIGXFSZ", "file-size limit: a file grew past the limit"},
      {SIGKILL, "SIGKILL", "killed: out of memory, or the hard CPU-time limit"},
      {SIGBUS, "SIGBUS", "bus error: a bad memory access"},
      {SIGFPE, "SIGFPE", "arithmetic exception, e.g. an integer division by zero"},
      {SIGILL, "SIGILL", "illegal instruction"},
      {SIGTERM, "SIGTERM", "terminated"},
      {SIGINT, "SIGINT", "interrupted"},
      {SIGHUP, "SIGHUP", "hang-up"},
      {SIGPIPE, "SIGPIPE", "broken pipe: wrote to a pipe nobody reads"},
      {SIGTRAP, "SIGTRAP", "trace or breakpoint trap"},
      {SIGSYS, "SIGSYS", "bad system call"},
      {SIGALRM, "SIGALRM", "alarm clock"},
      {SIGUSR1, "SIGUSR1", "user signal 1"},
      {SIGUSR2, "SIGUSR2", "user signal 2"},
  };
  for (const Known& k : known) {
    if (k.signal == signal) return std::string(k.name) + " (" + k.meaning + ")";
  }
  return "signal " + std::to_string(signal);
}

std::string SandboxResult::describe() const {
  switch (outcome) {
    case Outcome::exited:
      return "exited with code " + std::to_string(exit_code);
    case Outcome::signaled:
      return "killed by " + describe_signal(signal);
    case Outcome::timed_out:
      return "timed out after " + format_seconds(limits.wall_s) +
             " (wall-clock limit): every process of the run was killed";
    case Outcome::output_limit: {
      std::string which = channel_truncated ? "the result channel" : "";
      std::size_t cap = channel_truncated ? limits.max_channel_bytes : limits.max_output_bytes;
      if (stdout_truncated || stderr_truncated) {
        which = stdout_truncated && stderr_truncated ? "stdout and stderr"
                : stdout_truncated                   ? "stdout"
                                                     : "stderr";
        cap = limits.max_output_bytes;
      }
      return which + " passed its limit of " + format_bytes(cap) +
             ": every process of the run was killed";
    }
    case Outcome::memory_limit:
      return "passed its memory limit of " + format_bytes(limits.max_memory_bytes) + " (" +
             memory_limit_name(features.memory_limit) +
             "): every process of the run was killed; use less memory";
    case Outcome::start_failed:
      return "could not start: " + start_error;
  }
  return "unknown outcome";
}

namespace {

// ---- One run, step by step: run_sandboxed() below calls these in order. --------------------

void check_spec(const SandboxSpec& spec) {
  if (spec.argv.empty()) throw Error("sandbox: nothing to run (empty argv)");
  if (spec.extra_fds.size() + (spec.pass_fd >= 0) > 8) {
    throw Error("sandbox: at most 8 extra fds can be passed");
  }
  for (const int fd : spec.extra_fds) {
    if (fcntl(fd, F_GETFD) < 0) throw_errno("extra fd " + std::to_string(fd) + " is not open");
  }
}

// Who the run's processes are.
struct RunUser {
  bool root = false;  // the grader runs as root
  bool drop = false;  // and drops to `ids` in the run
  UserIds ids;
};

RunUser choose_user(const SandboxSpec& spec) {
  RunUser u;
  u.root = geteuid() == 0;
  u.drop = u.root && spec.drop_privileges;
  u.ids = {geteuid(), getegid(), user_name(geteuid())};
  if (!u.drop) return u;
  const auto found = lookup_user(spec.user);
  if (!found) {
    throw Error("sandbox: no user '" + spec.user +
                "' on this machine; create it or set SandboxSpec::user to an unprivileged one");
  }
  u.ids = *found;
  // Each run gets a user id of its own (the named user's group): RLIMIT_NPROC counts per
  // user, so a fork bomb in one run cannot starve the others running beside it.
  static std::atomic<std::uint32_t> runs{0};
  const std::uint32_t slot =
      (static_cast<std::uint32_t>(getpid()) * 256u + runs.fetch_add(1)) % kRunUidCount;
  u.ids.uid = static_cast<uid_t>(kRunUidBase + slot);
  if (spec.uid != 0) u.ids.uid = static_cast<uid_t>(spec.uid);
  return u;
}

// The private directory, with the inputs, owned by the run's user.
void make_private_dir(const SandboxSpec& spec, const RunUser& user, RunFiles& files) {
  files.keep = spec.keep_private_dir;
  {
    const fs::path parent =
        spec.private_parent.empty() ? fs::temp_directory_path() : spec.private_parent;
    std::string pattern = (parent / "convlab-run-XXXXXX").string();
    if (mkdtemp(pattern.data()) == nullptr) {
      throw_errno("cannot create a private directory in " + parent.string());
    }
    files.private_dir = pattern;
  }
  const fs::path& private_dir = files.private_dir;
  if (chmod(private_dir.c_str(), 0700) != 0) throw_errno("cannot chmod " + private_dir.string());
  for (const auto& [source, name] : spec.inputs) {
    const fs::path target = private_dir / name;
    std::error_code ec;
    fs::create_directories(target.parent_path(), ec);
    fs::copy(source, target, fs::copy_options::recursive | fs::copy_options::overwrite_existing,
             ec);
    if (ec) {
      throw Error("sandbox: cannot copy " + source.string() +
                  " into the private directory: " + ec.message());
    }
  }
  if (user.drop) chown_tree(private_dir, user.ids.uid, user.ids.gid);
  files.lock = TempDirLock(private_dir);  // root's file: the sweeper leaves a live run alone
}

// Every string the children use, built before the fork: they only read them. Filled in place
// (ChildPlan points into it), never moved.
struct RunStrings {
  std::vector<std::string> argv_strings, env_strings;
  std::vector<char*> argv, envp;
  std::string exec_path, workdir;
  std::vector<std::string> hide_dirs, hide_files, writable, input_names;
  std::string uid_map, gid_map, shm_options, tmp_options, shmall;
  ViewPlan view;
};

// argv and envp: the command (relative to the private directory) and its environment.
void build_command(const SandboxSpec& spec, const fs::path& private_dir, RunStrings& s) {
  s.argv_strings = spec.argv;
  if (!fs::path(s.argv_strings[0]).is_absolute()) {
    s.argv_strings[0] = (private_dir / s.argv_strings[0]).string();
  }
  s.exec_path = s.argv_strings[0];
  s.argv = c_strings(s.argv_strings);

  std::map<std::string, std::string> env = spec.env;
  env.emplace("HOME", private_dir.string());
  env.emplace("TMPDIR", private_dir.string());
  env["CONVLAB_RESULT_FD"] = std::to_string(kResultFd);
  if (!spec.extra_fds.empty()) {
    std::string fds;
    for (std::size_t i = 0; i < spec.extra_fds.size(); ++i) {
      fds += (i > 0 ? "," : "") + std::to_string(kFirstExtraFd + static_cast<int>(i));
    }
    env["CONVLAB_EXTRA_FDS"] = fds;
  }
  // pass_fd comes after the extra fds.
  if (spec.pass_fd >= 0) {
    env[kPassFdEnv] = std::to_string(kFirstExtraFd + static_cast<int>(spec.extra_fds.size()));
  }
  for (const auto& [key, value] : env) {
    if (key.empty() || key.find('=') != std::string::npos) {
      throw Error("sandbox: bad environment variable name '" + key + "'");
    }
    s.env_strings.push_back(key + "=" + value);
  }
  s.envp = c_strings(s.env_strings);
  s.workdir = spec.workdir.empty() ? private_dir.string() : spec.workdir.string();
}

// What the run sees: hidden and writable paths, the tmpfs options, the inputs' names and the
// allow-list view, every path made now; the supervisor only mounts.
void build_mounts(const SandboxSpec& spec, const fs::path& private_dir, const RunUser& user,
                  RunStrings& s) {
  const Limits& limits = spec.limits;
  for (const fs::path& path : spec.hide_paths) {
    std::error_code ec;
    const fs::path real = fs::canonical(path, ec);
    if (ec) continue;  // nothing there to hide
    (fs::is_directory(real, ec) ? s.hide_dirs : s.hide_files).push_back(real.string());
  }
  s.writable.push_back(private_dir.string());
  std::vector<fs::path> more = spec.writable_paths;
  if (!spec.workdir.empty()) more.push_back(spec.workdir);
  for (const fs::path& path : more) {
    std::error_code ec;
    const fs::path real = fs::canonical(path, ec);
    if (!ec) s.writable.push_back(real.string());
  }
  s.uid_map = std::to_string(geteuid()) + " " + std::to_string(geteuid()) + " 1\n";
  s.gid_map = std::to_string(getegid()) + " " + std::to_string(getegid()) + " 1\n";
  s.shm_options =
      "size=" + std::to_string(std::max<std::uint64_t>(limits.max_file_bytes, 1u << 20)) +
      ",nr_inodes=4096,mode=1777";
  s.tmp_options = "size=" + std::to_string(std::max<std::uint64_t>(limits.tmp_bytes, 1u << 20)) +
                  ",nr_inodes=" + std::to_string(std::max<std::uint64_t>(limits.tmp_inodes, 64)) +
                  ",mode=0700,uid=" + std::to_string(user.ids.uid) +
                  ",gid=" + std::to_string(user.ids.gid);
  // SysV shared memory of the run's IPC namespace, in pages: as much as its /dev/shm.
  s.shmall = std::to_string(std::max<std::uint64_t>(limits.max_file_bytes, 1u << 20) /
                            static_cast<std::uint64_t>(sysconf(_SC_PAGESIZE)));
  for (const auto& [source, name] : spec.inputs) {
    const fs::path rel = fs::path(name).lexically_normal();
    if (rel.empty() || rel.is_absolute() || *rel.begin() == "..") {
      throw Error("sandbox: input name '" + name + "' is not a name inside the private directory");
    }
    const std::string top = rel.begin()->string();
    if (std::find(s.input_names.begin(), s.input_names.end(), top) == s.input_names.end()) {
      s.input_names.push_back(top);
    }
  }
  if (spec.visible_paths) {
    s.view = plan_view(private_dir, *spec.visible_paths, s.writable, spec.system_folders);
  }
}

// The mounts part of the children's plan: pointers into `s`.
void plan_mounts(const SandboxSpec& spec, const RunStrings& s, const fs::path& private_dir,
                 ChildPlan& plan) {
  plan.uid_map = s.uid_map.c_str();
  plan.gid_map = s.gid_map.c_str();
  for (const std::string& h : s.hide_dirs) plan.hide_dirs.push_back(h.c_str());
  for (const std::string& h : s.hide_files) plan.hide_files.push_back(h.c_str());
  for (const std::string& w : s.writable) plan.writable.push_back(w.c_str());
  plan.shm_options = fs::is_directory("/dev/shm") ? s.shm_options.c_str() : nullptr;
  plan.disabled = disabled_bits();
  plan.shmall = s.shmall.c_str();
  plan.private_dir = private_dir.c_str();
  plan.tmp_options = spec.keep_private_dir ? nullptr : s.tmp_options.c_str();
  for (const std::string& n : s.input_names) plan.input_names.push_back(n.c_str());
  plan.view = spec.visible_paths.has_value();
  plan.view_root = private_dir.c_str();
  plan.view_private = s.view.private_target.c_str();
  for (const std::string& d : s.view.dirs) plan.view_dirs.push_back(d.c_str());
  for (const ViewEntry& e : s.view.entries) {
    plan.view_mounts.push_back({e.kind, e.source.c_str(), e.target.c_str(), e.writable});
  }
}

// The resource limits part of the children's plan.
void plan_limits(const SandboxSpec& spec, const RunUser& user, const MemoryLimit& memory,
                 ChildPlan& plan) {
  const Limits& limits = spec.limits;
  if (!memory.cgroup_procs.empty()) plan.cgroup_procs = memory.cgroup_procs.c_str();
  if (memory.kind == MemoryLimitKind::address_space) {
    // A backstop for what grows faster than the polling sees: twice the limit of address
    // space per process (threads' stacks and malloc's arenas reserve more than they use).
    plan.set_as = true;
    plan.as = static_cast<rlim_t>(std::min<std::uint64_t>(limits.max_memory_bytes, 1ull << 62) * 2);
  }
  if (limits.cpu_s > 0) {
    plan.set_cpu = true;
    plan.cpu_soft = static_cast<rlim_t>(std::ceil(limits.cpu_s));
    plan.cpu_hard = plan.cpu_soft + 1;
  }
  if (limits.max_processes > 0 && (user.drop || !user.root)) {
    // RLIMIT_NPROC counts every task of the real user: allow what it already runs, plus ours.
    plan.set_nproc = true;
    plan.nproc = count_tasks_of(user.ids.uid) + static_cast<rlim_t>(limits.max_processes);
  }
  if (limits.max_file_bytes > 0) {
    plan.set_fsize = true;
    plan.fsize = static_cast<rlim_t>(limits.max_file_bytes);
  }
}

// What the supervisor and the command are told (without the pipes: RunMonitor::start).
ChildPlan make_plan(const SandboxSpec& spec, const RunUser& user, const RunStrings& s,
                    const MemoryLimit& memory, const fs::path& private_dir) {
  ChildPlan plan;
  plan.grader_pid = getpid();
  plan.exec_path = s.exec_path.c_str();
  plan.argv = s.argv.data();
  plan.envp = s.envp.data();
  plan.workdir = s.workdir.c_str();
  plan.use_namespaces = spec.use_namespaces;
  plan.try_user_ns = !user.root;
  plan_mounts(spec, s, private_dir, plan);
  plan_limits(spec, user, memory, plan);
  for (const int fd : spec.extra_fds) plan.extra[plan.n_extra++] = fd;
  if (spec.pass_fd >= 0) plan.extra[plan.n_extra++] = spec.pass_fd;
  plan.drop = user.drop;
  plan.uid = user.ids.uid;
  plan.gid = user.ids.gid;
  return plan;
}

// Starts the run and watches it: reads its streams and the supervisor's control records,
// enforces the wall-time, output and memory limits, and reaps the supervisor.
class RunMonitor {
 public:
  RunMonitor(const Limits& limits, SandboxResult& result) : limits_(limits), result_(result) {}

  // Forks the supervisor with `plan` (the pipes added); `pass_fd` is closed once it has it.
  void start(ChildPlan& plan, Fd& pass_fd);
  // Until the supervisor has exited; then takes what is left on the streams.
  void watch();

  // What the control records and the limits said.
  struct Seen {
    std::int32_t feature_bits = 0;
    pid_t command_pid = 0, init_pid = 0;
    std::optional<int> command_status;
    std::optional<Record> setup_error;
    bool over_limit = false, timed_out = false, over_memory = false;
    MemoryUse peak;
    int supervisor_status = 0;
    double wall_s = 0.0, cpu_s = 0.0;
  };
  const Seen& seen() const { return seen_; }

 private:
  void kill_run();
  void parse_control();
  bool read_stream(int i, int fd);
  void check_limits(std::chrono::steady_clock::time_point now);
  void poll_streams(std::chrono::steady_clock::time_point now);

  const Limits& limits_;
  SandboxResult& result_;
  Seen seen_;
  pid_t supervisor_ = -1;
  Fd out_r_, err_r_, chan_r_, ctl_r_, pidfd_;
  std::string control_;
  bool killed_ = false;
  bool open_streams_[4] = {true, true, true, true};
  std::chrono::steady_clock::time_point start_, deadline_, killed_at_, next_memory_poll_;
};

void RunMonitor::start(ChildPlan& plan, Fd& pass_fd) {
  auto [out_r, out_w] = make_pipe();
  auto [err_r, err_w] = make_pipe();
  auto [chan_r, chan_w] = make_pipe();
  auto [ctl_r, ctl_w] = make_pipe();
  Fd devnull(open("/dev/null", O_RDWR | O_CLOEXEC));
  if (devnull.get() < 0) throw_errno("cannot open /dev/null");
  plan.devnull = devnull.get();
  plan.out_w = out_w.get();
  plan.err_w = err_w.get();
  plan.chan_w = chan_w.get();
  plan.ctl_w = ctl_w.get();

  start_ = std::chrono::steady_clock::now();
  supervisor_ = fork();
  if (supervisor_ < 0) throw_errno("cannot fork");
  if (supervisor_ == 0) supervise(plan);
  // The run has its copy: the other end then sees the run's end as the end of the socket.
  pass_fd.reset();

  out_w.reset();
  err_w.reset();
  chan_w.reset();
  ctl_w.reset();
  devnull.reset();
  for (const Fd* fd : {&out_r, &err_r, &chan_r, &ctl_r}) {
    fcntl(fd->get(), F_SETFL, fcntl(fd->get(), F_GETFL) | O_NONBLOCK);
  }
  out_r_ = std::move(out_r);
  err_r_ = std::move(err_r);
  chan_r_ = std::move(chan_r);
  ctl_r_ = std::move(ctl_r);
  pidfd_ = Fd(static_cast<int>(syscall(SYS_pidfd_open, supervisor_, 0)));
  next_memory_poll_ = std::chrono::steady_clock::now();
  deadline_ = start_ + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                           std::chrono::duration<double>(std::max(limits_.wall_s, 0.0)));
}

void RunMonitor::kill_run() {
  // With a PID namespace, killing its init kills every process in it.
  if (seen_.init_pid > 0) kill(seen_.init_pid, SIGKILL);
  if (seen_.command_pid > 0) {
    kill(seen_.command_pid, SIGKILL);
    kill(-seen_.command_pid, SIGKILL);
  }
  if (seen_.init_pid <= 0 && seen_.command_pid <= 0) kill(supervisor_, SIGKILL);
  if (!killed_) killed_at_ = std::chrono::steady_clock::now();
  killed_ = true;
}

void RunMonitor::parse_control() {
  std::size_t used = 0;
  while (control_.size() - used >= sizeof(Record)) {
    Record r;
    std::memcpy(&r, control_.data() + used, sizeof r);
    used += sizeof r;
    switch (r.kind) {
      case kFeatures:
        seen_.feature_bits = r.a;
        break;
      case kPids:
        seen_.command_pid = r.a;
        seen_.init_pid = static_cast<pid_t>(r.b);
        if (killed_) kill_run();  // a limit was passed before the pids were known
        break;
      case kSetupError:
        if (!seen_.setup_error) seen_.setup_error = r;
        break;
      case kStatus:
        seen_.command_status = r.a;
        break;
      default:
        break;
    }
  }
  control_.erase(0, used);
}

// Reads what is available on stream i; returns false at end of file.
bool RunMonitor::read_stream(int i, int fd) {
  char buf[65536];
  for (;;) {
    const ssize_t n = read(fd, buf, sizeof buf);
    if (n > 0) {
      const auto len = static_cast<std::size_t>(n);
      bool fits = true;
      switch (i) {
        case 0:
          fits = append_capped(result_.stdout_text, limits_.max_output_bytes, buf, len);
          if (!fits) result_.stdout_truncated = true;
          break;
        case 1:
          fits = append_capped(result_.stderr_text, limits_.max_output_bytes, buf, len);
          if (!fits) result_.stderr_truncated = true;
          break;
        case 2:
          fits = append_capped(result_.channel, limits_.max_channel_bytes, buf, len);
          if (!fits) result_.channel_truncated = true;
          break;
        default:
          control_.append(buf, len);
          parse_control();
          break;
      }
      if (!fits && !seen_.over_limit && !seen_.timed_out) {
        seen_.over_limit = true;
        kill_run();
      }
      continue;
    }
    if (n == 0) return false;
    if (errno == EINTR) continue;
    return true;  // EAGAIN: nothing more for now
  }
}

// The wall-time and memory limits, at `now`.
void RunMonitor::check_limits(std::chrono::steady_clock::time_point now) {
  if (!killed_ && limits_.wall_s > 0 && now >= deadline_) {
    seen_.timed_out = true;
    kill_run();
  }
  // The supervisor cleans up and exits right after the run; if it does not, end it.
  if (killed_ && now - killed_at_ > std::chrono::seconds(5)) kill(supervisor_, SIGKILL);
  if (!killed_ && limits_.max_memory_bytes > 0 && now >= next_memory_poll_) {
    next_memory_poll_ = now + std::chrono::milliseconds(100);
    const MemoryUse use = run_memory(supervisor_, seen_.init_pid);
    seen_.peak.resident = std::max(seen_.peak.resident, use.resident);
    seen_.peak.largest_vm = std::max(seen_.peak.largest_vm, use.largest_vm);
    if (use.resident > limits_.max_memory_bytes) {
      seen_.over_memory = true;
      kill_run();
    }
  }
}

// Waits for output or the supervisor's end (at most until the next limit check) and reads.
void RunMonitor::poll_streams(std::chrono::steady_clock::time_point now) {
  const int stream_fds[4] = {out_r_.get(), err_r_.get(), chan_r_.get(), ctl_r_.get()};
  struct pollfd fds[5];
  int n_fds = 0;
  int which[5];
  for (int i = 0; i < 4; ++i) {
    if (!open_streams_[i]) continue;
    fds[n_fds] = {stream_fds[i], POLLIN, 0};
    which[n_fds++] = i;
  }
  if (pidfd_.get() >= 0) {
    fds[n_fds] = {pidfd_.get(), POLLIN, 0};
    which[n_fds++] = -1;
  }
  long wait_ms = pidfd_.get() >= 0 ? (limits_.max_memory_bytes > 0 ? 100 : 1000) : 20;
  if (!killed_ && limits_.wall_s > 0) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline_ - now);
    wait_ms = std::clamp<long>(static_cast<long>(left.count()) + 1, 0, wait_ms);
  }
  const int ready = poll(fds, static_cast<nfds_t>(n_fds), static_cast<int>(wait_ms));
  if (ready < 0 && errno != EINTR) throw_errno("poll failed");
  for (int k = 0; k < n_fds && ready > 0; ++k) {
    if (which[k] < 0 || (fds[k].revents & (POLLIN | POLLHUP | POLLERR)) == 0) continue;
    if (!read_stream(which[k], fds[k].fd)) open_streams_[which[k]] = false;
  }
}

void RunMonitor::watch() {
  struct rusage usage;
  std::memset(&usage, 0, sizeof usage);
  for (;;) {
    const pid_t r = wait4(supervisor_, &seen_.supervisor_status, WNOHANG, &usage);
    if (r == supervisor_) break;
    if (r < 0 && errno != EINTR) break;  // cannot happen: it is our child
    const auto now = std::chrono::steady_clock::now();
    check_limits(now);
    poll_streams(now);
  }
  const auto end = std::chrono::steady_clock::now();
  // Every writer is gone now (the namespace or the subreaper took them); take what is left.
  const int stream_fds[4] = {out_r_.get(), err_r_.get(), chan_r_.get(), ctl_r_.get()};
  for (int i = 0; i < 4; ++i) {
    if (open_streams_[i]) read_stream(i, stream_fds[i]);
  }
  parse_control();
  seen_.wall_s = std::chrono::duration<double>(end - start_).count();
  seen_.cpu_s = seconds(usage.ru_utime) + seconds(usage.ru_stime);
}

// How the run ended: the outcome and its details in `result`.
void classify(const RunMonitor::Seen& seen, const RunStrings& s, const RunUser& user,
              const MemoryLimit& memory, const Limits& limits, SandboxResult& result) {
  if (seen.setup_error) {
    result.outcome = Outcome::start_failed;
    const auto step = seen.setup_error->b;
    std::string what = step_text(step);
    if (step == step_exec) what += " " + s.exec_path;
    if (step == step_chdir) what += " " + s.workdir + " as " + user.ids.name;
    if (step == step_setuid || step == step_setgid) what += " to " + user.ids.name;
    result.start_error = what + ": " + errno_text(seen.setup_error->a);
    result.features.dropped_privileges = false;
    return;
  }
  result.features.dropped_privileges = user.drop;
  const std::optional<int>& status = seen.command_status;
  const bool failed = !(status && WIFEXITED(*status) && WEXITSTATUS(*status) == 0);
  // The kernel's OOM killer in the cgroup, the poller, or (RLIMIT_AS) an allocation that failed
  // and ended the run: said so, with the limit, rather than as a crash.
  const bool memory_failure =
      seen.over_memory || (failed && !memory.cgroup.dir.empty() && memory.cgroup.oom_killed()) ||
      (failed && memory.kind == MemoryLimitKind::address_space &&
       (seen.peak.largest_vm >= limits.max_memory_bytes || says_out_of_memory(result.stderr_text) ||
        says_out_of_memory(result.stdout_text)));
  const int supervisor_status = seen.supervisor_status;
  if (seen.over_limit) {
    result.outcome = Outcome::output_limit;
  } else if (seen.timed_out) {
    result.outcome = Outcome::timed_out;
  } else if (memory_failure) {
    result.outcome = Outcome::memory_limit;
  } else if (status) {
    if (WIFEXITED(*status)) {
      result.outcome = Outcome::exited;
      result.exit_code = WEXITSTATUS(*status);
    } else {
      result.outcome = Outcome::signaled;
      result.signal = WIFSIGNALED(*status) ? WTERMSIG(*status) : SIGKILL;
    }
  } else if (seen.command_pid > 0 || seen.init_pid > 0) {
    // The supervisor died under the run (out of memory...): the run went with it.
    result.outcome = Outcome::signaled;
    result.signal = WIFSIGNALED(supervisor_status) ? WTERMSIG(supervisor_status) : SIGKILL;
  } else {
    result.outcome = Outcome::start_failed;
    result.start_error = "the sandbox supervisor ended before the run started (" +
                         (WIFSIGNALED(supervisor_status)
                              ? "killed by " + describe_signal(WTERMSIG(supervisor_status))
                              : "exit code " + std::to_string(WEXITSTATUS(supervisor_status))) +
                         ")";
  }
}

}  // namespace

SandboxResult run_sandboxed(const SandboxSpec& spec) {
  Fd pass_fd(spec.pass_fd);  // ours now: closed once the run has it, or on any way out
  check_spec(spec);
  SandboxResult result;
  result.limits = spec.limits;
  const RunUser user = choose_user(spec);
  RunFiles files;
  make_private_dir(spec, user, files);
  result.private_dir = files.private_dir;
  RunStrings strings;
  build_command(spec, files.private_dir, strings);
  build_mounts(spec, files.private_dir, user, strings);
  MemoryLimit memory;
  set_up_memory_limit(spec, memory);
  ChildPlan plan = make_plan(spec, user, strings, memory, files.private_dir);

  RunMonitor monitor(spec.limits, result);
  monitor.start(plan, pass_fd);
  monitor.watch();
  const RunMonitor::Seen& seen = monitor.seen();
  result.wall_s = seen.wall_s;
  result.cpu_s = seen.cpu_s;
  result.features = features_from(seen.feature_bits);
  result.features.user = user.ids.name;
  result.features.memory_limit = memory.kind;
  result.peak_resident_bytes = seen.peak.resident;
  classify(seen, strings, user, memory, spec.limits, result);
  return result;
}

SandboxFeatures probe_sandbox_features(const std::string& user) {
  static std::mutex mutex;
  static std::map<std::string, SandboxFeatures> probed;
  const std::lock_guard lock(mutex);
  if (const auto it = probed.find(user); it != probed.end()) return it->second;

  const bool root = geteuid() == 0;
  const auto found = root ? lookup_user(user) : std::nullopt;
  const std::string uid_map = std::to_string(geteuid()) + " " + std::to_string(geteuid()) + " 1\n";
  const std::string gid_map = std::to_string(getegid()) + " " + std::to_string(getegid()) + " 1\n";
  ChildPlan plan;
  plan.grader_pid = getpid();
  plan.run_command = false;
  plan.try_user_ns = !root;
  plan.uid_map = uid_map.c_str();
  plan.gid_map = gid_map.c_str();
  plan.disabled = disabled_bits();
  auto [ctl_r, ctl_w] = make_pipe();
  Fd devnull(open("/dev/null", O_RDWR | O_CLOEXEC));
  plan.devnull = plan.out_w = plan.err_w = plan.chan_w = devnull.get();
  plan.ctl_w = ctl_w.get();
  const pid_t child = fork();
  if (child < 0) throw_errno("cannot fork");
  if (child == 0) supervise(plan);
  ctl_w.reset();
  Record r;
  std::int32_t bits = 0;
  ssize_t n;
  while ((n = read(ctl_r.get(), &r, sizeof r)) == static_cast<ssize_t>(sizeof r) ||
         (n < 0 && errno == EINTR)) {
    if (n > 0 && r.kind == kFeatures) bits = r.a;
  }
  int status;
  checked_waitpid(child, &status);

  SandboxFeatures f = features_from(bits);
  f.dropped_privileges = found.has_value();
  f.user = found ? user : user_name(geteuid());
  // What a default run gets: the private tmpfs and the view need the mount namespace only.
  f.private_tmpfs = f.mount_namespace;
  f.memory_limit =
      usable_cgroup_parent().empty() ? MemoryLimitKind::address_space : MemoryLimitKind::cgroup;
  probed[user] = f;
  return f;
}

}  // namespace convlab::grader
