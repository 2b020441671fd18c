/// @file
/// @brief The sandbox's memory limit: a cgroup v2 of its own where the grader can make one,
/// else RLIMIT_AS (not for GPU runs); the polling of the run's memory that always runs as well
/// (cheap, and it names the outcome).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <filesystem>
#include <string>

#include "grader/sandbox/sandbox.hpp"

namespace convlab::grader::sandbox_memory {

/// Writes `text` to `path` (a cgroup control file); whether it worked.
bool write_text(const std::filesystem::path& path, const std::string& text);

/// The grader's own cgroup v2 folder, where child cgroups with the memory and pids controllers
/// can be made; empty where they cannot (no cgroup2 mount, cgroup v1, no permission, or the
/// controllers cannot be enabled below a cgroup that holds processes).
std::filesystem::path usable_cgroup_parent();

/// One run's cgroup: made before the run, emptied and removed after.
struct RunCgroup {
  std::filesystem::path dir;
  RunCgroup() = default;
  RunCgroup(const RunCgroup&) = delete;
  RunCgroup& operator=(const RunCgroup&) = delete;
  ~RunCgroup();
  /// Whether the kernel killed a process of the run for passing memory.max.
  bool oom_killed() const;
};

struct MemoryUse {
  std::uint64_t resident = 0;    ///< bytes, every process of the run
  std::uint64_t largest_vm = 0;  ///< bytes, the largest address space of one process
};

/// Every descendant of `root` but `root` and `skip` (the supervisor and init are forks of the
/// grader: their pages are the grader's): their memory summed (each one's proportional set
/// size, so that pages several processes share count once).
MemoryUse run_memory(pid_t root, pid_t skip);

/// Whether an ended run's output says an allocation failed (what RLIMIT_AS causes).
bool says_out_of_memory(const std::string& text);

/// The run's memory limit, as set up by set_up_memory_limit().
struct MemoryLimit {
  RunCgroup cgroup;  ///< removed, its processes killed, when the run is over
  std::string cgroup_procs;
  MemoryLimitKind kind = MemoryLimitKind::none;
};

/// Chooses and prepares the limit of `spec` (nothing when it sets none).
void set_up_memory_limit(const SandboxSpec& spec, MemoryLimit& m);

}  // namespace convlab::grader::sandbox_memory
