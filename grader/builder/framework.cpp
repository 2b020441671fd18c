// The framework built once per version into the cache, under an exclusive lock, and the facts
// about it that the checks of every submission need (its symbols, the libraries' symbols, the
// compilers' include folders).
#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <system_error>

#include "grader/builder/build_detail.hpp"
#include "reference/core/error.hpp"
#include "reference/core/stopwatch.hpp"

namespace convlab::grader::build_detail {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// Changes whenever what this file puts in a cache entry changes.
constexpr std::string_view kCacheFormat = "convlab-grader-framework 5";
constexpr std::string_view kExportScript = "grader/builder/framework/export.cmake";
constexpr std::string_view kProject = "grader/builder/project";
// The objects of the library convolutions (reference/conv/library_conv.hpp, cudnn_conv.hpp).
constexpr std::string_view kLibraryConvObjects[] = {"/library_conv_cpu.cpp.o", "/cudnn_conv.cu.o"};

// 64-bit FNV-1a: a stable hash, the same in every process and on every machine.
class Fnv {
 public:
  void add(std::string_view text) {
    for (const char c : text) {
      hash_ ^= static_cast<unsigned char>(c);
      hash_ *= 0x100000001b3ull;
    }
    // A separator, so that ("ab", "c") and ("a", "bc") differ.
    hash_ ^= 0xff;
    hash_ *= 0x100000001b3ull;
  }
  std::string hex() const {
    char text[17];
    std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(hash_));
    return text;
  }

 private:
  std::uint64_t hash_ = 0xcbf29ce484222325ull;
};

// Framework files whose content goes into the cached build. The team's files, the milestones,
// the models and the rest of the grader are read from each submission's own copy.
bool hashed(std::string_view rel) {
  if (!in_pristine_copy(rel)) return false;
  if (rel.starts_with("student/") || rel.starts_with("milestones/") ||
      rel.starts_with("datasets/models/")) {
    return false;
  }
  // The harness is compiled into the cache too, with the grader headers it may include;
  // grader/builder/ counts only through the script it injects (the harness never includes it).
  if (rel.starts_with("grader/")) {
    if (rel.starts_with("grader/builder/")) return rel == kExportScript;
    return rel.starts_with("grader/worker/") || rel.ends_with(".hpp") || rel.ends_with(".h");
  }
  return true;
}

std::vector<std::string> read_lines(const fs::path& path) {
  std::vector<std::string> lines;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) {
    if (!line.empty()) lines.push_back(line);
  }
  return lines;
}

std::string tail(const std::string& text, std::size_t max_bytes) {
  if (text.size() <= max_bytes) return text;
  const std::size_t cut = text.find('\n', text.size() - max_bytes);
  return "...\n" + text.substr(cut == std::string::npos ? text.size() - max_bytes : cut + 1);
}

// Holds an exclusive flock on a file while it lives.
class FileLock {
 public:
  FileLock(const fs::path& path, const BuildProgressFn& progress) {
    fd_ = open(path.c_str(), O_CREAT | O_RDWR | O_CLOEXEC, 0644);
    if (fd_ < 0) {
      throw Error("cannot open the cache lock " + path.string() + ": " +
                  std::error_code(errno, std::generic_category()).message() +
                  "; check that the cache folder is writable");
    }
    if (flock(fd_, LOCK_EX | LOCK_NB) == 0) return;
    if (progress) progress("waiting for another grader to finish building the framework");
    while (flock(fd_, LOCK_EX) != 0) {
      if (errno != EINTR) {
        close(fd_);
        throw Error("cannot lock " + path.string());
      }
    }
  }
  ~FileLock() { close(fd_); }
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;

 private:
  int fd_ = -1;
};

