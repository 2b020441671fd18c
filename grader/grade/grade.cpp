#include "grader/grade/grade.hpp"

#include <fnmatch.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <ctime>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <sstream>
#include <thread>

#include "datasets/fashion_mnist.hpp"
#include "datasets/idx.hpp"
#include "grader/build/build_submission.hpp"
#include "grader/grade/elementwise.hpp"
#include "grader/grade/grading_plan.hpp"
#include "grader/grade/report.hpp"
#include "grader/sandbox/sandbox.hpp"
#include "grader/worker/protocol.hpp"
#include "reference/core/error.hpp"
#include "reference/core/text.hpp"
#include "reference/driver/format.hpp"
#include "reference/driver/milestone.hpp"
#include "reference/model/model.hpp"

#ifdef CONVLAB_HAVE_SQLITE
#include "grader/db/results_db.hpp"
#endif

namespace convlab::grader {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr std::size_t kStderrTailLines = 20;
constexpr std::size_t kSanitizerTailLines = 40;

// ---------------------------------------------------------------------------------------------
// Small helpers

// compute-sanitizer's first report (the faulty kernel, access and thread) and its summary: the
// later reports are mostly consequences (the teardown's calls failing after the error).
std::string first_sanitizer_report(const std::string& text, std::size_t max_lines) {
  std::vector<std::string> lines;
  std::string summary;
  std::size_t pos = 0;
  bool started = false;
  while (pos < text.size()) {
    std::size_t nl = text.find('\n', pos);
    if (nl == std::string::npos) nl = text.size();
    const std::string line = text.substr(pos, nl - pos);
    pos = nl + 1;
    if (line.find("ERROR SUMMARY") != std::string::npos) summary = line;
    if (!started && line.rfind("========= ", 0) == 0 &&
        line.find("COMPUTE-SANITIZER") == std::string::npos) {
      started = true;
    }
    if (started && lines.size() < max_lines) lines.push_back(line);
  }
  std::string out;
  for (const std::string& l : lines) out += l + "\n";
  if (!summary.empty()) out += (lines.empty() ? "" : "  ...\n") + summary + "\n";
  return out;
}

std::string tail_lines(const std::string& text, std::size_t lines) {
  std::size_t end = text.size();
  while (end > 0 && (text[end - 1] == '\n' || text[end - 1] == '\r')) --end;
  std::size_t pos = end;
  for (std::size_t n = 0; n < lines && pos > 0; ++n) {
    const std::size_t nl = text.rfind('\n', pos - 1);
    pos = nl == std::string::npos ? 0 : nl;
    if (nl == std::string::npos) break;
  }
  const std::size_t start = pos == 0 ? 0 : pos + 1;
  return text.substr(start, end - start);
}

std::string indent(const std::string& text) {
  std::string out = "  ";
  for (char ch : text) {
    out += ch;
    if (ch == '\n') out += "  ";
  }
  return out;
}

std::string iso_utc_now() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::string cpu_name() {
  std::ifstream in("/proc/cpuinfo");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("model name", 0) == 0) {
      const std::size_t colon = line.find(':');
      if (colon != std::string::npos) {
        std::size_t b = line.find_first_not_of(' ', colon + 1);
        return b == std::string::npos ? "" : line.substr(b);
      }
    }
  }
  return "";
}

std::string host_name() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof buf - 1) != 0) return "";
  return buf;
}

std::string getenv_or(const char* name, const std::string& fallback = "") {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? v : fallback;
}

std::string fmt(const char* format, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, format, v);
  return buf;
}

std::string points_text(double v) {
  return fmt("%g", v);
}

// FNV-1a 64 over the framework's sources (paths and contents, sorted): identifies in a report
// exactly which framework a submission was built and checked against.
std::string framework_hash(const fs::path& root) {
  std::vector<fs::path> files;
  const auto add_tree = [&](const fs::path& rel) {
    std::error_code ec;
    const fs::path dir = root / rel;
    if (fs::is_regular_file(dir, ec)) {
      files.push_back(rel);
      return;
    }
    if (!fs::is_directory(dir, ec)) return;
    for (fs::recursive_directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
      if (it->is_regular_file()) files.push_back(fs::relative(it->path(), root));
    }
  };
  for (const char* rel : {"CMakeLists.txt", "CMakePresets.json", "cmake", "reference", "datasets",
                          "student", "grader/worker", "grader/build"}) {
    add_tree(rel);
  }
  for (const std::string& id : milestone_ids(root)) add_tree(fs::path("milestones") / id / "checks.json");
  std::erase_if(files,
                [](const fs::path& p) { return p.string().rfind("reference/solutions", 0) == 0; });
  std::sort(files.begin(), files.end());
  std::uint64_t h = 1469598103934665603ull;
  const auto mix = [&](const char* data, std::size_t n) {
    for (std::size_t i = 0; i < n; ++i) {
      h ^= static_cast<unsigned char>(data[i]);
      h *= 1099511628211ull;
    }
  };
  std::vector<char> buf(1 << 16);
  for (const fs::path& f : files) {
    const std::string name = f.generic_string();
    mix(name.c_str(), name.size() + 1);
    std::ifstream in(root / f, std::ios::binary);
    while (in.read(buf.data(), static_cast<std::streamsize>(buf.size())) || in.gcount() > 0) {
      mix(buf.data(), static_cast<std::size_t>(in.gcount()));
    }
    mix("", 1);
  }
  char out[32];
  std::snprintf(out, sizeof out, "fnv1a64:%016llx", static_cast<unsigned long long>(h));
  return out;
}

fs::path default_cache_dir() {
  if (const std::string env = getenv_or("CONVLAB_CACHE"); !env.empty()) return env;
  if (const std::string xdg = getenv_or("XDG_CACHE_HOME"); !xdg.empty()) {
    return fs::path(xdg) / "convlab";
  }
  if (const std::string home = getenv_or("HOME"); !home.empty()) {
    return fs::path(home) / ".cache" / "convlab";
  }
  return fs::temp_directory_path() / "convlab-cache";
}

std::optional<fs::path> find_program(const std::string& name, const std::vector<fs::path>& extra) {
  std::vector<fs::path> dirs;
  std::stringstream path(getenv_or("PATH"));
  for (std::string d; std::getline(path, d, ':');) {
    if (!d.empty()) dirs.emplace_back(d);
  }
  dirs.insert(dirs.end(), extra.begin(), extra.end());
  for (const fs::path& d : dirs) {
    const fs::path p = d / name;
    if (::access(p.c_str(), X_OK) == 0) return p;
  }
  return std::nullopt;
}

std::string log_name(const std::string& id) {
  std::string s = id;
  for (char& ch : s) {
    if (ch == '/' || ch == ' ' || ch == '*') ch = '_';
  }
  return s;
}

std::string accuracy(std::int64_t correct, std::int64_t n) {
  return format_accuracy(static_cast<double>(correct) / static_cast<double>(n));
}

// doc[key], or null where the (untrusted) document lacks it.
const json& field(const json& doc, const char* key) {
  static const json null;
  const auto it = doc.find(key);
  return it == doc.end() ? null : *it;
}

json shape_json(const ConvShape& s) {
  return {{"B", s.B}, {"M", s.M}, {"C", s.C}, {"H", s.H}, {"W", s.W}, {"K", s.K}};
}

