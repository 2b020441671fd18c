/// @file
/// @brief The sandbox's children (supervisor, init, the command up to execve) and what the
/// grader prepares for them before fork(): the plan they only read and the records they send
/// back on the control pipe. After fork() they make only async-signal-safe system calls.
#pragma once

#include <sys/resource.h>
#include <sys/types.h>

#include <cstdint>
#include <vector>

namespace convlab::grader::sandbox_child {

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

/// waitpid() again while a signal interrupts it.
pid_t checked_waitpid(pid_t pid, int* status);

/// The parent pid of the process named `pid_name` (decimal), from /proc/PID/stat; -1 when
/// it cannot be read. Async-signal-safe.
pid_t parent_of(const char* pid_name);

/// The supervisor: runs the plan (namespaces, mounts, limits, the command) and reports on
/// p.ctl_w; never returns.
[[noreturn]] void supervise(const ChildPlan& p);

}  // namespace convlab::grader::sandbox_child
