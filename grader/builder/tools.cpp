// Running the build tools (cmake, ninja, nvcc, nm) in the sandbox.
#include <algorithm>
#include <pwd.h>
#include <unistd.h>

#include <cstdlib>
#include <sstream>
#include <vector>

#include "grader/builder/build_detail.hpp"
#include "reference/core/error.hpp"

namespace convlab::grader::build_detail {
namespace fs = std::filesystem;

namespace {

// The toolkit variables a build reads (compilers, CUDA, cuDNN); PATH is added apart.
constexpr const char* kToolVariables[] = {
    "CC",          "CXX",       "CUDACXX",    "CUDAHOSTCXX",       "CUDAToolkit_ROOT",
    "CUDA_PATH",   "CUDA_HOME", "CUDNN_ROOT", "CMAKE_PREFIX_PATH", "LD_LIBRARY_PATH",
    "LIBRARY_PATH"};

bool under(const fs::path& path, const fs::path& dir) {
  const auto [d, p] = std::mismatch(dir.begin(), dir.end(), path.begin(), path.end());
  return d == dir.end();
}

// Where ccache keeps its objects for the grader's user, as ccache itself resolves it without a
// configuration file: CCACHE_DIR, else $XDG_CACHE_HOME/ccache, else ~/.cache/ccache.
fs::path ccache_dir() {
  if (const char* dir = std::getenv("CCACHE_DIR"); dir != nullptr && *dir != '\0') return dir;
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg != nullptr && *xdg == '/') {
    return fs::path(xdg) / "ccache";
  }
  if (const char* home = std::getenv("HOME"); home != nullptr && *home == '/') {
    return fs::path(home) / ".cache" / "ccache";
  }
  return {};
}

}  // namespace

std::map<std::string, std::string> tool_environment(const fs::path& home) {
  std::map<std::string, std::string> env;
  // The grader's choice of tools and toolkits; nothing else of its environment.
  if (const char* value = std::getenv("PATH")) env.emplace("PATH", value);
  for (const char* name : kToolVariables) {
    if (const char* value = std::getenv(name)) env.emplace(name, value);
  }
  // Built by emplace, not assigned: GCC 12 warns wrongly (-Wrestrict) on assigning literals.
  env.emplace("PATH", "/usr/local/bin:/usr/bin:/bin");  // when the grader has none
  env.emplace("LC_ALL", "C");
  if (!home.empty()) {
    env.emplace("HOME", home.string());
    env.emplace("TMPDIR", home.string());
  }
  return env;
}

std::vector<fs::path> team_build_visible_paths(const fs::path& framework_entry,
                                               const std::vector<fs::path>& include_dirs) {
  std::vector<fs::path> out = {framework_entry};
  // Under /usr they are visible already; /opt/cuda, a toolkit in /usr/local/cuda-12.4 reached
  // through a link, a compiler in /opt/gcc...: each folder itself.
  const auto add_one = [&](fs::path real) {
    std::error_code ec;
    if (!fs::is_directory(real, ec)) real = real.parent_path().parent_path();  // .../bin/nvcc
    if (under(real, "/usr") || real == "/" || real.parent_path() == "/") return;
    if (std::find(out.begin(), out.end(), real) == out.end()) out.push_back(real);
  };
  const auto add = [&](fs::path p) {
    std::error_code ec;
    if (p.empty() || !p.is_absolute()) return;
    const fs::path real = fs::canonical(p, ec);
    if (ec) return;
    add_one(real);
    // A program reached through a link (a Python environment's bin/cmake, an alternatives
    // link) needs the prefix it is called from too.
    if (real != p && !fs::is_directory(real, ec)) add_one(p);
  };
  for (const fs::path& dir : include_dirs) add(dir);
  // The build's own programs wherever they are installed (cmake and ninja from a Python
  // environment in /opt, say): their install prefix, with its modules and data.
  if (const char* path = std::getenv("PATH")) {
    std::istringstream dirs(path);
    for (std::string dir; std::getline(dirs, dir, ':');) {
      for (const char* tool : {"cmake", "ninja", "nm", "c++", "g++", "gcc", "nvcc"}) {
        std::error_code ec;
        const fs::path candidate = fs::path(dir) / tool;
        if (!dir.empty() && fs::is_regular_file(candidate, ec)) add(candidate);
      }
    }
  }
  for (const char* name : kToolVariables) {
    const char* value = std::getenv(name);
    if (value == nullptr) continue;
    std::istringstream parts(value);
    for (std::string part; std::getline(parts, part, ':');) add(part);
  }
  return out;
}

