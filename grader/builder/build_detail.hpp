/// @file
/// @brief The pieces of build_submission(): the pristine copy, the cached framework build, the
/// checks on the team's sources, headers and symbols, and the trimmed compiler log. Declared
/// here so that the tests can exercise each one on its own.
#pragma once

#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "grader/builder/build_submission.hpp"
#include "grader/sandbox/sandbox.hpp"

namespace convlab::grader::build_detail {

// ---- The pristine copy --------------------------------------------------------------------------

/// Whether `rel` (a path relative to the framework root, '/'-separated) belongs to the copy a
/// submission is built in: the top-level CMakeLists.txt and cmake/, reference/ (without
/// reference/solutions/), student/, datasets/, grader/ and milestones/; never .git/.
bool in_pristine_copy(std::string_view rel);

/// Whether `rel` is a framework file a team may hand in unchanged (its whole checkout): any
/// file of the tree except the staff solutions, .git/ and the top-level build folders.
bool is_framework_file(std::string_view rel);

/// The regular files of the pristine copy, relative and sorted.
std::vector<std::string> pristine_files(const std::filesystem::path& framework_root);

/// Copies the pristine files into `dest` (created). The top-level CMakeLists.txt may add docs/
/// unconditionally; then an empty docs/CMakeLists.txt stands in for the documentation.
void copy_pristine(const std::filesystem::path& framework_root, const std::filesystem::path& dest);

/// Reads a regular file without following a symbolic link; nullopt when it cannot (or it is
/// larger than `max_bytes`).
std::optional<std::string> read_regular_file(const std::filesystem::path& path,
                                             std::size_t max_bytes);

// ---- Running the build tools --------------------------------------------------------------------

/// The environment every build tool runs with: the grader's PATH and compiler variables (CC,
/// CXX, CUDACXX, CUDAToolkit_ROOT, CUDNN_ROOT...), LC_ALL=C (diagnostics in English), and HOME
/// and TMPDIR set to `home`.
std::map<std::string, std::string> tool_environment(const std::filesystem::path& home);

/// How a step of a team's build runs: as an unprivileged user (one id for every step of the
/// build, so that they share the build folder), with a memory limit, in the sandbox's
/// allow-list view that shows the system folders, the build folder and `visible` only.
struct TeamBuild {
  std::vector<std::filesystem::path> visible;  ///< the framework's cache entry, the toolkits
  std::uint32_t uid = 0;                       ///< sandbox_uid(the work folder)
  std::uint64_t max_memory_bytes = 4ull << 30;
};

/// Folders a team's build must read besides the system folders: the cached framework entry,
/// the compilers' include folders, and the toolkits the grader's environment names (CC, CXX,
/// CUDACXX, CUDAToolkit_ROOT, CUDA_PATH, CUDA_HOME, CUDNN_ROOT, CMAKE_PREFIX_PATH) outside
/// /usr.
std::vector<std::filesystem::path> team_build_visible_paths(
    const std::filesystem::path& framework_entry,
    const std::vector<std::filesystem::path>& include_dirs);

/// Makes `dir` (recursively) owned by the user a team build runs as, so that it can write
/// there; nothing when the grader is not root (the build then runs as the grader's user).
void give_to_build_user(const std::filesystem::path& dir, std::uint32_t uid);

/// Runs a build tool (cmake, ninja, nm) in the sandbox with `writable` the only folder it may
/// write to; its stdout and stderr are joined in the result's stdout_text. Without `team` it is
/// the framework's own build (trusted: no team file) and keeps the grader's user; with it, see
/// TeamBuild.
SandboxResult run_tool(const std::vector<std::string>& argv, const std::filesystem::path& workdir,
                       const std::filesystem::path& writable, double wall_s,
                       const std::vector<std::filesystem::path>& hide_paths = {},
                       const TeamBuild* team = nullptr);

// ---- The cached framework -----------------------------------------------------------------------

/// A framework build in the cache: cache_dir/<key>/{src,build}, plus the facts the checks
/// need, computed once when it was built.
struct Framework {
  std::string key;
  std::filesystem::path dir;    ///< cache_dir/<key>
  std::filesystem::path src;    ///< its pristine copy
  std::filesystem::path build;  ///< its build folder (settings, targets, archives)
  /// grader/builder/project configured once with the stubs: its compiler checks seed each
  /// submission's configure (CMakeFiles/<version>/), which then skips them.
  std::filesystem::path project_template;
  bool reused = false;
  double build_s = 0.0;
  /// Folders whose headers any code may include: the compilers' own and the CUDA toolkit's.
  std::vector<std::filesystem::path> system_include_dirs;
  /// Global symbols the framework's libraries define (mangled) -> true when strong.
  std::map<std::string, bool> framework_symbols;
  /// Symbols the libraries a program links define (libc, libstdc++, the CUDA runtime...) ->
  /// the library's file name.
  std::map<std::string, std::string> library_symbols;
  /// Symbols of the library convolutions (reference/conv/library_conv_cpu.cpp, cudnn_conv.cu).
  std::set<std::string> library_conv_symbols;
};

/// The cache key: a hash of the framework sources that go into the cached build, the
/// compilers' and CMake's versions, the settings, and this machine's CPU and GPU (the build is
/// tuned for them).
std::string framework_key(const BuildRequest& request);

/// Finds the framework build for `request` (absolute paths) in its cache or builds it, holding
/// an exclusive lock on cache_dir/<key>.lock meanwhile (other graders wait). nullopt when the
/// build failed; `log` then holds why.
std::optional<Framework> ensure_framework(const BuildRequest& request,
                                          const BuildProgressFn& progress, std::string* log);

// ---- Checks on the team's files -----------------------------------------------------------------

/// Scans one source file's text (its `#include` lines after line splicing and comments, as the
/// preprocessor sees them) for an include by absolute path or with a `..` component, a computed
/// include (a macro instead of a file name) and `.incbin`; returns one line per finding:
/// "student/m2/conv_cpu.cpp:3: includes /etc/passwd (...)".
std::vector<std::string> scan_source(std::string_view text, const std::string& display_name);

/// Checks the headers each team object read (`ninja -t deps` output, `deps_text`): every one
/// must lie in `src` or in one of `system_dirs`. `object_to_source` maps an object's path (as
/// Ninja names it) to the team file it came from; objects not in it are not checked.
std::vector<std::string> check_dependencies(
    std::string_view deps_text, const std::filesystem::path& build_dir,
    const std::filesystem::path& src, const std::vector<std::filesystem::path>& system_dirs,
    const std::map<std::string, std::string>& object_to_source);

/// Paths the compiler output names as a source location ("In file included from /x/y.h:3",
/// "/x/y.cpp:3:4: error") that lie neither in `src` nor in `system_dirs`: a failed compile
/// has no dependency list, and its log would show the content of such a file.
std::vector<std::string> foreign_paths_in_log(
    std::string_view log, const std::filesystem::path& src,
    const std::vector<std::filesystem::path>& system_dirs);

/// One symbol of `nm -P` output.
struct NmSymbol {
  std::string name;  ///< mangled
  char type = '?';   ///< nm's letter
};
/// Parses `nm -P` output (archive member headers are skipped).
std::vector<NmSymbol> parse_nm(std::string_view output);
/// The demangled name (the name itself when it is not a mangled C++ name).
std::string demangle(const std::string& name);
/// Whether nm's letter is an undefined reference (U, w, v).
bool is_undefined(char type);
/// Whether nm's letter is a global definition; `strong` tells a weak one (W, V, u) apart.
bool is_global_definition(char type, bool* strong);

/// The symbol rules for one team object (`file`: its path relative to the framework root).
/// References: cuDNN, cuBLAS, cuFFT and the other math libraries, the library convolutions, the
/// staff solutions, run-time loading (dlopen...). Definitions outside convlab::student: none the
/// framework, the harness or a linked library also defines. One line per refusal.
std::vector<std::string> check_symbols(const std::string& file,
                                       const std::vector<NmSymbol>& symbols,
                                       const Framework& framework,
                                       const std::map<std::string, bool>& harness_symbols);

// ---- The log a team reads -----------------------------------------------------------------------

/// The compiler's and linker's messages from a build's output, without Ninja's progress and
/// command lines, with each (from, to) of `replace` applied (absolute folders shown relative to
/// the framework root), from the first error on, at most `max_lines` lines.
std::string trim_build_log(std::string_view output,
                           const std::vector<std::pair<std::string, std::string>>& replace,
                           std::size_t max_lines = 60);

}  // namespace convlab::grader::build_detail