json mismatch_json(const ElementMismatch& m) {
  return {{"b", m.b},
          {"m", m.m},
          {"h", m.h},
          {"w", m.w},
          {"got", std::isfinite(m.got) ? json(m.got) : json(std::to_string(m.got))},
          {"want", m.want},
          {"error", std::isfinite(m.error) ? json(m.error) : json(nullptr)}};
}

// A check's failure: its reason code and what the student reads.
struct Failure {
  std::string reason;
  std::string output;
  CheckStatus status = CheckStatus::failed;
};

// The noise of the timed passes comes from the grade's seed, apart from the element-wise
// inputs' streams.
constexpr std::uint64_t kNoiseSeedSalt = 0x6e6f697365ull;  // "noise"

// The referee compared every timed call's output with the library convolution on the same
// fresh input; a failure there is a wrong result, however the count came out.
std::optional<Failure> judge_verification(const json& doc, const PlannedCheck& p) {
  const json v = doc.value("verification", json());
  if (!v.is_object() || v.value("calls", 0) < 1) {
    return Failure{"no_result", "The timed runs returned no checked call."};
  }
  if (v.value("failed", 0) == 0) return std::nullopt;
  const json f = v.value("first_failure", json::object());
  std::string text =
      "A timed call computed a wrong output: " + std::to_string(v.value("failed", 0)) + " of " +
      std::to_string(v.value("calls", 0)) + " timed calls differ from the library convolution " +
      "on the same input";
  if (f.is_object()) {
    text += " (first: " + std::to_string(f.value("mismatches", 0)) + " wrong outputs, e.g. " +
            f.value("at", std::string("?")) + " = " + f.value("got", json()).dump() +
            ", expected " + f.value("want", json()).dump() + ")";
  }
  text +=
      ". Each timed run gets new inputs (the test images under fresh noise), and every call "
      "must compute the convolution of its own input, write every output and be finished when "
      "it returns: no results kept from an earlier call, no work left running.";
  if (p.check.hidden) text = "A timed call computed a wrong output.";
  return Failure{"mismatch", text};
}

// What one check's two processes produced: the team's (in the sandbox) and the referee's.
struct WorkerOutcome {
  SandboxResult run;        // the team's process (convlab-team); a probe has none
  SandboxResult referee;    // the trusted referee (convlab-check)
  std::optional<json> doc;  // the referee's well-formed result document
  std::string doc_problem;  // why there is none
  std::string status() const { return doc ? doc->value("status", "") : ""; }
  std::string message() const { return doc ? doc->value("message", "") : ""; }
};

// ---------------------------------------------------------------------------------------------

class Grading {
 public:
  Grading(const GradeOptions& options, const ProgressFn& progress)
      : opt_(options), progress_(progress) {}

  GradeResult run();

 private:
  void say(const std::string& line) const {
    if (progress_) progress_(line);
  }
  void validate_and_prepare();
  void build();
  void add_build_checks();
  void run_checks();
  void run_one(PlannedCheck& p, CheckResult& c);
  void finish();

  // The checks.
  void check_network(PlannedCheck& p, CheckResult& c);
  void check_time(PlannedCheck& p, CheckResult& c);
  void check_elementwise(PlannedCheck& p, CheckResult& c);
  void check_memcheck(PlannedCheck& p, CheckResult& c);

  // Running the harness.
  WorkerOutcome run_worker(const std::string& log_id, const std::vector<std::string>& args,
                           double wall_s, const std::vector<std::string>& prefix = {},
                           bool with_team = true);
  std::optional<Failure> referee_failure(const WorkerOutcome& w) const;
  std::optional<Failure> failure_of(const WorkerOutcome& w, const PlannedCheck& p,
                                    bool sanitizer) const;
  std::optional<Failure> gpu_unavailable(const PlannedCheck& p);
  WorkerOutcome run_network(const PlannedCheck& p, const std::string& log_id, bool timed);
  std::optional<Failure> judge_predictions(const WorkerOutcome& w, const PlannedCheck& p,
                                           CheckResult& c);

  // Advice.
  std::string run_command(const PlannedCheck& p, std::int64_t images) const;
  std::string debug_advice(const PlannedCheck& p) const;

  fs::path images_file(std::int64_t n);
  double time_limit(const PlannedCheck& p) const {
    return opt_.time_limit_s.value_or(p.spec->milestone.time_limit_s);
  }
  std::int64_t model_classes(const fs::path& file);

  const GradeOptions& opt_;
  const ProgressFn& progress_;
  std::chrono::steady_clock::time_point start_;
  GradeResult result_;
  fs::path root_, out_, logs_, work_, cache_, data_dir_;
  bool remove_work_ = true;
  std::vector<MilestoneSpec> specs_;
  std::vector<HiddenModel> hidden_;
  std::vector<PlannedCheck> plan_;
  std::vector<std::string> allowed_;
  data::Dataset test_;
  BuildResult build_;
  bool cuda_build_ = false;
  std::vector<fs::path> hide_;
  std::map<std::string, std::string> env_;
  std::map<std::int64_t, fs::path> image_files_;
  std::map<std::string, std::int64_t> classes_;
  // The GPU, probed once with the harness itself: nullopt until probed; then "" when usable
  // or why not.
  std::optional<std::string> gpu_problem_;
  // The timed network run of each (milestone, variant), for its time check.
  std::map<std::string, std::pair<WorkerOutcome, std::optional<Failure>>> timed_runs_;
  std::optional<SandboxResult> last_run_;
  std::optional<Limits> last_limits_;
  TempDirLock work_lock_;
};

// ---------------------------------------------------------------------------------------------
// Preparation

