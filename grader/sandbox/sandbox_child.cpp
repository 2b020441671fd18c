// The sandbox's children, after fork(): only async-signal-safe system calls, because the grader
// may be multithreaded and another thread may hold the allocator's lock (sandbox.cpp shows the
// process tree).
#include "grader/sandbox/sandbox_child.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <grp.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <csignal>
#include <cstring>
#include <ctime>

#include "grader/sandbox/sandbox.hpp"

namespace convlab::grader::sandbox_child {

namespace {

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
    // Not recursive: the view's own tmpfs is mounted on that folder, and a recursive bind
    // would carry it along, hiding the inputs.
    if (!bind(source, p.view_private, true, false)) return false;
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
  // A file copied into the run a moment ago can still be open for writing in a process that
  // another thread of the grader forked meanwhile (it closes every such descriptor first thing,
  // but may not have run yet): ETXTBSY is then passing. Up to two seconds of retries.
  for (int tries = 0; tries < 400; ++tries) {
    execve(p.exec_path, p.argv, p.envp);
    if (errno != ETXTBSY) break;
    const timespec pause{0, 5'000'000};
    nanosleep(&pause, nullptr);
  }
  fail_step(ctl, step_exec);
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

// Forks the command (exec_command in the child); closes the parent's copies of the fds passed
// to it. The command's pid.
pid_t fork_command(const ChildPlan& p) {
  const pid_t cmd = fork();
  if (cmd < 0) {
    send_record(p.ctl_w, kSetupError, errno, step_fork);
    _exit(127);
  }
  if (cmd == 0) exec_command(p);
  for (int i = 0; i < p.n_extra; ++i) close(p.extra[i]);
  return cmd;
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
  const pid_t cmd = fork_command(p);
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

}  // namespace

pid_t checked_waitpid(pid_t pid, int* status) {
  pid_t r;
  do {
    r = waitpid(pid, status, 0);
  } while (r < 0 && errno == EINTR);
  return r;
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
  const pid_t cmd = fork_command(p);
  send_record(p.ctl_w, kPids, cmd, 0);
  int status = 0;
  checked_waitpid(cmd, &status);
  send_record(p.ctl_w, kStatus, status, 0);
  kill(-cmd, SIGKILL);
  kill_all_children();
  _exit(0);
}

}  // namespace convlab::grader::sandbox_child
