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

#include "reference/core/error.hpp"
#include "reference/core/files.hpp"

namespace convlab::grader {

namespace {

namespace fs = std::filesystem;

// ---------------------------------------------------------------------------------------------
// The control pipe: fixed-size records (smaller than PIPE_BUF, so each write is atomic).

enum RecordKind : std::int32_t {
  kFeatures = 1,    // a: feature bits
  kPids = 2,        // a: the command's pid (0 with a PID namespace), b: init's pid (or 0)
  kSetupError = 3,  // a: errno, b: the step that failed (Step)
  kStatus = 4,      // a: the command's wait status
};

struct Record {
  std::int32_t kind = 0;
  std::int32_t a = 0;
  std::int64_t b = 0;
};

enum FeatureBit : std::int32_t {
  kNet = 1,
  kMnt = 2,
  kPid = 4,
  kUser = 8,
  kReadOnlyRoot = 16,
  kIpc = 32,
  kTmpfs = 64,
  kView = 128,
};

enum Step : std::int64_t {
  step_fork = 1,
  step_streams,
  step_rlimit,
  step_setgroups,
  step_setgid,
  step_setuid,
  step_no_new_privs,
  step_chdir,
  step_exec,
  step_writable,
  step_view,
  step_cgroup,
};

// One mount of the allow-list view, prepared in the grader.
struct ViewMount {
  enum Kind { bind_dir, bind_file, symlink, hide_file } kind = bind_dir;
  const char* source = nullptr;  // the real path (bind), the link's text (symlink)
  const char* target = nullptr;  // inside the new root (view_root + path)
  bool writable = false;
};

// ---------------------------------------------------------------------------------------------
// Everything the children need, prepared before fork (the children only read it).

struct ChildPlan {
  pid_t grader_pid = 0;
  const char* exec_path = nullptr;
  char* const* argv = nullptr;
  char* const* envp = nullptr;
  const char* workdir = nullptr;

  bool run_command = true;  // false: probe the namespaces only
  bool use_namespaces = true;
  bool try_user_ns = false;
  const char* uid_map = nullptr;  // "UID UID 1\n" for the user namespace
  const char* gid_map = nullptr;

  std::vector<const char*> hide_dirs, hide_files, writable;
  const char* shm_options = nullptr;  // tmpfs options for a fresh /dev/shm
  std::int32_t disabled = 0;          // feature bits not to use ($CONVLAB_SANDBOX_DISABLE)
  const char* shmall = nullptr;       // the run's IPC namespace: kernel.shmall (pages)

  // The private directory as a tmpfs: its inputs (top-level names) are bound back into it.
  const char* private_dir = nullptr;
  const char* tmp_options = nullptr;  // nullptr: no tmpfs (keep_private_dir)
  std::vector<const char*> input_names;

  // The allow-list view: a tmpfs mounted on view_root becomes the root.
  bool view = false;
  const char* view_root = nullptr;
  const char* view_private = nullptr;  // the private directory inside the new root
  std::vector<const char*> view_dirs;  // folders made in the new root, parents first
  std::vector<ViewMount> view_mounts;  // in order (parents first)

  const char* cgroup_procs = nullptr;  // the run's cgroup.procs (the supervisor joins it)
  bool set_as = false;
  rlim_t as = 0;
  int extra[8] = {-1, -1, -1, -1, -1, -1, -1, -1};
  int n_extra = 0;

  bool drop = false;
  uid_t uid = 0;
  gid_t gid = 0;
  bool set_cpu = false, set_nproc = false, set_fsize = false;
  rlim_t cpu_soft = 0, cpu_hard = 0, nproc = 0, fsize = 0;