void Grading::validate_and_prepare() {
  start_ = std::chrono::steady_clock::now();
  result_.started_at = iso_utc_now();
  result_.grader_version = CONVLAB_VERSION;
  root_ = convlab_root();

  std::error_code ec;
  if (opt_.submission.empty() || !fs::is_directory(opt_.submission, ec)) {
    throw Error("submission '" + opt_.submission.string() +
                "' is not a folder: give the folder that holds the team's student/ files");
  }
  const fs::path submission = fs::canonical(opt_.submission);
  result_.submission = submission.string();
  result_.team =
      strip_control_chars(opt_.team.empty() ? submission.filename().string() : opt_.team);
  if (result_.team.empty()) throw Error("cannot tell the team's name: pass --team NAME");
  result_.milestone = opt_.milestone;
  if (opt_.runs && (*opt_.runs < 1 || *opt_.runs > 100)) {
    throw Error("--runs must be between 1 and 100, got " + std::to_string(*opt_.runs));
  }
  if (opt_.time_limit_s && !(*opt_.time_limit_s >= 1.0 && *opt_.time_limit_s <= 86400.0)) {
    throw Error("--time-limit must be between 1 and 86400 seconds");
  }
  specs_ = load_milestone_specs(root_, opt_.milestone);
  for (const MilestoneSpec& s : specs_) {
    for (const std::string& f : s.milestone.team_writes) {
      if (std::find(allowed_.begin(), allowed_.end(), f) == allowed_.end()) allowed_.push_back(f);
    }
  }

  // The labels stay in this process; the checks get images only.
  data_dir_ = data::data_dir(opt_.data);
  test_ = data::load_fashion_mnist(data_dir_, data::Split::test);

  std::vector<std::string> skipped_models;
  hidden_ = find_hidden_models(opt_.model_dirs, test_.count, &skipped_models);
  for (const std::string& s : skipped_models) say("note: " + s);
  plan_ = plan_checks(specs_, hidden_, root_ / "datasets" / "models");

  result_.only = opt_.only;
  for (const std::string& glob : opt_.only) {
    const bool any = std::any_of(plan_.begin(), plan_.end(), [&](const PlannedCheck& p) {
      return ::fnmatch(glob.c_str(), p.check.id.c_str(), 0) == 0;
    });
    const bool fixed = ::fnmatch(glob.c_str(), "files", 0) == 0 ||
                       ::fnmatch(glob.c_str(), "build", 0) == 0 ||
                       ::fnmatch(glob.c_str(), "symbols", 0) == 0;
    if (!any && !fixed) {
      std::string ids;
      for (const PlannedCheck& p : plan_) ids += "\n  " + p.check.id;
      throw Error("--only '" + glob + "' matches no check of " + opt_.milestone +
                  "; the checks are:" + ids);
    }
  }
  const std::size_t before = plan_.size();
  std::erase_if(plan_, [&](const PlannedCheck& p) { return !id_selected(p.check.id, opt_.only); });
  result_.partial = plan_.size() != before;

#ifndef CONVLAB_HAVE_SQLITE
  if (opt_.db) {
    throw Error(
        "--db needs the results database, and this convlab was built without SQLite: "
        "install libsqlite3-dev and configure again, or grade without --db");
  }
#else
  if (opt_.db) ResultsDb check_it_opens(*opt_.db);  // a bad file fails now, not after grading
#endif

  out_ = opt_.out.empty() ? fs::current_path() / ("grade-" + result_.team) : opt_.out;
  logs_ = out_ / "logs";
  fs::create_directories(logs_, ec);
  if (ec || ::access(out_.c_str(), W_OK) != 0) {
    throw Error("cannot write to --out " + out_.string() + ": choose a writable folder");
  }
  cache_ = opt_.cache.value_or(default_cache_dir());

  // Fails closed: refuses (unless --allow-degraded) where isolation is missing.
  result_.degraded_features = require_isolation(opt_.allow_degraded);
  result_.allow_degraded = opt_.allow_degraded;
  std::string pattern = (fs::temp_directory_path() / "convlab-grade-XXXXXX").string();
  if (::mkdtemp(pattern.data()) == nullptr) {
    throw Error("cannot create a work folder in " + fs::temp_directory_path().string());
  }
  work_ = pattern;
  work_lock_ = TempDirLock(work_);  // a grader killed with SIGKILL leaves it to the sweeper
  remove_work_ = !opt_.keep_work;

  result_.seed = opt_.seed.value_or([] {
    std::random_device rd;
    // 53 bits: the seed survives every JSON reader (doubles) and SQLite's signed integers.
    return ((std::uint64_t{rd()} << 32) | rd()) & ((std::uint64_t{1} << 53) - 1);
  }());
  result_.framework_hash = framework_hash(root_);
  result_.machine.cpu_name = cpu_name();
  result_.machine.hostname = host_name();

  // What the checks may not read: the labels, the hidden models, the staff solutions, the
  // results database, and whatever the caller adds.
  hide_ = {data_dir_, fs::path(data::kDefaultDataDir)};
  if (const std::string env = getenv_or("CONVLAB_DATA"); !env.empty()) hide_.emplace_back(env);
  hide_.insert(hide_.end(), opt_.model_dirs.begin(), opt_.model_dirs.end());
  hide_.push_back(root_ / "reference" / "solutions");
  if (opt_.db) hide_.push_back(*opt_.db);
  hide_.insert(hide_.end(), opt_.hide_paths.begin(), opt_.hide_paths.end());
  for (fs::path& h : hide_) h = fs::absolute(h).lexically_normal();
  std::sort(hide_.begin(), hide_.end());
  hide_.erase(std::unique(hide_.begin(), hide_.end()), hide_.end());

  for (const char* name : {"PATH", "LD_LIBRARY_PATH", "CUDA_VISIBLE_DEVICES"}) {
    if (const char* v = std::getenv(name)) env_[name] = v;
  }
  env_[kResultFdEnv] = std::to_string(kResultFd);

#ifdef CONVLAB_HAVE_CUDA
  cuda_build_ =
      std::any_of(specs_.begin(), specs_.end(), [](const MilestoneSpec& s) { return s.gpu; });
#endif
}

// ---------------------------------------------------------------------------------------------
// Build

void Grading::build() {
  say("building " + result_.submission + " (framework cache: " + cache_.string() + ")");
  BuildRequest req;
  req.submission = result_.submission;
  req.allowed_files = allowed_;
  req.framework_root = root_;
  req.work_dir = work_ / "build";
  req.cache_dir = cache_;
  req.cuda = cuda_build_;
  req.hide_paths = hide_;
  req.time_limit_s = 0.0;  // the milestones' own limit (checks.json time_limit_s), not 600 s
  for (const MilestoneSpec& s : specs_) {
    req.time_limit_s = std::max(req.time_limit_s, s.milestone.time_limit_s);
  }
  try {
    build_ = build_submission(req, [&](const std::string& line) { say("  " + line); });
  } catch (const Error&) {
    throw;  // the request itself is unusable: the grader's own bad input
  } catch (const std::exception& e) {
    build_ = BuildResult{};
    build_.ok = false;
    build_.reason = "framework_build_failed";
    build_.log = std::string("the build step failed inside the grader: ") + e.what();
  }
  std::ofstream(logs_ / "build.log") << build_.log;
}

