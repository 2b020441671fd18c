// One submission's build: scan, pristine copy plus the team's files, the cached framework, the
// team's files and the harness compiled in the sandbox, then the include and symbol checks.
#include "grader/builder/build_submission.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <system_error>

#include "grader/builder/build_detail.hpp"
#include "grader/sandbox/sandbox.hpp"
#include "reference/core/error.hpp"
#include "reference/core/stopwatch.hpp"

namespace convlab::grader {
namespace fs = std::filesystem;
using namespace build_detail;

namespace {

constexpr std::size_t kMaxSourceBytes = 1u << 20;
// The per-submission CMake project (inside the copy, so the team cannot change it).
constexpr std::string_view kProject = "grader/builder/project";
// Where CMake puts the team's objects, relative to the build folder.
constexpr std::string_view kStudentObjects = "student/CMakeFiles/convlab_student.dir";
constexpr std::string_view kHarnessObjects = "worker/CMakeFiles/convlab-team.dir";

// "600 s", "0.5 s".
std::string seconds_text(double s) {
  char text[32];
  std::snprintf(text, sizeof text, "%g s", s);
  return text;
}

std::string join(const std::vector<std::string>& lines) {
  std::string text;
  for (const std::string& line : lines) text += line + "\n";
  return text;
}

bool ran_ok(const SandboxResult& run) {
  return run.outcome == Outcome::exited && run.exit_code == 0;
}

// path lies in dir (both made canonical where they exist).
bool inside(const fs::path& path, const fs::path& dir) {
  std::error_code ec;
  const fs::path p = fs::weakly_canonical(path, ec);
  const fs::path d = fs::weakly_canonical(dir, ec);
  const auto [end, _] = std::mismatch(d.begin(), d.end(), p.begin(), p.end());
  return end == d.end() || (std::next(end) == d.end() && end->empty());
}

// Object files under build/<folder>, as Ninja names them (relative to the build folder).
std::vector<std::string> objects_under(const fs::path& build, std::string_view folder) {
  std::vector<std::string> objects;
  std::error_code ec;
  for (fs::recursive_directory_iterator it(build / folder, ec), end; !ec && it != end;
       it.increment(ec)) {
    if (it->is_regular_file(ec) && it->path().extension() == ".o") {
      objects.push_back(it->path().lexically_relative(build).generic_string());
    }
  }
  std::sort(objects.begin(), objects.end());
  return objects;
}

std::string cache_entry(const fs::path& cache, const std::string& name) {
  std::ifstream in(cache);
  const std::string prefix = name + ":";
  for (std::string line; std::getline(in, line);) {
    if (line.starts_with(prefix)) {
      const std::size_t eq = line.find('=');
      if (eq != std::string::npos) return line.substr(eq + 1);
    }
  }
  return {};
}

// The targets Ninja names on its FAILED: lines.
std::vector<std::string> failed_targets(const std::string& output) {
  std::vector<std::string> targets;
  std::size_t at = 0;
  while ((at = output.find("FAILED: ", at)) != std::string::npos) {
    at += 8;
    const std::size_t end = output.find('\n', at);
    std::string line = output.substr(at, end == std::string::npos ? end : end - at);
    // Ninja 1.12 adds "[code=N] " before the outputs.
    if (line.starts_with("[code=")) line = line.substr(line.find(' ') + 1);
    targets.push_back(line);
  }
  return targets;
}

// The files of student/ (relative to it, ';'-separated) equal to the cached build's stubs.
std::string unchanged_stubs(const fs::path& src, const fs::path& cached_src) {
  std::string list;
  std::error_code ec;
  for (fs::recursive_directory_iterator it(src / "student", ec), end; !ec && it != end;
       it.increment(ec)) {
    if (!it->is_regular_file(ec)) continue;
    const fs::path rel = it->path().lexically_relative(src / "student");
    const auto mine = read_regular_file(it->path(), kMaxSourceBytes);
    const auto stub = read_regular_file(cached_src / "student" / rel, kMaxSourceBytes);
    if (mine && stub && *mine == *stub) list += (list.empty() ? "" : ";") + rel.generic_string();
  }
  return list;
}

// Seeds `build` with the compiler checks of the framework's configured project template (same
// compilers, same settings, same CMake): the configure then skips them (seconds with nvcc).
// Returns the cache entries that tell CMake so; none when there is no template.
std::vector<std::string> seed_compiler_checks(const fs::path& project_template,
                                              const fs::path& build) {
  std::error_code ec;
  const fs::path files = project_template / "CMakeFiles";
  for (fs::directory_iterator it(files, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    // CMakeFiles/<CMake's version>/: CMakeSystem.cmake, CMake<LANG>Compiler.cmake...
    if (!it->is_directory(ec) || name.empty() || name[0] < '0' || name[0] > '9' ||
        !fs::exists(it->path() / "CMakeSystem.cmake", ec)) {
      continue;
    }
    fs::create_directories(build / "CMakeFiles", ec);
    fs::copy(it->path(), build / "CMakeFiles" / name, fs::copy_options::recursive, ec);
    if (ec) return {};
    std::vector<std::string> options = {"-DCMAKE_PLATFORM_INFO_INITIALIZED:INTERNAL=1"};
    const std::string pthread =
        cache_entry(project_template / "CMakeCache.txt", "CMAKE_HAVE_LIBC_PTHREAD");
    if (!pthread.empty()) options.push_back("-DCMAKE_HAVE_LIBC_PTHREAD:INTERNAL=" + pthread);
    return options;
  }
  return {};
}

// Every tool runs in another folder: absolute paths only. Throws Error when the request itself
// is unusable.
BuildRequest absolute_request(const BuildRequest& given) {
  BuildRequest request = given;
  for (fs::path* path :
       {&request.submission, &request.framework_root, &request.work_dir, &request.cache_dir}) {
    if (!path->empty()) *path = fs::absolute(*path).lexically_normal();
  }
  std::error_code ec;
  if (!fs::is_regular_file(request.framework_root / "CMakeLists.txt", ec) ||
      !fs::is_regular_file(request.framework_root / kProject / "CMakeLists.txt", ec)) {
    throw Error(request.framework_root.string() +
                " is not a convlab framework with its grader (no CMakeLists.txt or " +
                std::string(kProject) + "/CMakeLists.txt): give the framework's root");
  }
  if (request.work_dir.empty() || request.cache_dir.empty()) {
    throw Error("build_submission needs a work folder and a cache folder");
  }
  fs::create_directories(request.work_dir, ec);
  if (ec || !std::ofstream(request.work_dir / ".writable")) {
    throw Error("cannot write in the work folder " + request.work_dir.string() +
                (ec ? ": " + ec.message() : "") + "; choose a writable folder");
  }
  fs::remove(request.work_dir / ".writable", ec);
  return request;
}

// Writes the accepted files over the pristine copy in `src`; their sources read as the compiler
// will. One line per refused include (or unreadable file).
std::vector<std::string> lay_team_files(const SubmissionFiles& files, const fs::path& src) {
  std::error_code ec;
  std::vector<std::string> findings;
  for (std::size_t i = 0; i < files.accepted.size(); ++i) {
    const std::string& file = files.accepted[i];
    const auto text = read_regular_file(files.accepted_sources[i], kMaxSourceBytes);
    if (!text) {
      // Changed since the scan (it was a regular file of at most 1 MiB then).
      findings.push_back(file + ": could not be read as a regular file of at most 1 MiB");
      continue;
    }
    fs::create_directories((src / file).parent_path(), ec);  // a variant folder of the team's
    std::ofstream(src / file, std::ios::binary | std::ios::trunc) << *text;
    for (std::string& line : scan_source(*text, file)) findings.push_back(std::move(line));
  }
  return findings;
}

// What the steps that read the team's files share: they run as one unprivileged user, who owns
// the work folder and sees only it, the framework's cache entry and the system and toolkit
// folders, within the build's time limit.
struct TeamSteps {
  const BuildRequest& request;
  const Framework& fw;
  fs::path src, build;
  std::vector<fs::path> hide;
  TeamBuild team;
  std::chrono::steady_clock::time_point start = std::chrono::steady_clock::now();

  TeamSteps(const BuildRequest& r, const Framework& f)
      : request(r), fw(f), src(r.work_dir / "src"), build(r.work_dir / "build") {
    hide = r.hide_paths;
    hide.push_back(r.framework_root / "reference" / "solutions");
    std::erase_if(hide, [&](const fs::path& path) {
      return inside(r.work_dir, path) || inside(r.cache_dir, path);
    });
    team.uid = sandbox_uid(r.work_dir.string());
    team.max_memory_bytes = r.memory_limit_bytes;
    team.visible = team_build_visible_paths(f.dir, f.system_include_dirs);
  }
  // Never 0 or less: the sandbox reads a wall limit of 0 as "none".
  double left() const { return std::max(0.001, request.time_limit_s - seconds_since(start)); }
  SandboxResult run(const std::vector<std::string>& argv, const fs::path& workdir,
                    double wall_s) const {
    return run_tool(argv, workdir, request.work_dir, wall_s, hide, &team);
  }
};

// Configures the submission's project against the cached framework.
SandboxResult configure(const TeamSteps& t) {
  std::vector<std::string> argv = {
      "cmake",
      "-S",
      (t.src / kProject).string(),
      "-B",
      t.build.string(),
      "-G",
      "Ninja",
      "-C",
      (t.fw.build / "convlab-framework-settings.cmake").string(),
      "-DCONVLAB_SRC=" + t.src.string(),
      "-DCONVLAB_FRAMEWORK_BUILD=" + t.fw.build.string(),
      "-DCONVLAB_UNCHANGED_STUDENT_FILES=" + unchanged_stubs(t.src, t.fw.src)};
  for (std::string& option : seed_compiler_checks(t.fw.project_template, t.build)) {
    argv.push_back(std::move(option));
  }
  give_to_build_user(t.request.work_dir, t.team.uid);  // the seeded checks included
  return t.run(argv, t.request.work_dir, t.left());
}

// Compiles the team's files and links the harness, going on past errors (every error of every
// file).
SandboxResult compile(const TeamSteps& t) {
  std::vector<std::string> argv = {"cmake", "--build", t.build.string(), "--target",
                                   "convlab-team"};
  if (t.request.jobs > 0) argv.insert(argv.end(), {"--parallel", std::to_string(t.request.jobs)});
  argv.insert(argv.end(), {"--", "-k", "0"});
  return t.run(argv, t.request.work_dir, t.left());
}

// The team's objects (as Ninja names them) -> the team files they came from.
std::map<std::string, std::string> team_objects(const fs::path& build) {
  std::map<std::string, std::string> object_to_source;
  for (const std::string& object : objects_under(build, kStudentObjects)) {
    std::string source = object.substr(kStudentObjects.size() + 1);
    source = "student/" + source.substr(0, source.size() - 2);  // drop ".o"
    object_to_source[object] = source;
  }
  return object_to_source;
}

// Headers from outside the framework that the team's objects read (Ninja's dependency lists)
// or the compiler's output names. A check that could not run adds to `check_error`.
std::vector<std::string> include_findings(const TeamSteps& t,
                                          const std::map<std::string, std::string>& objects,
                                          const std::string& output, std::string& check_error) {
  std::string make_program = cache_entry(t.build / "CMakeCache.txt", "CMAKE_MAKE_PROGRAM");
  if (make_program.empty()) make_program = "ninja";
  const SandboxResult deps =
      t.run({make_program, "-C", t.build.string(), "-t", "deps"}, t.build, 120.0);
  if (!ran_ok(deps)) check_error += "ninja -t deps: " + deps.describe() + "\n";
  for (const auto& [object, source] : objects) {
    if (deps.stdout_text.find(object + ": #deps") == std::string::npos) {
      check_error += "no dependency list for " + object + ": its includes cannot be checked\n";
    }
  }
  std::vector<std::string> includes =
      check_dependencies(deps.stdout_text, t.build, t.src, t.fw.system_include_dirs, objects);
  for (const std::string& path : foreign_paths_in_log(output, t.src, t.fw.system_include_dirs)) {
    includes.push_back("the compiler read " + path +
                       ", which is outside the framework: include only the framework's headers "
                       "and system headers");
  }
  return includes;
}

// The symbol rules (check_symbols()) on each team object, against what the framework and the
// harness define. A check that could not run adds to `check_error`.
std::vector<std::string> symbol_findings(const TeamSteps& t,
                                         const std::map<std::string, std::string>& objects,
                                         std::string& check_error) {
  std::map<std::string, bool> harness_symbols;
  std::vector<std::string> harness_objects = objects_under(t.build, kHarnessObjects);
  if (!harness_objects.empty()) {
    std::vector<std::string> argv = {"nm", "-P", "--defined-only"};
    argv.insert(argv.end(), harness_objects.begin(), harness_objects.end());
    const SandboxResult nm = t.run(argv, t.build, 120.0);
    if (!ran_ok(nm)) check_error += "nm: " + nm.describe() + "\n" + nm.stdout_text;
    for (const NmSymbol& s : parse_nm(nm.stdout_text)) {
      bool strong = false;
      if (is_global_definition(s.type, &strong)) harness_symbols[s.name] |= strong;
    }
  }
  std::vector<std::string> symbols;
  for (const auto& [object, source] : objects) {
    const SandboxResult nm = t.run({"nm", "-P", object}, t.build, 120.0);
    if (!ran_ok(nm)) {
      check_error += "nm: " + nm.describe() + "\n" + nm.stdout_text;
      continue;
    }
    for (std::string& line :
         check_symbols(source, parse_nm(nm.stdout_text), t.fw, harness_symbols)) {
      symbols.push_back(std::move(line));
    }
  }
  return symbols;
}

// Why a compile that did not succeed failed, and the log the team reads: (reason, log).
std::pair<std::string, std::string> compile_failure(
    const SandboxResult& compile, const BuildRequest& request,
    const std::vector<std::pair<std::string, std::string>>& shorten) {
  const std::string& output = compile.stdout_text;
  std::string log = trim_build_log(output, shorten);
  if (compile.outcome == Outcome::timed_out) {
    return {"timeout", "the build passed its time limit of " + seconds_text(request.time_limit_s) +
                           ": make your code quicker to compile (fewer template or unrolled "
                           "instantiations)\n" +
                           log};
  }
  if (compile.outcome == Outcome::memory_limit) {
    return {"build_failed", "the build " + compile.describe() +
                                ": make your code cheaper to compile (smaller constant "
                                "expressions, fewer template or unrolled instantiations)\n" +
                                log};
  }
  if (compile.outcome == Outcome::output_limit) {
    return {"build_failed", "the compiler's output passed its limit: fix the first errors\n" + log};
  }
  bool team = false, harness = false;
  for (const std::string& target : failed_targets(output)) {
    team |= target.starts_with("student/");
    harness |= target.starts_with("worker/") && target.ends_with(".o");
  }
  if (harness && !team) {
    return {"framework_build_failed", "the check harness (grader/worker) did not compile:\n" +
                                          trim_build_log(output, shorten, 200)};
  }
  if (log.empty()) log = compile.describe() + "\n" + trim_build_log(output, shorten, 200);
  if (output.find("undefined reference to `convlab::student::") != std::string::npos) {
    log =
        "the harness calls an entry point your files do not define: keep the names and "
        "signatures of reference/conv/student_api.hpp\n" +
        log;
  }
  return {"build_failed", log};
}

}  // namespace

BuildResult build_submission(const BuildRequest& given, const BuildProgressFn& progress) {
  const auto start = std::chrono::steady_clock::now();
  const BuildRequest request = absolute_request(given);
  const auto say = [&](const std::string& line) {
    if (progress) progress(line);
  };
  BuildResult result;
  const auto finish = [&](std::string reason) {
    result.reason = std::move(reason);
    result.ok = result.reason == "ok";
    if (!result.log.empty() && result.log.back() != '\n') result.log += '\n';
    result.wall_s = seconds_since(start);
    return result;
  };
  const auto refuse = [&](std::vector<std::string> findings, const char* reason) {
    result.forbidden = std::move(findings);
    result.log = join(result.forbidden);
    return finish(reason);
  };

  // 1. Which files are graded.
  result.files = scan_submission(request.submission, request.allowed_files, request.framework_root,
                                 request.allowed_folders);
  say("submission: " + std::to_string(result.files.accepted.size()) + " file(s) graded, " +
      std::to_string(result.files.rejected.size()) + " refused, " +
      std::to_string(result.files.missing.size()) + " missing (their stubs are graded)");

  // 2. The pristine copy with the team's files over it.
  const fs::path tmp = request.work_dir / "tmp";
  std::error_code ec;
  for (const char* dir : {"src", "build", "tmp"}) fs::remove_all(request.work_dir / dir, ec);
  copy_pristine(request.framework_root, request.work_dir / "src");
  if (auto findings = lay_team_files(result.files, request.work_dir / "src"); !findings.empty()) {
    return refuse(std::move(findings), "forbidden_include");
  }

  // 3. The framework, built once per version.
  std::string framework_log;
  const std::optional<Framework> fw = ensure_framework(request, progress, &framework_log);
  if (!fw) {
    result.log = framework_log;
    return finish("framework_build_failed");
  }
  result.framework_build = fw->dir;
  result.framework_reused = fw->reused;
  result.framework_build_s = fw->build_s;
  say(fw->reused ? "framework: cached build " + fw->key
                 : "framework: built in " + std::to_string(static_cast<int>(fw->build_s)) + " s");

  // 4. The team's files and the harness, in the sandbox, within the time limit.
  const TeamSteps t(request, *fw);
  const std::vector<std::pair<std::string, std::string>> shorten = {
      {t.src.string() + "/", ""},
      {t.build.string() + "/", ""},
      {fw->build.string() + "/", "<framework>/"}};
  say("compiling the team's files");
  const SandboxResult configured = configure(t);
  if (configured.outcome == Outcome::timed_out || !ran_ok(configured)) {
    result.submission_build_s = seconds_since(t.start);
    if (configured.outcome == Outcome::timed_out) {
      result.log = "the build passed its time limit of " + seconds_text(request.time_limit_s) +
                   " while configuring";
      return finish("timeout");
    }
    // Nothing of the team's is read when configuring: this is the grader's own problem.
    result.log = "configuring the submission's build failed (" + configured.describe() + "):\n" +
                 configured.stdout_text;
    return finish("framework_build_failed");
  }
  const SandboxResult compiled = compile(t);

  // 5. What the team's objects read and call. Checks that could not run are the grader's
  // problem, never a pass.
  say("checking includes and symbols");
  const std::map<std::string, std::string> objects = team_objects(t.build);
  std::string check_error;
  if (auto includes = include_findings(t, objects, compiled.stdout_text, check_error);
      !includes.empty()) {
    // The log is withheld: it would show what the outside file holds.
    result.submission_build_s = seconds_since(t.start);
    return refuse(std::move(includes), "forbidden_include");
  }
  std::vector<std::string> symbols = symbol_findings(t, objects, check_error);
  result.submission_build_s = seconds_since(t.start);
  if (!symbols.empty()) return refuse(std::move(symbols), "forbidden_symbol");

  // 6. How the compile went.
  if (!ran_ok(compiled)) {
    auto [reason, log] = compile_failure(compiled, request, shorten);
    result.log = std::move(log);
    return finish(reason);
  }
  result.log = trim_build_log(compiled.stdout_text, shorten);
  if (!check_error.empty()) {
    result.log = "the include and symbol checks could not run:\n" + check_error;
    return finish("framework_build_failed");
  }
  std::string worker, referee;
  std::getline(std::ifstream(t.build / "convlab-team-path.txt"), worker);
  std::getline(std::ifstream(fw->build / "convlab-framework-referee-path.txt"), referee);
  result.worker = worker.empty() ? t.build / "worker" / "convlab-team" : fs::path(worker);
  result.referee =
      referee.empty() ? fw->build / "grader" / "worker" / "convlab-check" : fs::path(referee);
  for (const fs::path& program : {result.worker, result.referee}) {
    if (!fs::is_regular_file(program, ec)) {
      result.log = "the build finished but " + program.string() + " is not there";
      return finish("framework_build_failed");
    }
  }
  fs::remove_all(tmp, ec);
  say("built in " + std::to_string(static_cast<int>(result.submission_build_s + 0.5)) + " s");
  return finish("ok");
}

}  // namespace convlab::grader
