// Running the build tools (cmake, ninja, nm) in the sandbox.
#include <cstdlib>

#include "grader/build/build_detail.hpp"

namespace convlab::grader::build_detail {
namespace fs = std::filesystem;

std::map<std::string, std::string> tool_environment(const fs::path& home) {
  std::map<std::string, std::string> env;
  // The grader's choice of tools and toolkits; nothing else of its environment.
  for (const char* name :
       {"PATH", "CC", "CXX", "CUDACXX", "CUDAHOSTCXX", "CUDAToolkit_ROOT", "CUDA_PATH", "CUDA_HOME",
        "CUDNN_ROOT", "CMAKE_PREFIX_PATH", "LD_LIBRARY_PATH", "LIBRARY_PATH"}) {
    if (const char* value = std::getenv(name)) env.emplace(name, value);
  }
  // Built by emplace, not assigned: GCC 12 warns wrongly (-Wrestrict) on assigning literals.
  env.emplace("PATH", "/usr/local/bin:/usr/bin:/bin");  // when the grader has none
  env.emplace("LC_ALL", "C");
  env.emplace("HOME", home.string());
  env.emplace("TMPDIR", home.string());
  return env;
}

SandboxResult run_tool(const std::vector<std::string>& argv, const fs::path& workdir,
                       const fs::path& writable, double wall_s,
                       const std::vector<fs::path>& hide_paths) {
  SandboxSpec spec;
  // A shell joins stderr to stdout, so that messages keep their order in the log.
  spec.argv = {"/bin/sh", "-c", "exec \"$@\" 2>&1", "sh"};
  spec.argv.insert(spec.argv.end(), argv.begin(), argv.end());
  const fs::path home = writable / "tmp";
  std::error_code ec;
  fs::create_directories(home, ec);
  spec.env = tool_environment(home);
  spec.workdir = workdir;
  spec.writable_paths = {writable};
  spec.hide_paths = hide_paths;
  spec.private_parent = home;
  // Compilers run no code of the submission: they keep the grader's user, and the sandbox
  // keeps them from writing anywhere but `writable`.
  spec.drop_privileges = false;
  spec.limits.wall_s = wall_s;
  spec.limits.cpu_s = wall_s + 1.0;  // per process
  spec.limits.max_processes = 0;
  spec.limits.max_file_bytes = 2ull << 30;
  spec.limits.max_output_bytes = 4u << 20;
  return run_sandboxed(spec);
}

}  // namespace convlab::grader::build_detail