void Grading::add_build_checks() {
  const BuildResult& b = build_;
  const auto add = [&](const char* id, const char* name, const char* kind) -> CheckResult& {
    CheckResult& c = result_.checks.emplace_back();
    c.id = id;
    c.name = name;
    c.kind = kind;
    c.milestone = opt_.milestone;
    c.details_json = "{}";
    return c;
  };

  {
    CheckResult& c = add("files", "files: only the milestone's files are graded", "files");
    json rejected = json::array();
    for (const auto& [path, why] : b.files.rejected)
      rejected.push_back({{"path", path}, {"why", why}});
    c.details_json =
        json{{"accepted", b.files.accepted}, {"rejected", rejected}, {"missing", b.files.missing}}
            .dump();
    std::string out = "Graded files: ";
    for (std::size_t i = 0; i < b.files.accepted.size(); ++i) {
      out += (i > 0 ? ", " : "") + b.files.accepted[i];
    }
    if (b.files.accepted.empty()) out += "none";
    out += ".\n";
    for (const std::string& m : b.files.missing) {
      out +=
          "Not in the submission (the untouched stub is graded, so its checks fail): " + m + "\n";
    }
    if (b.files.rejected.empty()) {
      c.status = CheckStatus::passed;
      c.reason = "ok";
    } else {
      c.status = CheckStatus::failed;
      c.reason = "forbidden_file";
      out += "Ignored (only the milestone's files are graded; hand in only those):\n";
      for (const auto& [path, why] : b.files.rejected) out += "  " + path + ": " + why + "\n";
    }
    c.output = out;
  }

  const bool compiled = b.ok || b.reason == "forbidden_symbol";
  {
    CheckResult& c = add("build", "build: the submission compiles", "build");
    c.wall_s = b.wall_s;
    c.details_json = json{{"reason", b.reason}, {"log_file", "logs/build.log"}}.dump();
    if (compiled) {
      c.status = CheckStatus::passed;
      c.reason = "ok";
      c.output = "Your files compiled.";
    } else if (b.reason == "framework_build_failed") {
      c.status = CheckStatus::skipped;
      c.reason = "framework_build_failed";
      c.output =
          "The grader could not build its own copy of the framework, so your code was not "
          "graded. This is not your fault: tell the course staff.";
      result_.grader_error =
          "the pristine framework did not build; see " + (logs_ / "build.log").string();
    } else {
      c.status = CheckStatus::failed;
      c.reason = b.reason == "timeout"             ? "timeout"
                 : b.reason == "forbidden_include" ? "forbidden_include"
                                                   : "build_failed";
      std::string log = b.log;
      if (log.size() > 8000) {
        log = log.substr(0, 5000) + "\n[...]\n" + log.substr(log.size() - 2500);
      }
      std::string out = b.reason == "timeout" ? "The build ran past its time limit.\n"
                                              : "Your files did not compile.\n";
      for (const std::string& line : b.forbidden) out += line + "\n";
      out += "\nCompiler output:\n" + log +
             "\nBuild the same files yourself (cmake --build --preset " +
             std::string(std::any_of(specs_.begin(), specs_.end(),
                                     [](const MilestoneSpec& spec) { return spec.gpu; })
                             ? "default"
                             : "cpu") +
             ") and fix the first error first.";
      c.output = out;
    }
  }
  {
    CheckResult& c = add("symbols", "symbols: no library convolution in your code", "symbols");
    c.details_json = json{{"forbidden", b.forbidden}}.dump();
    if (b.reason == "forbidden_symbol" || b.reason == "forbidden_include") {
      c.status = CheckStatus::failed;
      c.reason = b.reason;
      std::string out = "Your code uses what it may not:\n";
      for (const std::string& line : b.forbidden) out += "  " + line + "\n";
      out +=
          "Write the convolution yourself; cuDNN, cuBLAS, the library convolution and the "
          "staff solutions are off limits.";
      c.output = out;
    } else if (b.ok) {
      c.status = CheckStatus::passed;
      c.reason = "ok";
      c.output = "No forbidden include or call.";
    } else {
      c.status = b.reason == "framework_build_failed" ? CheckStatus::skipped : CheckStatus::failed;
      c.reason = b.reason == "framework_build_failed" ? "framework_build_failed" : "build_failed";
      c.output = "Not checked: the build did not finish.";
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Running the harness

fs::path Grading::images_file(std::int64_t n) {
  if (auto it = image_files_.find(n); it != image_files_.end()) return it->second;
  if (n < 1 || n > test_.count) {
    throw Error("a check asks for " + std::to_string(n) + " images; the test set has " +
                std::to_string(test_.count));
  }
  data::IdxArray a;
  a.dims = {n, test_.rows, test_.cols};
  const auto bytes = static_cast<std::size_t>(n) * static_cast<std::size_t>(test_.rows) *
                     static_cast<std::size_t>(test_.cols);
  a.values.assign(test_.pixels.begin(), test_.pixels.begin() + static_cast<std::ptrdiff_t>(bytes));
  const fs::path f = work_ / ("images-" + std::to_string(n) + ".idx.gz");
  data::write_idx_gz(f, a);
  image_files_[n] = f;
  return f;
}

std::int64_t Grading::model_classes(const fs::path& file) {
  if (auto it = classes_.find(file.string()); it != classes_.end()) return it->second;
  const std::int64_t n = load_model(file).classes();
  classes_[file.string()] = n;
  return n;
}

WorkerOutcome Grading::run_worker(const std::string& log_id,
                                  const std::vector<std::string>& args, double wall_s,
                                  const std::vector<std::string>& prefix, bool with_team) {
  // One socket between the two: the referee gets one end, the team's process the other, and
  // each sees the other's end as the end of the socket.
  int ends[2] = {-1, -1};
  if (with_team && ::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, ends) != 0) {
    throw Error(std::string("cannot create the harness's socket: ") + std::strerror(errno));
  }
  // The team's process: the team's code and its harness only, in the sandbox.
  SandboxSpec team;
  team.argv = prefix;
  team.argv.push_back("./convlab-team");
  team.env = env_;
  team.inputs.emplace_back(build_.worker, "convlab-team");
  team.hide_paths = hide_;
  team.limits.wall_s = wall_s;
  // The team's code may use every core: the CPU-time and process (thread) limits scale.
  const double cores = std::max(1u, std::thread::hardware_concurrency());
  team.limits.cpu_s = std::max(600.0, wall_s * cores);
  team.limits.max_processes = std::max(256, static_cast<int>(4 * cores));
  team.keep_private_dir = opt_.keep_work;
  // GPU runs keep the whole (read-only) file system: the driver's files are not listed.
  team.uses_gpu = cuda_build_;
  if (!cuda_build_) team.visible_paths = std::vector<fs::path>{};
  team.pass_fd = ends[1];
  // The referee: trusted code from the framework build, outside the team's namespaces. It
  // outlives the team's limit, so that it can report a team that was killed.
  SandboxSpec referee;
  referee.argv = {build_.referee.string()};
  referee.argv.insert(referee.argv.end(), args.begin(), args.end());
  referee.env = env_;
  referee.use_namespaces = false;
  referee.drop_privileges = false;
  referee.limits.wall_s = wall_s + 60.0;
  referee.limits.cpu_s = 0;
  referee.limits.max_processes = 0;
  referee.limits.max_file_bytes = 0;
  referee.limits.max_memory_bytes = 0;  // trusted; it holds the whole test set's tensors
  referee.uses_gpu = cuda_build_;
  referee.pass_fd = ends[0];

  WorkerOutcome w;
  if (with_team) {
    std::exception_ptr team_error;
    std::thread team_thread([&] {
      try {
        w.run = run_sandboxed(team);
      } catch (...) {
        team_error = std::current_exception();
      }
    });
    try {
      w.referee = run_sandboxed(referee);
    } catch (...) {
      team_thread.join();
      throw;
    }
    team_thread.join();
    if (team_error) std::rethrow_exception(team_error);
  } else {
    w.referee = run_sandboxed(referee);
    w.run = w.referee;
  }
  last_run_ = w.run;
  last_limits_ = team.limits;
  if (opt_.keep_work && !w.run.private_dir.empty()) {
    say("  " + log_id + ": sandbox folder kept: " + w.run.private_dir.string());
  }
  if (with_team) {
    if (!w.run.stdout_text.empty()) {
      std::ofstream(logs_ / (log_name(log_id) + ".stdout.txt")) << w.run.stdout_text;
    }
    if (!w.run.stderr_text.empty()) {
      std::ofstream(logs_ / (log_name(log_id) + ".stderr.txt")) << w.run.stderr_text;
    }
  }
  if (!w.referee.stderr_text.empty()) {
    std::ofstream(logs_ / (log_name(log_id) + ".referee.txt")) << w.referee.stderr_text;
  }
  if (w.referee.channel_truncated) {
    w.doc_problem = "its result passed the size limit";
  } else if (w.referee.channel.empty()) {
    w.doc_problem = "it wrote no result (" + w.referee.describe() + ")";
  } else {
    try {
      json doc = json::parse(w.referee.channel);
      if (!doc.is_object() || doc.value("schema", "") != kCheckSchema || !doc.contains("status") ||
          !doc["status"].is_string()) {
        w.doc_problem = "its result is not a convlab-check document";
      } else {
        w.doc = std::move(doc);
      }
    } catch (const json::exception&) {
      w.doc_problem = "its result is not valid JSON";
    }
  }
  return w;
}

// The referee is the grader's own code: when it fails, the check is the grader's problem.
std::optional<Failure> Grading::referee_failure(const WorkerOutcome& w) const {
  std::string why;
  if (!w.doc) {
    why = "the referee " + w.doc_problem;
  } else if (w.status() == "referee_error") {
    why = "the referee failed: " + w.message();
  } else {
    return std::nullopt;
  }
  return Failure{"grader_error", "The grader could not complete this check (" + why +
                                     "). This is not your code's fault: tell the course staff.",
                 CheckStatus::skipped};
}

std::string Grading::run_command(const PlannedCheck& p, std::int64_t images) const {
  const Milestone& ms = p.spec->milestone;
  const std::string model =
      p.check.hidden ? "two-conv" : (p.check.model.empty() ? ms.default_model : p.check.model);
  std::string cmd = "convlab run " + ms.id + " " + model + " " + std::to_string(images);
  if (p.gpu && p.check.variant != ms.default_variant) cmd += " --variant " + p.check.variant;
  return cmd;
}

std::string Grading::debug_advice(const PlannedCheck& p) const {
  const std::string cmd = run_command(p, 100);
  if (p.gpu) {
    return "Run it yourself: `" + cmd + "`, then under compute-sanitizer: `compute-sanitizer " +
           "--tool memcheck build/default/reference/driver/" + cmd +
           "`; it names the kernel and the faulty access (build with the debug preset to get "
           "source lines).";
  }
  return "Run it yourself: `" + cmd +
         "`, then with the asan preset (cmake --preset asan && cmake --build --preset asan; "
         "build/asan/reference/driver/" +
         cmd + "): AddressSanitizer names the line of the faulty access.";
}

std::optional<Failure> Grading::failure_of(const WorkerOutcome& w, const PlannedCheck& p,
                                           bool sanitizer) const {
  const SandboxResult& r = w.run;
  const std::string cmd = run_command(p, p.check.images > 0 ? p.check.images : 100);
  // Hidden checks show no output of the run: the team's code could print the model with it.
  const auto with_tail = [&](std::string text, bool stdout_too) {
    if (p.check.hidden) return text;
    const std::string err = tail_lines(r.stderr_text, kStderrTailLines);
    const std::string out =
        tail_lines(r.stdout_text, sanitizer ? kSanitizerTailLines : kStderrTailLines);
    if (!err.empty()) text += "\n\nLast lines of stderr:\n" + indent(err);
    if ((stdout_too || err.empty()) && !out.empty()) {
      text += "\n\nLast lines of stdout:\n" + indent(out);
    }
    return text;
  };
  switch (r.outcome) {
    case Outcome::start_failed:
      return Failure{"grader_error",
                     "The check could not start (" + r.start_error +
                         "). This is not your code's fault: tell the course staff."};
    case Outcome::timed_out:
      return Failure{"timeout",
                     with_tail("The run " + r.describe() + ". Run `" + cmd +
                                   "` yourself: if it takes long, look for a loop that never "
                                   "ends or a launch that does far more work than it needs.",
                               false)};
    case Outcome::output_limit:
      return Failure{"output_limit",
                     with_tail("The run " + r.describe() +
                                   ". Remove the printing from your convolution (a printf in a "
                                   "kernel runs once per thread).",
                               true)};
    case Outcome::memory_limit:
      return Failure{"memory_limit",
                     with_tail("The run " + r.describe() + ". Run `" + cmd +
                                   "` under /usr/bin/time -v and look at its maximum resident "
                                   "size: allocate only what the convolution needs.",
                               false)};
    case Outcome::signaled:
      return Failure{"crash",
                     with_tail("The run was " + r.describe() + ". " + debug_advice(p), false)};
    case Outcome::exited:
      break;
  }
  if (auto f = referee_failure(w)) return f;
  if (sanitizer && r.exit_code == 99) {
    std::string text =
        "compute-sanitizer memcheck found invalid memory accesses in the run. Its report names "
        "the kernel, the access and the thread; fix the bounds check in that kernel. " +
        debug_advice(p);
    const std::string report = first_sanitizer_report(r.stdout_text + r.stderr_text, 30);
    if (!p.check.hidden && !report.empty()) {
      text += "\n\nThe first error compute-sanitizer reported:\n" + indent(report);
    }
    return Failure{"memory_error", text};
  }
  if (w.doc) {
    const std::string status = w.status();
    const std::string message = w.message();
    if (status == "not_implemented") return Failure{"not_implemented", message};
    if (status == "no_gpu") {
      return Failure{"no_gpu", "No usable GPU for this check: " + message, CheckStatus::skipped};
    }
    if (status == "cuda_error") {
      return Failure{"cuda_error",
                     with_tail("A CUDA call failed: " + message + "\n" + debug_advice(p), false)};
    }
    if (status == "error") {
      return Failure{"error", with_tail("Your code reported an error: " + message + "\nRun `" +
                                            cmd + "` to see it yourself.",
                                        false)};
    }
    if (status == "team_lost") {
      return Failure{"exit_code",
                     with_tail("Your code's process stopped serving the check before it was "
                                   "over (" + message + "; it " + r.describe() +
                                   "). Do not call exit() or abort(), and do not touch file "
                                   "descriptors you did not open; run `" + cmd +
                                   "` to see what happens.",
                               false)};
    }
    if (status != "ok") {
      return Failure{"no_result", "The harness reported an unknown status '" + status + "'."};
    }
    if (r.exit_code != 0) {
      return Failure{"exit_code",
                     with_tail("The run " + r.describe() +
                                   " after reporting its result: something in your code ends the "
                                   "process (exit() in a destructor or at exit?).",
                               false)};
    }
    return std::nullopt;
  }
  if (sanitizer && r.exit_code == 0) return std::nullopt;  // memcheck may not pass the channel on
  if (r.exit_code != 0) {
    return Failure{"exit_code",
                   with_tail("The run " + r.describe() +
                                 " before the harness could report a result. Do not call exit() "
                                 "or abort() in your code; run `" +
                                 cmd + "` to see what happens.",
                             false)};
  }
  return Failure{"no_result",
                 with_tail("The run exited without a usable result (" + w.doc_problem +
                               "). Your code must not write to file descriptor 3 or close it, and "
                               "must return normally.",
                           false)};
}

std::optional<Failure> Grading::gpu_unavailable(const PlannedCheck& p) {
  if (!p.gpu) return std::nullopt;
  if (!gpu_problem_) {
    say("probing the GPU");
    const WorkerOutcome w = run_worker("gpu-info", {"info"}, 60.0, {}, false);
    if (w.doc && w.status() == "ok" && w.doc->contains("gpu")) {
      const json& g = field(*w.doc, "gpu");
      result_.machine.gpu_name = g.value("name", "");
      result_.machine.gpu_driver = g.value("driver", "");
      result_.machine.cuda_driver = g.value("cuda_driver", "");
      gpu_problem_ = "";
      say("GPU: " + result_.machine.gpu_name);
    } else if (w.doc) {
      gpu_problem_ = w.message().empty() ? w.status() : w.message();
    } else {
      gpu_problem_ = "the GPU probe " + w.run.describe();
    }
#ifndef CONVLAB_HAVE_CUDA
    gpu_problem_ = "this grader was built without CUDA";
#endif
  }
  if (gpu_problem_->empty()) return std::nullopt;
  return Failure{"no_gpu",
                 "Not run: no usable GPU on the grading machine (" + *gpu_problem_ +
                     "). A GPU check never passes without a GPU; the course staff must grade "
                     "this milestone on a machine with an NVIDIA GPU.",
                 CheckStatus::skipped};
}

WorkerOutcome Grading::run_network(const PlannedCheck& p, const std::string& log_id, bool timed) {
  // The count: one pass on the real images. Timed: then warm-up and timed passes on fresh
  // inputs (noise from a seed of this grade), every call checked, the referee's clock.
  std::vector<std::string> args = {"network",
                                   "--model",
                                   p.model_file.string(),
                                   "--images",
                                   images_file(p.check.images).string(),
                                   "--variant",
                                   p.check.variant};
  if (timed) {
    const int runs = opt_.runs.value_or(p.spec->timed_runs);
    args.insert(args.end(), {"--runs", std::to_string(runs), "--reference", "--noise-seed",
                             std::to_string(result_.seed ^ kNoiseSeedSalt)});
  }
  return run_worker(log_id, args, time_limit(p));
}

std::optional<Failure> Grading::judge_predictions(const WorkerOutcome& w, const PlannedCheck& p,
                                                  CheckResult& c) {
  const std::int64_t n = p.check.images;
  const std::int64_t expected = p.check.expected_correct.value_or(-1);
  const json& passes = field(*w.doc, "passes");
  if (!passes.is_array() || passes.empty()) {
    return Failure{"no_result", "The harness returned no timed pass."};
  }
  const std::int64_t classes = model_classes(p.model_file);
  // Every timed pass is judged, not only the last: a result is only as good as its worst pass.
  std::int64_t correct = -1;
  std::size_t wrong_pass = 0;
  for (std::size_t pass = 0; pass < passes.size(); ++pass) {
    const json* preds = passes[pass].is_object() && passes[pass].contains("predictions")
                            ? &passes[pass]["predictions"]
                            : nullptr;
    if (preds == nullptr || !preds->is_array() || static_cast<std::int64_t>(preds->size()) != n) {
      return Failure{"no_result", "The harness returned no prediction for each of the " +
                                      std::to_string(n) + " images."};
    }
    std::int64_t count = 0;
    for (std::int64_t i = 0; i < n; ++i) {
      const json& v = (*preds)[static_cast<std::size_t>(i)];
      if (!v.is_number_integer() || v.get<std::int64_t>() < 0 || v.get<std::int64_t>() >= classes) {
        return Failure{"no_result", "The harness returned an invalid prediction for image " +
                                        std::to_string(i) + "."};
      }
      count += v.get<std::int64_t>() == test_.labels[static_cast<std::size_t>(i)];
    }
    if (correct < 0 || (correct == expected && count != expected)) {
      correct = count;
      wrong_pass = pass;
    }
  }
  c.correct = correct;
  if (correct == expected) return std::nullopt;
  std::string pass_text;
  if (passes.size() > 1) {
    pass_text = "In timed run " + std::to_string(wrong_pass + 1) + " of " +
                std::to_string(passes.size()) +
                " (each run gets the images in another order; "
                "every run must be right): ";
  }
  std::string text = pass_text + "Got " + std::to_string(correct) + " of " + std::to_string(n) +
                     " images right (" + accuracy(correct, n) + "); the model gives " +
                     std::to_string(expected) + " (" + accuracy(expected, n) + ").\n";
  if (p.check.hidden) {
    text +=
        "A hidden model runs layers of other shapes than the public models (other filter "
        "counts, more input channels, other filter and image sizes). Make your code correct "
        "for any ConvShape: run `" +
        run_command(p, 10000) + "` (two conv layers, C > 1) and read the element-wise check.";
  } else {
    text +=
        "Your convolution computes something other than the formula. Check the index "
        "arithmetic against the handout, and read the element-wise check: it names the first "
        "wrong outputs with their coordinates. Run `" +
        run_command(p, n) + "` to see the same count.";
  }
  return Failure{"wrong_count", text};
}

// ---------------------------------------------------------------------------------------------
// The checks

void Grading::check_network(PlannedCheck& p, CheckResult& c) {
  const WorkerOutcome w = run_network(p, p.check.id, p.timed);
  c.wall_s = w.run.wall_s;
  std::optional<Failure> f = failure_of(w, p, false);
  if (!f) f = judge_predictions(w, p, c);
  // The timed passes ran in the same check: a wrong timed call fails it too.
  if (!f && p.timed) f = judge_verification(*w.doc, p);
  if (p.timed) {
    timed_runs_[p.check.milestone + "/" + p.check.variant] = {w, f};
  }
  if (f) {
    c.status = f->status;
    c.reason = f->reason;
    c.output = f->output;
    return;
  }
  c.status = CheckStatus::passed;
  c.reason = "ok";
  c.score = c.max_score;
  c.output = std::to_string(*c.correct) + " of " + std::to_string(p.check.images) +
             " images right (" + accuracy(*c.correct, p.check.images) + "), as expected.";
}

void Grading::check_time(PlannedCheck& p, CheckResult& c) {
  const std::string key = p.check.milestone + "/" + p.check.variant;
  auto it = timed_runs_.find(key);
  if (it == timed_runs_.end()) {
    // The network check did not run (--only): time the default check here.
    CheckResult scratch = c;
    const WorkerOutcome w = run_network(p, p.check.id, true);
    std::optional<Failure> f = failure_of(w, p, false);
    if (!f) f = judge_predictions(w, p, scratch);
    c.correct = scratch.correct;
    it = timed_runs_.emplace(key, std::make_pair(w, f)).first;
  }
  const auto& [w, f] = it->second;
  c.wall_s = w.run.wall_s;
  if (f) {
    c.status = f->status;
    c.reason = f->reason;
    c.output = "No time: the timed run did not pass its correctness check.\n" + f->output;
    return;
  }
  if (auto v = judge_verification(*w.doc, p)) {
    c.status = v->status;
    c.reason = v->reason;
    c.output = v->output;
    return;
  }
  const json& t = field(*w.doc, "timing");
  c.correct = p.check.expected_correct;
  c.op_time_s = t.value("op_time_s", 0.0);
  c.op_time_median_s = t.value("op_time_median_s", 0.0);
  c.op_time_runs_s = t.value("op_time_runs_s", std::vector<double>{});
  json details = {{"runs", c.op_time_runs_s.size()},
                  {"clock", "referee"},
                  {"handshake_s", (*w.doc).value("handshake_s", json(nullptr))},
                  {"noise_seed", (*w.doc).value("noise_seed", json(nullptr))},
                  {"verification", (*w.doc).value("verification", json(nullptr))},
                  {"layers", t.value("layers", json::array())},
                  {"reference", (*w.doc).value("reference", json(nullptr))},
                  {"gpu", (*w.doc).value("gpu", json(nullptr))}};
  const json& ref = field(*w.doc, "reference");
  std::string ref_name = p.gpu ? "cuDNN" : "the library convolution";
  if (ref.is_object()) c.reference_time_s = ref.value("op_time_s", 0.0);
  c.status = CheckStatus::passed;
  c.reason = "ok";
  c.output = "Op Time " + fmt("%.6f", *c.op_time_s) + " s, the fastest of " +
             std::to_string(c.op_time_runs_s.size()) + " timed runs (median " +
             fmt("%.6f", *c.op_time_median_s) + " s)";
  if (c.reference_time_s && *c.reference_time_s > 0 && *c.op_time_s > 0) {
    const double speedup = *c.reference_time_s / *c.op_time_s;
    details["speedup"] = speedup;
    c.output += "; " + ref_name + " took " + fmt("%.6f", *c.reference_time_s) +
                " s in the same run: speedup " + fmt("%.2f", speedup) + "x";
    if (speedup > p.spec->flag_speedup_over) {
      result_.flags.push_back(p.check.variant + " (" + p.check.milestone + ") is " +
                              fmt("%.1f", speedup) + "x faster than " + ref_name + " on " +
                              p.check.model + ", " + std::to_string(p.check.images) +
                              " images: look at its code before trusting the time");
    }
  }
  if (*c.op_time_s <= 0.0) {
    result_.flags.push_back(p.check.variant + " (" + p.check.milestone +
                            ") reports an Op Time of zero");
  }
  c.output += ".";
  c.details_json = details.dump();
}

void Grading::check_elementwise(PlannedCheck& p, CheckResult& c) {
  const ElementwiseSpec& e = *p.spec->elementwise;
  std::vector<std::string> args = {"elementwise", "--variant", p.check.variant, "--seed",
                                   std::to_string(result_.seed)};
  for (const ConvShape& s : e.shapes) {
    args.push_back("--shape");
    args.push_back(shape_argument(s));
  }
  const WorkerOutcome w = run_worker(p.check.id, args, time_limit(p));
  c.wall_s = w.run.wall_s;
  if (auto f = failure_of(w, p, false)) {
    c.status = f->status;
    c.reason = f->reason;
    c.output = f->output;
    return;
  }
  const json& outputs = field(*w.doc, "outputs");
  if (!outputs.is_array() || outputs.size() != e.shapes.size()) {
    c.reason = "no_result";
    c.output = "The harness returned no output for each of the " + std::to_string(e.shapes.size()) +
               " shapes.";
    return;
  }
  json details = json::array();
  std::string failures;
  std::int64_t total = 0;
  double worst = 0.0;
  bool nan_seen = false;
  // Judges one output against its reference; false when the output is malformed.
  const auto judge = [&](const std::string& label, const json& encoded,
                         const std::vector<double>& want, const OutputDims& dims, json& d) -> bool {
    const auto got = encoded.is_string() ? decode_floats(encoded.get<std::string>()) : std::nullopt;
    if (!got || static_cast<std::int64_t>(got->size()) != dims.elements()) return false;
    const ElementwiseComparison cmp = compare_elementwise(*got, want, dims, e.atol, e.rtol);
    total += cmp.elements;
    d["elements"] = cmp.elements;
    d["mismatches"] = cmp.mismatches;
    d["non_finite"] = cmp.non_finite;
    d["worst"] = cmp.worst ? mismatch_json(*cmp.worst) : json(nullptr);
    json first = json::array();
    for (const ElementMismatch& m : cmp.first) first.push_back(mismatch_json(m));
    d["first"] = first;
    if (cmp.worst && std::isfinite(cmp.worst->error)) worst = std::max(worst, cmp.worst->error);
    if (cmp.ok) return true;
    nan_seen = nan_seen || cmp.non_finite > 0;
    failures += label + ", output " + dims.to_string() + ": " + std::to_string(cmp.mismatches) +
                " of " + std::to_string(cmp.elements) + " outputs wrong";
    if (cmp.non_finite > 0) {
      failures += " (" + std::to_string(cmp.non_finite) + " NaN or infinite)";
    }
    failures += ".\n  worst: " + describe_mismatch(*cmp.worst) + "\n  first mismatches:\n";
    for (const ElementMismatch& m : cmp.first) failures += "    " + describe_mismatch(m) + "\n";
    return true;
  };
  // A fused conv + tanh + max-pool launcher is judged too when the variant offers one and it
  // is written (its stub is optional).
  const std::string fused = w.doc->value("fused", "");
  const PoolShape pool{2, 2};
  for (std::size_t i = 0; i < e.shapes.size(); ++i) {
    const ConvShape& s = e.shapes[i];
    const std::string label =
        s.to_string() + (e.why[i].empty() ? std::string() : " (" + e.why[i] + ")");
    const json& o = outputs[i];
    const std::vector<float> x =
        elementwise_values(result_.seed, i, ElementwiseTensor::x, s.x_elements());
    const std::vector<float> k =
        elementwise_values(result_.seed, i, ElementwiseTensor::k, s.k_elements());
    const std::vector<double> want = conv_reference_double(s, x, k);
    json d = {{"shape", shape_json(s)}, {"why", e.why[i]}};
    if (!o.is_object() || !judge(label, o.value("y", json()), want, conv_output_dims(s), d)) {
      c.reason = "no_result";
      c.output = "The harness returned a malformed output for " + label + ".";
      return;
    }
    const bool fits = pool.size <= s.H_out() && pool.size <= s.W_out();
    if (fused == "ok" && fits) {
      json f = {{"pool", "2x2 stride 2"}};
      if (!judge("fused conv + tanh + max-pool, " + label, o.value("pooled", json()),
                 tanh_maxpool_reference(want, s, pool), pooled_output_dims(s, pool), f)) {
        c.reason = "no_result";
        c.output = "The harness returned a malformed fused output for " + label + ".";
        return;
      }
      d["fused"] = f;
    }
    details.push_back(d);
  }
  c.worst_error = worst;
  c.details_json = json{
      {"seed", result_.seed},
      {"atol", e.atol},
      {"rtol", e.rtol},
      {"fused", fused.empty() ? json(nullptr) : json(fused)},
      {"shapes",
       details}}.dump();
  std::string fused_note;
  if (fused == "ok") {
    fused_note = " Your fused conv + tanh + max-pool launcher was checked too.";
  } else if (fused == "not_implemented") {
    fused_note =
        " Your fused launcher is not written (optional): the network runs your plain "
        "launcher and the framework's tanh and max-pool.";
  }
  const std::string rule =
      "|got - want| <= " + points_text(e.atol) + " + " + points_text(e.rtol) + " |want|";
  if (failures.empty()) {
    c.status = CheckStatus::passed;
    c.reason = "ok";
    c.score = c.max_score;
    c.output = std::to_string(e.shapes.size()) + " shapes, " + std::to_string(total) +
               " outputs, every one within " + rule +
               " of a double-precision reference; the "
               "largest error was " +
               fmt("%.3g", worst) + "." + fused_note;
    return;
  }
  c.status = CheckStatus::failed;
  c.reason = "mismatch";
  c.output = "Outputs outside " + rule + " (inputs uniform in [-1, 1), seed " +
             std::to_string(result_.seed) + "):\n" + failures;
  if (nan_seen) {
    c.output +=
        "NaN means your code did not write that element on the second call: the harness fills "
        "y with NaN before every call. Check that your launch covers every output, including "
        "sizes that are not multiples of your tile, on every call.\n";
  }
  c.output +=
      "Compare your indexing with y[b][m][h][w] = sum over c, p, q of "
      "x[b][c][h+p][w+q] * k[m][c][p][q] at the coordinates above.";
}

void Grading::check_memcheck(PlannedCheck& p, CheckResult& c) {
  const auto sanitizer = find_program("compute-sanitizer", {"/usr/local/cuda/bin"});
  if (!sanitizer) {
    c.status = CheckStatus::skipped;
    c.reason = "skipped";
    c.output =
        "Not run: compute-sanitizer is not installed on the grading machine (it comes "
        "with the CUDA toolkit). Run it yourself: `compute-sanitizer --tool memcheck "
        "build/default/reference/driver/" +
        run_command(p, p.check.images) + "`.";
    return;
  }
  // Staged: the team's process copies into exactly sized buffers of its own, so the
  // sanitizer sees each tensor's bounds.
  const WorkerOutcome w = run_worker(
      p.check.id,
      {"network", "--model", p.model_file.string(), "--images",
       images_file(p.check.images).string(), "--variant", p.check.variant, "--staged"},
      time_limit(p), {sanitizer->string(), "--tool", "memcheck", "--error-exitcode", "99"});
  c.wall_s = w.run.wall_s;
  if (auto f = failure_of(w, p, true)) {
    c.status = f->status;
    c.reason = f->reason;
    c.output = f->output;
    return;
  }
  c.status = CheckStatus::passed;
  c.reason = "ok";
  c.score = c.max_score;
  c.output = "compute-sanitizer memcheck found no invalid memory access in " +
             std::to_string(p.check.images) + " images.";
}

void Grading::run_one(PlannedCheck& p, CheckResult& c) {
  if (!build_.ok) {
    c.status =
        build_.reason == "framework_build_failed" ? CheckStatus::skipped : CheckStatus::failed;
    c.reason = build_.reason == "framework_build_failed" ? "framework_build_failed"
               : build_.reason == "forbidden_symbol" || build_.reason == "forbidden_include"
                   ? build_.reason
                   : "build_failed";
    c.output = "Not run: the build did not succeed (see the build and symbols checks).";
    return;
  }
  if (auto f = gpu_unavailable(p)) {
    c.status = f->status;
    c.reason = f->reason;
    c.output = f->output;
    return;
  }
  if (p.check.kind == "network") {
    check_network(p, c);
  } else if (p.check.kind == "time") {
    check_time(p, c);
  } else if (p.check.kind == "elementwise") {
    check_elementwise(p, c);
  } else if (p.check.kind == "memcheck") {
    check_memcheck(p, c);
  }
}

void Grading::run_checks() {
  const std::size_t n = plan_.size();
  for (std::size_t i = 0; i < n; ++i) {
    PlannedCheck& p = plan_[i];
    CheckResult c = p.check;
    c.status = CheckStatus::failed;
    c.reason = "grader_error";
    c.score = 0.0;
    if (c.details_json.empty()) c.details_json = "{}";
    const auto t0 = std::chrono::steady_clock::now();
    try {
      run_one(p, c);
    } catch (const json::exception& e) {
      // Only the team's code, running in the harness's process, can make its result malformed.
      c.status = CheckStatus::failed;
      c.reason = "no_result";
      c.score = 0.0;
      c.output = std::string("The harness's result was malformed (") + e.what() +
                 "). Your code must not write to file descriptor 3.";
    } catch (const std::exception& e) {
      // The grader never fails because of a submission: this check fails instead.
      c.status = CheckStatus::failed;
      c.reason = "grader_error";
      c.score = 0.0;
      c.output = std::string("The grader could not run this check: ") + e.what() +
                 "\nThis is not necessarily your code's fault: tell the course staff.";
    }
    if (c.status != CheckStatus::passed) c.score = 0.0;
    if (c.wall_s == 0.0) {
      c.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    }
    char line[64];
    std::snprintf(line, sizeof line, "[%zu/%zu] ", i + 1, n);
    say(line + c.id + ": " + status_name(c.status) + " " + points_text(c.score) + "/" +
        points_text(c.max_score) + (c.reason == "ok" ? "" : " (" + c.reason + ")") +
        fmt(", %.1f s", c.wall_s));
    result_.checks.push_back(std::move(c));
  }
}

// ---------------------------------------------------------------------------------------------
// Results

void Grading::finish() {
  for (const CheckResult& c : result_.checks) {
    result_.score += c.score;
    result_.max_score += c.max_score;
  }
  // The ranked time: the last milestone's (final when grading all), and only when every
  // correctness check of its ranked variant passed.
  if (!specs_.empty()) {
    const MilestoneSpec& ranked = specs_.back();
    const Milestone& ms = ranked.milestone;
    result_.ranked_variant = ranked.ranked_variant;
    result_.ranked_model = ms.default_model;
    result_.ranked_images = ms.default_images;
    const CheckResult* time = nullptr;
    bool all_passed = true;
    for (const CheckResult& c : result_.checks) {
      if (c.milestone != ms.id || c.variant != ranked.ranked_variant) continue;
      if (c.kind == "time") time = &c;
      if ((c.kind == "network" || c.kind == "elementwise") && c.status != CheckStatus::passed) {
        all_passed = false;
      }
    }
    if (time != nullptr && time->status == CheckStatus::passed && all_passed && build_.ok) {
      result_.op_time_s = time->op_time_s;
      result_.op_time_median_s = time->op_time_median_s;
      result_.reference_time_s = time->reference_time_s;
      if (time->reference_time_s && time->op_time_s && *time->op_time_s > 0) {
        result_.speedup = *time->reference_time_s / *time->op_time_s;
      }
    }
  }

  json sandbox = json::object();
  SandboxFeatures features = last_run_ ? last_run_->features : probe_sandbox_features();
  sandbox["features"] = {{"network_namespace", features.network_namespace},
                         {"mount_namespace", features.mount_namespace},
                         {"pid_namespace", features.pid_namespace},
                         {"user_namespace", features.user_namespace},
                         {"read_only_root", features.read_only_root},
                         {"dropped_privileges", features.dropped_privileges},
                         {"ipc_namespace", features.ipc_namespace},
                         {"private_tmpfs", features.private_tmpfs},
                         {"allow_list_view", features.allow_list_view},
                         {"memory_limit", memory_limit_name(features.memory_limit)},
                         {"user", features.user}};
  if (last_limits_) {
    sandbox["limits"] = {{"wall_s", last_limits_->wall_s},
                         {"cpu_s", last_limits_->cpu_s},
                         {"max_processes", last_limits_->max_processes},
                         {"max_file_bytes", last_limits_->max_file_bytes},
                         {"max_output_bytes", last_limits_->max_output_bytes},
                         {"max_channel_bytes", last_limits_->max_channel_bytes},
                         {"max_memory_bytes", last_limits_->max_memory_bytes},
                         {"tmp_bytes", last_limits_->tmp_bytes},
                         {"tmp_inodes", last_limits_->tmp_inodes}};
  }
  std::vector<std::string> hidden;
  for (const fs::path& h : hide_) hidden.push_back(h.string());
  sandbox["hidden_paths"] = hidden;
  result_.sandbox_json = sandbox.dump();
  result_.duration_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
}

GradeResult Grading::run() {
  validate_and_prepare();
  say("grading " + result_.team + ", milestone " + opt_.milestone + ", seed " +
      std::to_string(result_.seed) + (result_.partial ? " (partial: --only)" : ""));
  try {
    build();
    add_build_checks();
    run_checks();
  } catch (...) {
    if (remove_work_) {
      std::error_code ec;
      fs::remove_all(work_, ec);
    }
    throw;
  }
  finish();
  if (remove_work_) {
    std::error_code ec;
    fs::remove_all(work_, ec);
  } else {
    say("work folder kept: " + work_.string());
  }
  write_reports(result_, out_);
#ifdef CONVLAB_HAVE_SQLITE
  if (opt_.db) {
    ResultsDb db(*opt_.db);
    const std::int64_t id = db.record(result_, report_json(result_));
    say("recorded as run " + std::to_string(id) + " in " + opt_.db->string());
  }
#endif
  say("reports: " + (out_ / "report.json").string() + ", " + (out_ / "results.json").string());
  return result_;
}

}  // namespace

GradeResult grade_submission(const GradeOptions& options, const ProgressFn& progress) {
  Grading g(options, progress);
  return g.run();
}

}  // namespace convlab::grader
