// The orchestrator of `convlab grade`: validate, plan, build, run every check through its
// kind (check_kinds.cpp), rank, and write the reports.
#include <fnmatch.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <ctime>
#include <exception>
#include <fstream>
#include <numeric>
#include <random>
#include <thread>

#include "grader/grade/grading.hpp"
#include "grader/grade/report.hpp"
#include "grader/worker/protocol.hpp"
#include "reference/conv/variants.hpp"
#include "reference/core/error.hpp"
#include "reference/core/files.hpp"
#include "reference/core/stopwatch.hpp"
#include "reference/core/text.hpp"
#include "reference/milestones/milestone.hpp"

#ifdef CONVLAB_HAVE_SQLITE
#include "grader/db/results_db.hpp"
#endif

namespace convlab::grader {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

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
                          "student", "grader/worker", "grader/builder"}) {
    add_tree(rel);
  }
  for (const std::string& id : milestone_ids(root))
    add_tree(fs::path("milestones") / id / "checks.json");
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

}  // namespace

// ---------------------------------------------------------------------------------------------
// Preparation

void Grading::validate_options() {
  start_ = std::chrono::steady_clock::now();
  result_.started_at = utc_now();
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
  if (opt_.build_memory_mib && (*opt_.build_memory_mib < 256 || *opt_.build_memory_mib > 65536)) {
    throw Error("--build-memory must be between 256 and 65536 MiB, got " +
                std::to_string(*opt_.build_memory_mib));
  }
}