// `nm -P` over `files` (empty output for none).
std::string run_nm(const std::vector<std::string>& options, const std::vector<std::string>& files,
                   const fs::path& dir, std::string* error) {
  if (files.empty()) return {};
  std::vector<std::string> argv = {"nm", "-P"};
  argv.insert(argv.end(), options.begin(), options.end());
  argv.insert(argv.end(), files.begin(), files.end());
  const SandboxResult run = run_tool(argv, dir, dir, 600.0);
  if (run.outcome != Outcome::exited || run.exit_code != 0) {
    *error += "nm failed (" + run.describe() + "):\n" + tail(run.stdout_text, 4000) + "\n";
  }
  return run.stdout_text;
}

std::string strip_version(const std::string& name) {
  const std::size_t at = name.find('@');
  return at == std::string::npos ? name : name.substr(0, at);
}

// Collects what the checks need from the finished build into `fw`; "" or what went wrong.
std::string gather_facts(Framework& fw) {
  std::string error;
  // Every global symbol the framework's archives and the harness define.
  std::vector<std::string> files = read_lines(fw.build / "convlab-framework-archives.txt");
  for (const std::string& object : read_lines(fw.build / "convlab-framework-harness-objects.txt")) {
    files.push_back(object);
  }
  for (const NmSymbol& s : parse_nm(run_nm({"--defined-only"}, files, fw.dir, &error))) {
    bool strong = false;
    if (is_global_definition(s.type, &strong)) fw.framework_symbols[s.name] |= strong;
  }
  // The library convolutions' own functions.
  std::vector<std::string> conv_objects;
  for (const std::string& object : read_lines(fw.build / "convlab-framework-objects.txt")) {
    for (const std::string_view suffix : kLibraryConvObjects) {
      if (object.ends_with(suffix)) conv_objects.push_back(object);
    }
  }
  // Without them the rule would quietly shrink to the names of build_detail::check_symbols.
  if (conv_objects.empty()) {
    error +=
        "the library convolution's objects (library_conv_cpu.cpp.o) are not in the "
        "framework build: name its files in kLibraryConvObjects (grader/builder/framework.cpp)\n";
  }
  for (const NmSymbol& s : parse_nm(run_nm({"--defined-only"}, conv_objects, fw.dir, &error))) {
    bool strong = false;
    if (is_global_definition(s.type, &strong) && strong) fw.library_conv_symbols.insert(s.name);
  }
  // What the C and C++ runtimes and the CUDA libraries define.
  for (const std::string& library : read_lines(fw.build / "convlab-framework-runtime.txt")) {
    const bool shared = library.find(".so") != std::string::npos;
    const std::vector<std::string> options = shared
                                                 ? std::vector<std::string>{"-D", "--defined-only"}
                                                 : std::vector<std::string>{"--defined-only"};
    std::string lib_error;
    const std::string name = fs::path(library).filename().string();
    for (const NmSymbol& s : parse_nm(run_nm(options, {library}, fw.dir, &lib_error))) {
      bool strong = false;
      if (is_global_definition(s.type, &strong)) {
        fw.library_symbols.emplace(strip_version(s.name), name);
      }
    }
    if (!lib_error.empty()) error += lib_error;
  }
  for (const std::string& dir : read_lines(fw.build / "convlab-framework-include-dirs.txt")) {
    fw.system_include_dirs.emplace_back(dir);
  }
  if (fw.system_include_dirs.empty()) error += "the compiler's include folders are unknown\n";
  return error;
}

// The build folder lies in the copy at the depth of a preset's (build/<preset>): with ccache's
// base_dir at the copy's root, its compile commands are those of a checkout's own build, whose
// objects it then reuses.
void set_paths(Framework& fw, const fs::path& dir) {
  fw.dir = dir;
  fw.src = dir / "src";
  fw.build = fw.src / "build" / "framework";
  fw.project_template = dir / "project-template";
}