void give_to_build_user(const fs::path& dir, std::uint32_t uid) {
  if (geteuid() != 0) return;
  // The build user's group: nobody's, as the sandbox gives it (it owns nothing of the grader's).
  struct passwd pw;
  struct passwd* found = nullptr;
  std::vector<char> buf(16384);
  if (getpwnam_r("nobody", &pw, buf.data(), buf.size(), &found) != 0 || found == nullptr) {
    throw Error("no user 'nobody' on this machine: create it, the build runs as that user");
  }
  const gid_t gid = pw.pw_gid;
  const auto give = [&](const fs::path& p) {
    if (lchown(p.c_str(), uid, gid) != 0) {
      throw Error("cannot give " + p.string() + " to the build user: " +
                  std::error_code(errno, std::generic_category()).message());
    }
  };
  give(dir);
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(dir, ec); !ec && it != fs::end(it);
       it.increment(ec)) {
    give(it->path());
  }
  if (ec) throw Error("cannot list " + dir.string() + ": " + ec.message());
}

SandboxResult run_tool(const std::vector<std::string>& argv, const fs::path& workdir,
                       const fs::path& writable, double wall_s,
                       const std::vector<fs::path>& hide_paths, const TeamBuild* team) {
  SandboxSpec spec;
  // A shell joins stderr to stdout, so that messages keep their order in the log.
  spec.argv = {"/bin/sh", "-c", "exec \"$@\" 2>&1", "sh"};
  spec.argv.insert(spec.argv.end(), argv.begin(), argv.end());
  const fs::path parent = writable / "tmp";
  std::error_code ec;
  fs::create_directories(parent, ec);
  // HOME and TMPDIR: the run's private directory, a tmpfs of limited size (nvcc's temporary
  // files go there).
  spec.env = tool_environment({});
  spec.workdir = workdir;
  spec.writable_paths = {writable};
  spec.hide_paths = hide_paths;
  spec.private_parent = parent;
  spec.limits.wall_s = wall_s;
  spec.limits.cpu_s = wall_s + 1.0;  // per process
  spec.limits.max_processes = 0;
  spec.limits.max_file_bytes = 2ull << 30;
  spec.limits.max_output_bytes = 4u << 20;
  spec.limits.tmp_bytes = 2ull << 30;
  spec.limits.tmp_inodes = 100000;
  if (team == nullptr) {
    // The framework's own build runs no team file: the grader's user, the whole file system
    // read-only but `writable`, and no memory limit beyond the machine's. It compiles through
    // the grader's ccache (when the framework's CMake code found ccache): a new framework
    // version recompiles only the files that changed.
    spec.drop_privileges = false;
    spec.limits.max_memory_bytes = 0;
    // ccache hashes the locale variables (they change diagnostics): the grader's own, as a
    // build of the checkout has them, so that the two share objects.
    spec.env.erase("LC_ALL");
    for (const char* name : {"LANG", "LC_ALL", "LC_CTYPE", "LC_MESSAGES"}) {
      if (const char* value = std::getenv(name)) spec.env[name] = value;
    }
    const fs::path cache = ccache_dir();
    std::error_code made;
    if (!cache.empty() && (fs::create_directories(cache, made), !made) &&
        access(cache.c_str(), W_OK) == 0) {
      spec.env["CCACHE_DIR"] = cache.string();
      spec.writable_paths.push_back(cache);
    } else {
      spec.env["CCACHE_DISABLE"] = "1";
    }
  } else {
    // Never a cache shared with the grader or another team: a team's compile could plant an
    // object that another build then takes as its own.
    spec.env["CCACHE_DISABLE"] = "1";
    // The team's sources reach the compiler and assembler (`.incbin`, constexpr evaluation):
    // an unprivileged user who sees only the build tree, the framework's cache entry and the
    // system and toolkit folders, within a memory limit.
    // Without a mount namespace there is no view, and the build user could not reach the
    // framework's cache (under the grader's home): the grader's user then, as recorded in the
    // features (a degraded grade).
    spec.drop_privileges = probe_sandbox_features().mount_namespace;
    spec.uid = team->uid;
    spec.visible_paths = team->visible;
    spec.limits.max_memory_bytes = team->max_memory_bytes;
  }
  return run_sandboxed(spec);
}

}  // namespace convlab::grader::build_detail