void Grading::load_plan() {
  specs_ = load_milestone_specs(root_, opt_.milestone);
  for (const MilestoneSpec& s : specs_) {
    for (const std::string& f : s.milestone.team_writes) {
      if (std::find(allowed_.begin(), allowed_.end(), f) == allowed_.end()) allowed_.push_back(f);
    }
    for (const std::string& f : s.milestone.team_folders) {
      if (std::find(allowed_folders_.begin(), allowed_folders_.end(), f) ==
          allowed_folders_.end()) {
        allowed_folders_.push_back(f);
      }
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
  if (opt_.time_networks) {
    for (PlannedCheck& p : plan_) p.timed = p.timed || p.check.kind == "network";
  }
}

void Grading::prepare_output() {
  std::error_code ec;
#ifndef CONVLAB_HAVE_SQLITE
  if (opt_.db) {
    throw Error(
        "--db needs the results database, and this convlab was built without SQLite: "
        "install libsqlite3-dev and configure again, or grade without --db");
  }
#else
  if (opt_.db) ResultsDb check_it_opens(*opt_.db);  // a bad file fails now, not after grading
#endif

  out_ = opt_.out.empty()
             ? default_out_dir(result_.submission, result_.team, opt_.milestone, fs::current_path())
             : opt_.out;
  logs_ = out_ / "logs";
  fs::create_directories(logs_, ec);
  if (ec || ::access(out_.c_str(), W_OK) != 0) {
    throw Error("cannot write to --out " + out_.string() + ": choose a writable folder");
  }
  cache_ = opt_.cache.value_or(default_cache_dir());
}

void Grading::prepare_isolation() {
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
  // GPU indices in PCI bus order, as the team's assigned GPU is chosen (assign_gpu()).
  env_["CUDA_DEVICE_ORDER"] = "PCI_BUS_ID";

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
  req.allowed_folders = allowed_folders_;
  req.framework_root = root_;
  req.work_dir = work_ / "build";
  req.cache_dir = cache_;
  req.cuda = cuda_build_;
  req.hide_paths = hide_;
  if (opt_.build_memory_mib) {
    req.memory_limit_bytes = static_cast<std::uint64_t>(*opt_.build_memory_mib) << 20;
  }
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
  // Judged from the build alone, before any check runs.
  static const char* const kBuildChecks[][2] = {
      {"files", "files: only the milestone's files are graded"},
      {"build", "build: the submission compiles"},
      {"symbols", "symbols: no library convolution in your code"}};
  for (const auto& [kind, name] : kBuildChecks) {
    CheckResult& c = result_.checks.emplace_back();
    c.id = kind;
    c.name = name;
    c.kind = kind;
    c.milestone = opt_.milestone;
    c.details_json = "{}";
    PlannedCheck p;
    p.check = c;
    check_kind(kind).run(*this, p, c);
    // A grader built without CUDA compiles no .cu file: the team's GPU files were neither
    // compiled nor scanned, which "passed" would hide.
    const bool gpu =
        std::any_of(specs_.begin(), specs_.end(), [](const MilestoneSpec& s) { return s.gpu; });
    if (gpu && !cuda_build_ && c.status == CheckStatus::passed && c.kind != "files") {
      c.status = CheckStatus::skipped;
      c.reason = "no_cuda";
      c.output =
          "Your .cu files were not compiled here: this grader was built without CUDA (the "
          "cpu preset). On the course's GPU machine: cmake --preset default && cmake "
          "--build --preset default, then grade again.";
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Running the checks

void Grading::run_one(PlannedCheck& p, CheckResult& c) {
  const CheckKind& kind = check_kind_of(p);
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
    apply_failure(*f, c);
    return;
  }
  kind.run(*this, p, c);
}

// Runs `body`, which fills `c`, whatever happens in it: a check's failure never stops the grade.
template <typename Body>
void guarded(CheckResult& c, Body body) {
  try {
    body();
  } catch (const json::exception& e) {
    // Only the team's code, running in the harness's process, can make its result malformed.
    c.status = CheckStatus::failed;
    c.reason = "no_result";
    c.output = std::string("The harness's result was malformed (") + e.what() +
               "). Your code must not write to file descriptor 3.";
  } catch (const std::exception& e) {
    // The grader never fails because of a submission: this check fails instead.
    c.status = CheckStatus::failed;
    c.reason = "grader_error";
    c.output = std::string("The grader could not run this check: ") + e.what() +
               "\nThis is not necessarily your code's fault: tell the course staff.";
  }
  if (c.status != CheckStatus::passed) c.score = 0.0;
}

CheckResult Grading::run_planned(std::size_t i) {
  PlannedCheck& p = plan_[i];
  CheckResult c = p.check;
  c.status = CheckStatus::failed;
  c.reason = "grader_error";
  c.score = 0.0;
  if (c.details_json.empty()) c.details_json = "{}";
  const auto t0 = std::chrono::steady_clock::now();
  guarded(c, [&] { run_one(p, c); });
  if (c.wall_s == 0.0) c.wall_s = seconds_since(t0);
  return c;
}

void Grading::timed_stage(std::size_t i, CheckResult& c) {
  guarded(c, [&] { time_network(*this, plan_[i], c); });
}

void Grading::report_check(std::size_t i, const CheckResult& c) const {
  char line[64];
  std::snprintf(line, sizeof line, "[%zu/%zu] ", i + 1, plan_.size());
  const bool not_run = c.status == CheckStatus::skipped;
  say(line + c.id + ": " +
      (not_run ? std::string("not run -")
               : status_name(c.status) + std::string(" ") + points_text(c.score)) +
      "/" + points_text(c.max_score) + (c.reason == "ok" ? "" : " (" + c.reason + ")") +
      fmt(", %.1f s", c.wall_s));
}

// The time checks run after every other check, alone; so do the timed passes of the network
// checks they read (timed_stage).
bool Grading::runs_alone(const PlannedCheck& p) const { return p.check.kind == "time"; }

namespace {

// What a check is expected to cost, to start the longest first so that the checks sharing the
// machine end together: a memcheck (compute-sanitizer) is the slowest, then networks by image
// count; everything else is short.
double expected_cost(const PlannedCheck& p) {
  if (p.check.kind == "memcheck") return 1e9 + p.check.images;
  if (p.check.kind == "network") return p.check.images;
  return 0.0;
}

}  // namespace

int Grading::check_jobs() const {
  if (opt_.check_jobs) return *opt_.check_jobs;
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  // Two at least: a check waits on its referee and its team process in turn.
  return std::clamp(cores / 4, 2, 4);
}

void Grading::run_checks() {
  const std::size_t n = plan_.size();
  std::vector<std::optional<CheckResult>> done(n);
  // The GPU is probed once, before any check can run beside another.
  if (build_.ok) {
    for (const PlannedCheck& p : plan_) {
      if (p.gpu) {
        gpu_unavailable(p);
        break;
      }
    }
  }
  // 1. Every check but the time checks, several at once: a timed network check makes its count
  // here. Sharing the machine must never cost a team points: a check that ran out of time or
  // GPU memory beside others runs again alone, and that run counts.
  std::vector<std::size_t> rest, alone;
  for (std::size_t i = 0; i < n; ++i) (runs_alone(plan_[i]) ? alone : rest).push_back(i);
  const auto finished = [&](std::size_t i, CheckResult c) {
    // A timed network check is reported once its timed passes have run (step 2).
    if (!plan_[i].timed) report_check(i, c);
    done[i] = std::move(c);
  };
  const int jobs = std::min<int>(check_jobs(), static_cast<int>(rest.size()));
  std::vector<std::size_t> again;
  if (jobs <= 1) {
    for (const std::size_t i : rest) finished(i, run_planned(i));
  } else {
    std::vector<std::size_t> order = rest;
    std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
      return expected_cost(plan_[a]) > expected_cost(plan_[b]);
    });
    std::atomic<std::size_t> next{0};
    std::mutex again_mutex;
    std::vector<std::thread> pool;
    for (int t = 0; t < jobs; ++t) {
      pool.emplace_back([&] {
        for (std::size_t k = next++; k < order.size(); k = next++) {
          const std::size_t i = order[k];
          CheckResult c = run_planned(i);
          if (c.reason == "timeout" || c.reason == "gpu_memory") {
            const std::lock_guard lock(again_mutex);
            again.push_back(i);
            continue;
          }
          finished(i, std::move(c));
        }
      });
    }
    for (std::thread& t : pool) t.join();
    std::sort(again.begin(), again.end());
    for (const std::size_t i : again) {
      say("  " + plan_[i].check.id +
          ": ran out of time or GPU memory beside other checks; "
          "running it again alone");
      finished(i, run_planned(i));
    }
  }
  // 2. The ranked time, with nothing else of the grade running: the timed passes of each timed
  // network check whose count passed, then the time checks that read them, in order.
  for (const std::size_t i : rest) {
    if (!plan_[i].timed) continue;
    timed_stage(i, *done[i]);
    report_check(i, *done[i]);
  }
  for (const std::size_t i : alone) {
    done[i] = run_planned(i);
    report_check(i, *done[i]);
  }
  for (std::optional<CheckResult>& c : done) result_.checks.push_back(std::move(*c));
}

// ---------------------------------------------------------------------------------------------
// Results

void Grading::rank() {
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
}

void Grading::note_not_run() {
  // Skipped checks, one line per reason, in the order they ran.
  std::vector<std::string> reasons;
  for (const CheckResult& c : result_.checks) {
    if (c.status != CheckStatus::skipped) continue;
    result_.points_not_checked += c.max_score;
    if (std::find(reasons.begin(), reasons.end(), c.reason) == reasons.end()) {
      reasons.push_back(c.reason);
    }
  }
  for (const std::string& reason : reasons) {
    int count = 0;
    double points = 0.0;
    std::string why;
    for (const CheckResult& c : result_.checks) {
      if (c.status != CheckStatus::skipped || c.reason != reason) continue;
      ++count;
      points += c.max_score;
      if (why.empty()) why = c.output.substr(0, c.output.find('\n'));
    }
    result_.not_run.push_back(std::to_string(count) + (count == 1 ? " check, " : " checks, ") +
                              points_text(points) + " points (" + reason + "): " + why);
  }
  // Hidden models are staff-only: a team's own grade never has them.
  const double hidden_points = std::accumulate(
      specs_.begin(), specs_.end(), 0.0,
      [](double sum, const MilestoneSpec& s) { return std::max(sum, s.hidden_model_points); });
  const bool kit = !solutions_available();
  if (hidden_.empty() && hidden_points > 0) {
    result_.not_run.push_back(
        "hidden models: the course's grade also runs your code on staff models of other layer "
        "shapes (" +
        points_text(hidden_points) + " points each), which " +
        (kit ? "the starter kit does not hold" : "this grade was not given (--models)") +
        "; the element-wise check and the public model two-conv try other shapes here");
  }
  result_.incomplete = !reasons.empty() || (kit && hidden_.empty() && hidden_points > 0);
  if (result_.incomplete) result_.partial = true;
}

void Grading::finish() {
  for (const CheckResult& c : result_.checks) {
    result_.score += c.score;
    result_.max_score += c.max_score;
  }
  note_not_run();
  rank();

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
  result_.duration_s = seconds_since(start_);
}

GradeResult Grading::run() {
  validate_options();
  load_plan();
  prepare_output();
  prepare_isolation();
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

GradeResult grade_submission(const GradeOptions& options, const ProgressFn& progress) {
  Grading g(options, progress);
  return g.run();
}

}  // namespace convlab::grader