  int devnull = -1, out_w = -1, err_w = -1, chan_w = -1, ctl_w = -1;
};

// ---- Async-signal-safe helpers (used after fork) ---------------------------------------------

void send_record(int fd, std::int32_t kind, std::int32_t a, std::int64_t b) {
  Record r;
  r.kind = kind;
  r.a = a;
  r.b = b;
  ssize_t n;
  do {
    n = write(fd, &r, sizeof r);
  } while (n < 0 && errno == EINTR);
}

[[noreturn]] void fail_step(int ctl, Step step) {
  send_record(ctl, kSetupError, errno, step);
  _exit(127);
}

// Closes every fd >= `from` except those in keep (small, unsorted).
void close_fds_except(int from, const int* keep, int n_keep) {
  int sorted[8];
  int n = 0;
  for (int i = 0; i < n_keep && n < 8; ++i) {
    if (keep[i] >= from) sorted[n++] = keep[i];
  }
  for (int i = 1; i < n; ++i) {  // insertion sort
    for (int j = i; j > 0 && sorted[j - 1] > sorted[j]; --j) std::swap(sorted[j - 1], sorted[j]);
  }
  int lo = from;
  for (int i = 0; i <= n; ++i) {
    const int hi = i < n ? sorted[i] - 1 : INT_MAX;
    if (hi >= lo) {
      if (syscall(SYS_close_range, static_cast<unsigned>(lo), static_cast<unsigned>(hi), 0u) != 0) {
        const int last = std::min(hi, 65535);  // close_range unavailable: close one by one
        for (int fd = lo; fd <= last; ++fd) close(fd);
      }
    }
    if (i < n) lo = sorted[i] + 1;
  }
}

void reset_signals() {
  struct sigaction sa;
  std::memset(&sa, 0, sizeof sa);
  sa.sa_handler = SIG_DFL;
  for (int s = 1; s < NSIG; ++s) {
    if (s != SIGKILL && s != SIGSTOP) sigaction(s, &sa, nullptr);
  }
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
}

bool write_file(const char* path, const char* text) {
  const int fd = open(path, O_WRONLY | O_CLOEXEC);
  if (fd < 0) return false;
  const auto len = static_cast<ssize_t>(std::strlen(text));
  const bool ok = write(fd, text, static_cast<std::size_t>(len)) == len;
  close(fd);
  return ok;
}

// mount_setattr(2) through syscall(): glibc's <sys/mount.h> and <linux/mount.h> clash.
struct MountAttr {
  std::uint64_t attr_set, attr_clr, propagation, userns_fd;
};
constexpr std::uint64_t kMountAttrReadOnly = 0x00000001;
constexpr unsigned kAtRecursive = 0x8000;

int set_mount_read_only(const char* path, bool read_only, bool recursive) {
#ifdef SYS_mount_setattr
  MountAttr attr{};
  (read_only ? attr.attr_set : attr.attr_clr) = kMountAttrReadOnly;
  return static_cast<int>(syscall(SYS_mount_setattr, AT_FDCWD, path, recursive ? kAtRecursive : 0u,
                                  &attr, sizeof attr));
#else
  (void)path, (void)read_only, (void)recursive;
  errno = ENOSYS;
  return -1;
#endif
}

// mkdir that accepts a folder already there.
bool make_dir(const char* path, mode_t mode) {
  return mkdir(path, mode) == 0 || errno == EEXIST;
}

bool bind(const char* source, const char* target, bool writable, bool recursive) {
  if (mount(source, target, nullptr, MS_BIND | (recursive ? MS_REC : 0), nullptr) != 0) {
    return false;
  }
  if (set_mount_read_only(target, !writable, recursive) == 0) return true;
  if (writable) return errno == ENOSYS;  // a fresh bind of a writable path stays writable
  // No mount_setattr: the old way, one mount at a time.
  return mount(nullptr, target, nullptr, MS_BIND | MS_REMOUNT | MS_RDONLY, nullptr) == 0;
}

// `path` (the private directory, or its place in the view) becomes a tmpfs of limited size,
// owned by the run's user, with the inputs bound back from `original` (an O_PATH fd of the
// folder the grader filled). Returns false when the tmpfs could not be mounted.
bool mount_private_tmpfs(const ChildPlan& p, const char* path, int original) {
  if (p.tmp_options == nullptr || original < 0) return false;
  if (mount("convlab-tmp", path, "tmpfs", MS_NOSUID | MS_NODEV, p.tmp_options) != 0) return false;
  char source[4200], target[4200];
  for (const char* name : p.input_names) {
    // /proc/self/fd/N/NAME: the input under the tmpfs, reached through the fd.
    int len = 0;
    for (const char* c = "/proc/self/fd/"; *c != '\0';) source[len++] = *c++;
    char digits[12];
    int n_digits = 0;
    for (int fd = original; n_digits == 0 || fd > 0; fd /= 10) digits[n_digits++] = '0' + fd % 10;
    while (n_digits > 0) source[len++] = digits[--n_digits];
    source[len++] = '/';
    for (const char* c = name; *c != '\0' && len < 4190;) source[len++] = *c++;
    source[len] = '\0';
    len = 0;
    for (const char* c = path; *c != '\0' && len < 4000;) target[len++] = *c++;
    target[len++] = '/';
    for (const char* c = name; *c != '\0' && len < 4190;) target[len++] = *c++;
    target[len] = '\0';
    struct stat st;
    if (stat(source, &st) != 0) continue;
    if (S_ISDIR(st.st_mode)) {
      make_dir(target, 0700);
    } else {
      const int fd = open(target, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
      if (fd >= 0) close(fd);
    }
    if (mount(source, target, nullptr, MS_BIND | MS_REC, nullptr) != 0) return false;
  }
  return true;
}

// The allow-list view: a tmpfs on view_root, made the root with only what the plan names.
// Returns false (the caller then stops: a half-made view must not run) on any failure.
bool setup_view(const ChildPlan& p, int original) {
  if (mount("convlab-root", p.view_root, "tmpfs", MS_NOSUID | MS_NODEV,
            "size=1m,nr_inodes=4096,mode=0755") != 0) {
    return false;
  }
  for (const char* dir : p.view_dirs) {
    if (!make_dir(dir, 0755)) return false;
  }
  for (const ViewMount& m : p.view_mounts) {
    switch (m.kind) {
      case ViewMount::symlink:
        if (::symlink(m.source, m.target) != 0 && errno != EEXIST) return false;
        break;
      case ViewMount::bind_dir:
        if (!make_dir(m.target, 0755) || !bind(m.source, m.target, m.writable, true)) return false;
        break;
      case ViewMount::bind_file:
      case ViewMount::hide_file: {
        const int fd = open(m.target, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
        if (fd >= 0) close(fd);
        if (!bind(m.kind == ViewMount::hide_file ? "/dev/null" : m.source, m.target, m.writable,
                  false)) {
          return false;
        }
        break;
      }
    }
  }
  if (!make_dir(p.view_private, 0700)) return false;
  if (mount_private_tmpfs(p, p.view_private, original) == false && p.tmp_options != nullptr) {
    return false;
  }
  if (p.tmp_options == nullptr) {
    char source[64] = "/proc/self/fd/";
    int len = 14;
    char digits[12];
    int n_digits = 0;
    for (int fd = original; n_digits == 0 || fd > 0; fd /= 10) digits[n_digits++] = '0' + fd % 10;
    while (n_digits > 0) source[len++] = digits[--n_digits];
    source[len] = '\0';
    if (!bind(source, p.view_private, true, true)) return false;
  }
  if (chdir(p.view_root) != 0) return false;
  // pivot_root(".", "."): the old root ends up under the new one, then is detached.
  if (syscall(SYS_pivot_root, ".", ".") != 0) return false;
  if (umount2(".", MNT_DETACH) != 0) return false;
  if (chdir("/") != 0) return false;
  set_mount_read_only("/", true, false);
  return true;
}

// In the supervisor, after unshare(CLONE_NEWNS). Returns feature bits (kMnt, kReadOnlyRoot,
// kTmpfs, kView); reports a fatal error (a path that must be writable cannot be made so, a
// view that cannot be made) through ctl.
std::int32_t setup_mounts(const ChildPlan& p, int ctl) {
  // Nothing done here may reach the grader's mount namespace.
  if (mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) return 0;
  std::int32_t bits = kMnt;
  for (const char* dir : p.hide_dirs) {
    if (mount("convlab-hidden", dir, "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC,
              "size=4k,mode=0555") != 0) {
      bits &= ~kMnt;
    }
  }
  for (const char* file : p.hide_files) {
    if (mount("/dev/null", file, nullptr, MS_BIND, nullptr) != 0) bits &= ~kMnt;
  }
  // The folder the grader filled, before anything is mounted over it.
  const int original =
      p.private_dir != nullptr ? open(p.private_dir, O_PATH | O_DIRECTORY | O_CLOEXEC) : -1;
  if (p.view) {
    // Half a view must not run: any failure ends the run before the command starts.
    if (!setup_view(p, original)) {
      send_record(ctl, kSetupError, errno, step_view);
      _exit(127);
    }
    bits |= kView | kReadOnlyRoot;
    if (p.tmp_options != nullptr) bits |= kTmpfs;
  } else {
    // Everything read-only, then the private directory, the working directory and the
    // writable paths bound back read-write.
    if (set_mount_read_only("/", true, true) == 0) {
      bits |= kReadOnlyRoot;
      for (const char* path : p.writable) {
        if (mount(path, path, nullptr, MS_BIND, nullptr) != 0 ||
            set_mount_read_only(path, false, false) != 0) {
          send_record(ctl, kSetupError, errno, step_writable);
          _exit(127);
        }
      }
    }
    if (mount_private_tmpfs(p, p.private_dir, original)) bits |= kTmpfs;
  }
  if (original >= 0) close(original);
  if (p.shm_options != nullptr) {
    mount("convlab-shm", "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, p.shm_options);
  }
  return bits;
}

// In the supervisor: the namespaces, each on its own so that one refused leaves the others.
std::int32_t setup_namespaces(const ChildPlan& p, int ctl) {
  std::int32_t bits = 0;
  if (!p.use_namespaces) return bits;
  if (p.try_user_ns && unshare(CLONE_NEWUSER) == 0) {
    // Map our own uid and gid only: the run keeps its identity and no privilege outside.
    if (write_file("/proc/self/uid_map", p.uid_map) &&
        (write_file("/proc/self/setgroups", "deny") || errno == ENOENT) &&
        write_file("/proc/self/gid_map", p.gid_map)) {
      bits |= kUser;
    }
  }
  if ((p.disabled & kNet) == 0 && unshare(CLONE_NEWNET) == 0) bits |= kNet;
  if ((p.disabled & kIpc) == 0 && unshare(CLONE_NEWIPC) == 0) {
    bits |= kIpc;
    // The namespace's own SysV limits (its sysctls; /proc/sys may be read-only: then the
    // defaults, and the memory limit and the namespace's end bound it).
    if (p.shmall != nullptr) write_file("/proc/sys/kernel/shmall", p.shmall);
  }
  if ((p.disabled & kMnt) == 0 && unshare(CLONE_NEWNS) == 0) bits |= setup_mounts(p, ctl);
  if ((p.disabled & kPid) == 0 && unshare(CLONE_NEWPID) == 0) bits |= kPid;
  return bits;
}

// The command, from fork to execve.
[[noreturn]] void exec_command(const ChildPlan& p) {
  setpgid(0, 0);
  // fds 0-3 are the run's; ctl moves above them and closes at execve (it is O_CLOEXEC).
  const int ctl = fcntl(p.ctl_w, F_DUPFD_CLOEXEC, 10);
  if (ctl < 0) _exit(127);
  const int sources[4] = {p.devnull, p.out_w, p.err_w, p.chan_w};
  int moved[4];
  for (int i = 0; i < 4; ++i) {
    moved[i] = fcntl(sources[i], F_DUPFD_CLOEXEC, 10);
    if (moved[i] < 0) fail_step(ctl, step_streams);
  }
  int moved_extra[8];
  for (int i = 0; i < p.n_extra; ++i) {
    moved_extra[i] = fcntl(p.extra[i], F_DUPFD_CLOEXEC, 20);
    if (moved_extra[i] < 0) fail_step(ctl, step_streams);
  }
  for (int i = 0; i < 4; ++i) {
    if (dup2(moved[i], i) < 0) fail_step(ctl, step_streams);
  }
  for (int i = 0; i < p.n_extra; ++i) {
    if (dup2(moved_extra[i], kFirstExtraFd + i) < 0) fail_step(ctl, step_streams);
  }
  const int keep[1] = {ctl};
  close_fds_except(kFirstExtraFd + p.n_extra, keep, 1);

  struct rlimit rl;
  rl.rlim_cur = rl.rlim_max = 0;
  if (setrlimit(RLIMIT_CORE, &rl) != 0) fail_step(ctl, step_rlimit);
  if (p.set_fsize) {
    rl.rlim_cur = rl.rlim_max = p.fsize;
    if (setrlimit(RLIMIT_FSIZE, &rl) != 0) fail_step(ctl, step_rlimit);
  }
  if (p.set_cpu) {
    // SIGXCPU at the soft limit, SIGKILL one second later if it is caught.
    rl.rlim_cur = p.cpu_soft;
    rl.rlim_max = p.cpu_hard;
    if (setrlimit(RLIMIT_CPU, &rl) != 0) fail_step(ctl, step_rlimit);
  }
  if (p.set_as) {
    rl.rlim_cur = rl.rlim_max = p.as;
    if (setrlimit(RLIMIT_AS, &rl) != 0) fail_step(ctl, step_rlimit);
  }
  if (p.set_nproc) {
    rl.rlim_cur = rl.rlim_max = p.nproc;
    if (setrlimit(RLIMIT_NPROC, &rl) != 0) fail_step(ctl, step_rlimit);
  }
  if (p.drop) {
    if (setgroups(1, &p.gid) != 0) fail_step(ctl, step_setgroups);
    if (setgid(p.gid) != 0) fail_step(ctl, step_setgid);
    if (setuid(p.uid) != 0) fail_step(ctl, step_setuid);
    if (getuid() != p.uid || geteuid() != p.uid) {
      errno = EPERM;
      fail_step(ctl, step_setuid);
    }
  }
  // No setuid binary may give privileges back; die with the supervisor (set after setuid,
  // which clears it).
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) fail_step(ctl, step_no_new_privs);
  prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
  // Entered as the run's user, so its permissions apply.
  if (chdir(p.workdir) != 0) fail_step(ctl, step_chdir);
  execve(p.exec_path, p.argv, p.envp);
  fail_step(ctl, step_exec);
}

pid_t checked_waitpid(pid_t pid, int* status) {
  pid_t r;
  do {
    r = waitpid(pid, status, 0);
  } while (r < 0 && errno == EINTR);
  return r;
}

// Zeroes this process's argument and environment strings (the range /proc/self/stat gives, fields
// 48 to 51), so that /proc/PID/cmdline and environ read empty. Async-signal-safe.
void blank_own_arguments() {
  const int fd = open("/proc/self/stat", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return;
  char buf[1024];
  const ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0) return;
  buf[n] = '\0';
  // Fields after "(comm)", which may hold spaces: the state is field 3.
  const char* c = nullptr;
  for (ssize_t i = 0; i < n; ++i) {
    if (buf[i] == ')') c = buf + i + 1;
  }
  if (c == nullptr) return;
  unsigned long field[52] = {};
  int at = 2;
  while (*c != '\0' && at < 51) {
    while (*c == ' ') ++c;
    ++at;
    unsigned long v = 0;
    while (*c >= '0' && *c <= '9') v = v * 10 + static_cast<unsigned long>(*c++ - '0');
    while (*c != ' ' && *c != '\0' && *c != '\n') ++c;
    field[at] = v;
  }
  if (at < 51) return;
  for (int f = 48; f <= 50; f += 2) {
    if (field[f] != 0 && field[f + 1] > field[f]) {
      std::memset(reinterpret_cast<void*>(field[f]), 0, field[f + 1] - field[f]);
    }
  }
}

// PID 1 of the run's namespace: the command's parent; when the command ends, it reports and
// exits, and the kernel kills every process left in the namespace.
[[noreturn]] void run_init(const ChildPlan& p, bool own_mounts) {
  prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
  // Init is a copy of the grader: nothing of it may show through /proc/1 (its arguments name
  // the model, the output and the submission).
  prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
  if (own_mounts) {
    // /proc of this namespace: the run sees its own processes, not the grader's, and (hidepid)
    // not those of other users, init included.
    const unsigned long flags = MS_NOSUID | MS_NODEV | MS_NOEXEC;
    if (mount("proc", "/proc", "proc", flags, "hidepid=2") != 0) {
      mount("proc", "/proc", "proc", flags, nullptr);
    }
  }
  blank_own_arguments();
  const pid_t cmd = fork();
  if (cmd < 0) {
    send_record(p.ctl_w, kSetupError, errno, step_fork);
    _exit(127);
  }
  if (cmd == 0) exec_command(p);
  for (int i = 0; i < p.n_extra; ++i) close(p.extra[i]);
  for (;;) {
    int status = 0;
    const pid_t r = waitpid(-1, &status, 0);
    if (r == cmd) {
      send_record(p.ctl_w, kStatus, status, 0);
      _exit(0);
    }
    if (r < 0 && errno != EINTR) _exit(1);
  }
}

// Parses the parent pid out of /proc/PID/stat ("pid (comm) S ppid ...").
pid_t parent_of(const char* pid_name) {
  char path[64] = "/proc/";
  std::size_t len = 6;
  for (const char* c = pid_name; *c != '\0' && len < 50; ++c) path[len++] = *c;
  std::memcpy(path + len, "/stat", 6);
  const int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  char buf[512];
  const ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0) return -1;
  buf[n] = '\0';
  const char* close_paren = nullptr;
  for (ssize_t i = 0; i < n; ++i) {
    if (buf[i] == ')') close_paren = buf + i;
  }
  if (close_paren == nullptr || close_paren + 4 >= buf + n) return -1;
  const char* c = close_paren + 4;  // ") S " then ppid
  pid_t ppid = 0;
  while (*c >= '0' && *c <= '9') ppid = ppid * 10 + (*c++ - '0');
  return ppid;
}

// Without a PID namespace: kills every child of this process (a subreaper inherits the
// orphans of the whole tree) until none is left.
void kill_all_children() {
  const pid_t self = getpid();
  for (;;) {
    const int dir = open("/proc", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dir >= 0) {
      alignas(8) char buf[8192];
      long n;
      while ((n = syscall(SYS_getdents64, dir, buf, sizeof buf)) > 0) {
        for (long off = 0; off < n;) {
          // struct linux_dirent64: ino (8), off (8), reclen (2), type (1), name.
          unsigned short reclen;
          std::memcpy(&reclen, buf + off + 16, sizeof reclen);
          const char* name = buf + off + 19;
          if (name[0] >= '1' && name[0] <= '9' && parent_of(name) == self) {
            pid_t pid = 0;
            for (const char* c = name; *c >= '0' && *c <= '9'; ++c) pid = pid * 10 + (*c - '0');
            kill(pid, SIGKILL);
          }
          off += reclen;
        }
      }
      close(dir);
    }
    int status;
    const pid_t r = waitpid(-1, &status, WNOHANG);
    if (r < 0 && errno == ECHILD) return;
    if (r == 0) {
      const struct timespec pause = {0, 2'000'000};
      nanosleep(&pause, nullptr);
    }
  }
}

[[noreturn]] void supervise(const ChildPlan& p) {
  reset_signals();
  prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
  if (getppid() != p.grader_pid) _exit(1);
  setsid();
  int keep[16] = {p.devnull, p.out_w, p.err_w, p.chan_w, p.ctl_w};
  for (int i = 0; i < p.n_extra; ++i) keep[5 + i] = p.extra[i];
  close_fds_except(3, keep, 5 + p.n_extra);
  // The run's cgroup, before any child: every process of the run is in it.
  if (p.cgroup_procs != nullptr && !write_file(p.cgroup_procs, "0")) {
    send_record(p.ctl_w, kSetupError, errno, step_cgroup);
    _exit(127);
  }

  const std::int32_t bits = setup_namespaces(p, p.ctl_w);
  // Not dumpable (only now: writing our uid_map needed it): the run cannot open our
  // /proc/PID/fd (the control pipe) or ptrace us, even as our user.
  prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
  send_record(p.ctl_w, kFeatures, bits, 0);
  if (!p.run_command) _exit(0);

  if ((bits & kPid) != 0) {
    const pid_t init = fork();
    if (init < 0) {
      send_record(p.ctl_w, kSetupError, errno, step_fork);
      _exit(127);
    }
    if (init == 0) run_init(p, (bits & kMnt) != 0);
    for (int i = 0; i < p.n_extra; ++i) close(p.extra[i]);
    send_record(p.ctl_w, kPids, 0, init);
    int status = 0;
    checked_waitpid(init, &status);
    // init reports the command's status and exits 0; anything else means init itself was
    // killed (by the grader at a limit, or the kernel), and that is the run's end.
    if (!(WIFEXITED(status) && WEXITSTATUS(status) == 0)) {
      send_record(p.ctl_w, kStatus, status, 0);
    }
    _exit(0);
  }

  prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
  const pid_t cmd = fork();
  if (cmd < 0) {
    send_record(p.ctl_w, kSetupError, errno, step_fork);
    _exit(127);
  }
  if (cmd == 0) exec_command(p);
  for (int i = 0; i < p.n_extra; ++i) close(p.extra[i]);
  send_record(p.ctl_w, kPids, cmd, 0);
  int status = 0;
  checked_waitpid(cmd, &status);
  send_record(p.ctl_w, kStatus, status, 0);
  kill(-cmd, SIGKILL);
  kill_all_children();
  _exit(0);
}

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

// ---- cgroup v2 ----------------------------------------------------------------------------

bool write_text(const fs::path& path, const std::string& text) {
  std::ofstream out(path);
  out << text;
  out.flush();
  return static_cast<bool>(out);
}

// The grader's own cgroup v2 folder, where child cgroups with the memory and pids controllers
// can be made; empty where they cannot (no cgroup2 mount, cgroup v1, no permission, or the
// controllers cannot be enabled below a cgroup that holds processes).
fs::path usable_cgroup_parent() {
  static std::once_flag once;
  static fs::path found;
  std::call_once(once, [] {
    fs::path mount_point;
    std::ifstream mountinfo("/proc/self/mountinfo");
    for (std::string line; std::getline(mountinfo, line);) {
      // "... MOUNT_POINT OPTIONS ... - FSTYPE SOURCE ..."
      const auto dash = line.find(" - ");
      if (dash == std::string::npos || line.compare(dash + 3, 8, "cgroup2 ") != 0) continue;
      std::istringstream fields(line.substr(0, dash));
      std::string f;
      for (int i = 0; i < 5 && fields >> f; ++i) {
        if (i == 4) mount_point = f;
      }
      break;
    }
    if (mount_point.empty()) return;
    std::string own;
    std::ifstream cgroup("/proc/self/cgroup");
    for (std::string line; std::getline(cgroup, line);) {
      if (line.rfind("0::", 0) == 0) own = line.substr(3);
    }
    if (own.empty()) return;
    const fs::path parent = mount_point / fs::path(own).relative_path();
    const fs::path probe = parent / ("convlab-probe-" + std::to_string(getpid()));
    if (mkdir(probe.c_str(), 0755) != 0) return;
    std::error_code ec;
    if (!fs::exists(probe / "memory.max", ec)) {
      write_text(parent / "cgroup.subtree_control", "+memory +pids");
    }
    const bool usable = fs::exists(probe / "memory.max", ec) && access(probe.c_str(), W_OK) == 0;
    rmdir(probe.c_str());
    if (usable) found = parent;
  });
  return found;
}

// One run's cgroup: made before the run, emptied and removed after.
struct RunCgroup {
  fs::path dir;
  ~RunCgroup() {
    if (dir.empty()) return;
    write_text(dir / "cgroup.kill", "1");
    for (int i = 0; i < 500 && rmdir(dir.c_str()) != 0 && errno == EBUSY; ++i) {
      // Processes still leaving (killed above, or by the PID namespace's end).
      const struct timespec pause = {0, 2'000'000};
      nanosleep(&pause, nullptr);
    }
  }
  // Whether the kernel killed a process of the run for passing memory.max.
  bool oom_killed() const {
    std::istringstream in(try_read_file(dir / "memory.events").value_or(""));
    std::string key;
    std::uint64_t value = 0;
    while (in >> key >> value) {
      if (key == "oom_kill" && value > 0) return true;
    }
    return false;
  }
};

// ---- Polling the run's memory -------------------------------------------------------------

struct MemoryUse {
  std::uint64_t resident = 0;    // bytes, every process of the run
  std::uint64_t largest_vm = 0;  // bytes, the largest address space of one process
};

// Every descendant of `root` but `root` and `skip` (the supervisor and init are forks of the
// grader: their pages are the grader's): their memory summed (each one's proportional set
// size, so that pages several processes share count once). The supervisor is a
// subreaper or the PID namespace's init reaps, so every process of the run stays below it.
MemoryUse run_memory(pid_t root, pid_t skip) {
  std::map<pid_t, std::vector<pid_t>> children;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator("/proc", ec)) {
    const std::string name = entry.path().filename().string();
    if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
    const pid_t ppid = parent_of(name.c_str());
    if (ppid > 0) children[ppid].push_back(static_cast<pid_t>(std::stol(name)));
  }
  MemoryUse use;
  std::vector<pid_t> todo = {root};
  const long page = sysconf(_SC_PAGESIZE);
  while (!todo.empty()) {
    const pid_t pid = todo.back();
    todo.pop_back();
    if (const auto it = children.find(pid); it != children.end()) {
      todo.insert(todo.end(), it->second.begin(), it->second.end());
    }
    if (pid == root || pid == skip) continue;
    const std::string dir = "/proc/" + std::to_string(pid);
    std::ifstream statm(dir + "/statm");
    std::uint64_t size = 0, resident = 0;
    if (!(statm >> size >> resident)) continue;
    use.largest_vm = std::max(use.largest_vm, size * static_cast<std::uint64_t>(page));
    // The proportional share: pages a fork bomb's processes share count once, not per process.
    std::uint64_t pss_kib = 0;
    bool have_pss = false;
    std::ifstream rollup(dir + "/smaps_rollup");
    for (std::string line; std::getline(rollup, line);) {
      if (line.rfind("Pss:", 0) == 0) {
        pss_kib = std::strtoull(line.c_str() + 4, nullptr, 10);
        have_pss = true;
        break;
      }
    }
    use.resident += have_pss ? pss_kib * 1024 : resident * static_cast<std::uint64_t>(page);
  }
  return use;
}

// Whether an ended run's output says an allocation failed (what RLIMIT_AS causes).
bool says_out_of_memory(const std::string& text) {
  for (const char* what : {"std::bad_alloc", "Cannot allocate memory", "out of memory",
                           "virtual memory exhausted", "cudaErrorMemoryAllocation"}) {
    if (text.find(what) != std::string::npos) return true;
  }
  return false;
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

// The memory limit: a cgroup where the grader can make one, else RLIMIT_AS (not for GPU runs)
// and polling; the polling always runs as well (cheap, and it names the outcome).
struct MemoryLimit {
  RunCgroup cgroup;  // removed, its processes killed, when the run is over
  std::string cgroup_procs;
  MemoryLimitKind kind = MemoryLimitKind::none;
};

void set_up_memory_limit(const SandboxSpec& spec, MemoryLimit& m) {
  const Limits& limits = spec.limits;
  if (limits.max_memory_bytes == 0) return;
  static std::atomic<std::uint32_t> cgroup_runs{0};
  const fs::path parent = usable_cgroup_parent();
  if (!parent.empty()) {
    const fs::path dir = parent / ("convlab-run-" + std::to_string(getpid()) + "-" +
                                   std::to_string(cgroup_runs.fetch_add(1)));
    if (mkdir(dir.c_str(), 0755) == 0) {
      m.cgroup.dir = dir;
      const bool ok = write_text(dir / "memory.max", std::to_string(limits.max_memory_bytes));
      write_text(dir / "memory.swap.max", "0");  // absent without swap accounting
      if (limits.max_processes > 0) {
        write_text(dir / "pids.max", std::to_string(std::max(limits.max_processes, 16) + 8));
      }
      if (ok) {
        m.kind = MemoryLimitKind::cgroup;
        m.cgroup_procs = (dir / "cgroup.procs").string();
      }
    }
  }
  if (m.kind == MemoryLimitKind::none) {
    m.kind = spec.uses_gpu ? MemoryLimitKind::rss_poll : MemoryLimitKind::address_space;
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