json to_json(const Framework& fw) {
  json j;
  j["format"] = kCacheFormat;
  j["key"] = fw.key;
  j["build_s"] = fw.build_s;
  j["system_include_dirs"] = json::array();
  for (const fs::path& dir : fw.system_include_dirs) {
    j["system_include_dirs"].push_back(dir.string());
  }
  j["framework_symbols"] = fw.framework_symbols;
  j["library_symbols"] = fw.library_symbols;
  j["library_conv_symbols"] = fw.library_conv_symbols;
  return j;
}

std::optional<Framework> load(const fs::path& dir) {
  std::ifstream in(dir / "framework.json");
  if (!in) return std::nullopt;
  try {
    const json j = json::parse(in);
    if (j.at("format") != kCacheFormat) return std::nullopt;
    Framework fw;
    fw.key = j.at("key").get<std::string>();
    set_paths(fw, dir);
    fw.build_s = j.at("build_s").get<double>();
    for (const auto& d : j.at("system_include_dirs")) {
      fw.system_include_dirs.emplace_back(d.get<std::string>());
    }
    fw.framework_symbols = j.at("framework_symbols").get<std::map<std::string, bool>>();
    fw.library_symbols = j.at("library_symbols").get<std::map<std::string, std::string>>();
    fw.library_conv_symbols = j.at("library_conv_symbols").get<std::set<std::string>>();
    return fw;
  } catch (const json::exception&) {
    return std::nullopt;
  }
}

}  // namespace

std::string framework_key(const BuildRequest& request) {
  Fnv h;
  h.add(kCacheFormat);
  for (const std::string& rel : pristine_files(request.framework_root)) {
    if (!hashed(rel)) continue;
    const auto text = read_regular_file(request.framework_root / rel, 256u << 20);
    if (!text) throw Error("cannot read the framework file " + rel);
    h.add(rel);
    h.add(*text);
  }
  h.add(request.cuda ? "cuda" : "cpu");
  h.add(CONVLAB_BUILT_WITH_WERROR ? "werror" : "");
  h.add(request.cuda_architectures);
  const fs::path scratch = request.cache_dir / "tmp";
  // The variables that choose compilers and toolkits (PATH only through the versions below).
  for (const auto& [name, value] : tool_environment(scratch)) {
    if (name != "HOME" && name != "TMPDIR" && name != "PATH") h.add(name + "=" + value);
  }
  // The tools' versions, and the CPU and GPU the build is tuned for (-march=native, the
  // detected GPU architecture).
  std::vector<std::string> probes = {
      "\"${CXX:-c++}\" --version",
      "cmake --version",
      "ninja --version",
      "[ -x /usr/local/cuda/bin/nvcc ] && /usr/local/cuda/bin/nvcc --version",
      "[ -n \"$CUDACXX\" ] && \"$CUDACXX\" --version",
      "command -v nvcc >/dev/null && nvcc --version",
      "grep -m1 '^model name' /proc/cpuinfo",
      "grep -m1 '^flags' /proc/cpuinfo"};
  if (request.cuda) probes.emplace_back("nvidia-smi --query-gpu=compute_cap --format=csv,noheader");
  std::string probe;
  for (const std::string& command : probes) probe += command + "; ";
  probe += "true";
  const SandboxResult run =
      run_tool({"/bin/sh", "-c", probe}, request.cache_dir, request.cache_dir, 60.0);
  h.add(run.stdout_text);
  return h.hex();
}

