#include "grader/sandbox/sandbox_memory.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>
#include <vector>

#include "grader/sandbox/sandbox_child.hpp"
#include "reference/core/files.hpp"

namespace convlab::grader::sandbox_memory {

namespace fs = std::filesystem;

bool write_text(const fs::path& path, const std::string& text) {
  std::ofstream out(path);
  out << text;
  out.flush();
  return static_cast<bool>(out);
}

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

RunCgroup::~RunCgroup() {
  if (dir.empty()) return;
  write_text(dir / "cgroup.kill", "1");
  for (int i = 0; i < 500 && rmdir(dir.c_str()) != 0 && errno == EBUSY; ++i) {
    // Processes still leaving (killed above, or by the PID namespace's end).
    const struct timespec pause = {0, 2'000'000};
    nanosleep(&pause, nullptr);
  }
}

bool RunCgroup::oom_killed() const {
  std::istringstream in(try_read_file(dir / "memory.events").value_or(""));
  std::string key;
  std::uint64_t value = 0;
  while (in >> key >> value) {
    if (key == "oom_kill" && value > 0) return true;
  }
  return false;
}

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
    const pid_t ppid = sandbox_child::parent_of(name.c_str());
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

bool says_out_of_memory(const std::string& text) {
  for (const char* what : {"std::bad_alloc", "Cannot allocate memory", "out of memory",
                           "virtual memory exhausted", "cudaErrorMemoryAllocation"}) {
    if (text.find(what) != std::string::npos) return true;
  }
  return false;
}

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

}  // namespace convlab::grader::sandbox_memory