std::optional<Framework> ensure_framework(const BuildRequest& request,
                                          const BuildProgressFn& progress, std::string* log) {
  std::error_code ec;
  fs::create_directories(request.cache_dir, ec);
  if (ec) {
    throw Error("cannot create the cache folder " + request.cache_dir.string() + ": " +
                ec.message() + "; choose a writable one");
  }
  const std::string key = framework_key(request);
  const fs::path dir = request.cache_dir / key;
  if (auto ready = load(dir)) {
    ready->reused = true;
    return ready;
  }
  const FileLock lock(request.cache_dir / (key + ".lock"), progress);
  if (auto ready = load(dir)) {  // another grader built it while we waited
    ready->reused = true;
    return ready;
  }

  const auto start = std::chrono::steady_clock::now();
  if (progress) {
    progress("building the framework once for this version (later submissions reuse it): " +
             dir.string());
  }
  fs::remove_all(dir, ec);
  Framework fw;
  fw.key = key;
  set_paths(fw, dir);
  copy_pristine(request.framework_root, fw.src);
  fs::create_directories(fw.build, ec);

  const auto left = [&] {
    return std::max(1.0, request.framework_time_limit_s - seconds_since(start));
  };
  const auto failed = [&](const std::string& step, const SandboxResult& run) {
    *log = step + " failed (" + run.describe() + "):\n" + tail(run.stdout_text, 16000);
    return std::nullopt;
  };
  std::vector<std::string> configure = {
      "cmake",
      "-S",
      fw.src.string(),
      "-B",
      fw.build.string(),
      "-G",
      "Ninja",
      "-DCMAKE_BUILD_TYPE=Release",
      "-DCONVLAB_TESTS=OFF",
      std::string("-DCONVLAB_CUDA=") + (request.cuda ? "ON" : "OFF"),
      std::string("-DCONVLAB_WARNINGS_AS_ERRORS=") + (CONVLAB_BUILT_WITH_WERROR ? "ON" : "OFF"),
      "-DCMAKE_PROJECT_convlab_INCLUDE=" + (fw.src / kExportScript).string()};
  if (!request.cuda_architectures.empty()) {
    configure.push_back("-DCMAKE_CUDA_ARCHITECTURES=" + request.cuda_architectures);
  }
  SandboxResult run = run_tool(configure, dir, dir, left());
  if (run.outcome != Outcome::exited || run.exit_code != 0) {
    return failed("configuring the framework", run);
  }
  std::vector<std::string> build = {"cmake", "--build", fw.build.string(), "--target"};
  for (const std::string& target : read_lines(fw.build / "convlab-framework-build-targets.txt")) {
    build.push_back(target);
  }
  if (build.size() == 4) {
    *log = "configuring the framework did not run " + std::string(kExportScript) +
           ": its top-level CMakeLists.txt must declare project(convlab ...)";
    return std::nullopt;
  }
  if (request.jobs > 0) build.insert(build.end(), {"--parallel", std::to_string(request.jobs)});
  run = run_tool(build, dir, dir, left());
  if (run.outcome != Outcome::exited || run.exit_code != 0) {
    return failed("building the framework", run);
  }
  // The per-submission project, configured once: it must work, and its compiler checks are
  // reused by every submission's configure.
  run = run_tool(
      {"cmake", "-S", (fw.src / kProject).string(), "-B", fw.project_template.string(), "-G",
       "Ninja", "-C", (fw.build / "convlab-framework-settings.cmake").string(),
       "-DCONVLAB_SRC=" + fw.src.string(), "-DCONVLAB_FRAMEWORK_BUILD=" + fw.build.string()},
      dir, dir, left());
  if (run.outcome != Outcome::exited || run.exit_code != 0) {
    return failed("configuring " + std::string(kProject) + " against the framework", run);
  }
  if (const std::string error = gather_facts(fw); !error.empty()) {
    *log = "reading the framework's symbols failed:\n" + error;
    return std::nullopt;
  }
  fw.build_s = seconds_since(start);

  // Published last and atomically: a cache entry either has framework.json or is rebuilt.
  const fs::path temp = dir / "framework.json.tmp";
  {
    std::ofstream out(temp);
    out << to_json(fw).dump();
    if (!out) throw Error("cannot write " + temp.string() + ": is the disk full?");
  }
  fs::rename(temp, dir / "framework.json", ec);
  if (ec) throw Error("cannot write " + (dir / "framework.json").string() + ": " + ec.message());
  fs::remove_all(dir / "tmp", ec);
  return fw;
}

}  // namespace convlab::grader::build_detail
