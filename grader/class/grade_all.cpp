#include "grader/class/grade_all.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdlib>
#include <ctime>
#include <deque>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "grader/class/child_process.hpp"
#include "grader/class/grade_all_detail.hpp"
#include "grader/class/slurm_commands.hpp"
#include "grader/grade/grade.hpp"
#include "reference/core/error.hpp"
#include "reference/core/files.hpp"
#include "reference/core/stopwatch.hpp"
#include "reference/core/text.hpp"
#include "reference/milestones/milestone.hpp"

namespace convlab::grader {

namespace fs = std::filesystem;
using nlohmann::json;
using Clock = std::chrono::steady_clock;

namespace {

volatile std::sig_atomic_t g_stop = 0;

// strerror(EAGAIN): what a check reports when it cannot start a thread or process because the
// sandbox user's process limit, which every sandbox of that user shares, was reached.
constexpr const char* kOutOfProcesses = "Resource temporarily unavailable";

}  // namespace

namespace detail {

std::vector<std::string> grade_argv(const GradeAllOptions& o, const TeamOutcome& t,
                                    const std::vector<fs::path>& class_folders,
                                    const fs::path& out) {
  std::vector<std::string> argv{"convlab",     "grade",     t.submission.string(),
                                "--milestone", o.milestone, "--team",
                                t.team,        "--out",     t.out.string()};
  auto add = [&](const char* flag, const std::string& value) {
    argv.emplace_back(flag);
    argv.push_back(value);
  };
  if (o.db) add("--db", o.db->string());
  for (const fs::path& m : o.model_dirs) add("--models", m.string());
  if (o.data) add("--data", o.data->string());
  if (o.seed) add("--seed", std::to_string(*o.seed));
  if (o.runs) add("--runs", std::to_string(*o.runs));
  if (o.cache) add("--cache", o.cache->string());
  for (const std::string& glob : o.only) add("--only", glob);
  if (o.allow_degraded) argv.emplace_back("--allow-degraded");
  for (const fs::path& other : class_folders) {
    if (other == t.submission) continue;
    add("--hide", other.string());
    add("--hide", (out / other.filename()).string());
  }
  return argv;
}

TeamOutcome team_from_json(const json& j) {
  auto opt = [&](const char* key) -> std::optional<double> {
    if (auto it = j.find(key); it != j.end() && it->is_number()) return it->get<double>();
    return std::nullopt;
  };
  TeamOutcome t;
  t.team = j.value("team", "");
  t.submission = j.value("submission", "");
  t.out = j.value("out", "");
  t.graded = j.value("graded", false);
  t.error = j.value("error", "");
  t.exit_code = j.value("exit_code", -1);
  t.wall_s = j.value("wall_s", 0.0);
  t.score = opt("score").value_or(0.0);
  t.max_score = opt("max_score").value_or(0.0);
  t.op_time_s = opt("op_time_s");
  t.op_time_median_s = opt("op_time_median_s");
  t.speedup = opt("speedup");
  t.checks_passed = j.value("checks_passed", 0);
  t.checks_total = j.value("checks_total", 0);
  t.flags = j.value("flags", std::vector<std::string>{});
  t.regraded_alone = j.value("regraded_alone", false);
  t.gpu = j.value("gpu", "");
  t.slurm_task = j.value("slurm_task", "");
  t.resubmitted = j.value("resubmitted", false);
  return t;
}

}  // namespace detail

namespace {

using namespace detail;

bool is_under(const fs::path& path, const fs::path& dir) {
  auto [d, p] = std::mismatch(dir.begin(), dir.end(), path.begin(), path.end());
  return d == dir.end();
}

// The rows of OUT/summary.json for `milestone` whose team is still in the class and is not
// graded now; nothing when there is no such file (or it cannot be read).
std::vector<TeamOutcome> earlier_rows(const fs::path& out, const std::string& milestone,
                                      const std::vector<fs::path>& class_folders,
                                      const std::vector<fs::path>& graded_now) {
  std::vector<TeamOutcome> rows;
  std::ifstream in(out / "summary.json");
  if (!in) return rows;
  try {
    const json s = json::parse(in);
    if (s.value("schema", "") != "convlab-class-summary/1" ||
        s.value("milestone", "") != milestone) {
      return rows;
    }
    for (const json& row : s.at("teams")) {
      TeamOutcome t = team_from_json(row);
      auto is_team = [&](const fs::path& f) {
        return strip_control_chars(f.filename().string()) == t.team;
      };
      if (std::none_of(class_folders.begin(), class_folders.end(), is_team) ||
          std::any_of(graded_now.begin(), graded_now.end(), is_team)) {
        continue;
      }
      rows.push_back(std::move(t));
    }
  } catch (const json::exception&) {
    rows.clear();  // not a summary this grader wrote: start a new one
  }
  return rows;
}

}  // namespace

namespace {

std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\n\r") == std::string::npos) return s;
  std::string q = "\"";
  for (char c : s) q += c == '"' ? std::string("\"\"") : std::string(1, c);
  return q + "\"";
}

std::string number(double v, int precision) {
  std::ostringstream s;
  s.precision(precision);
  s << v;
  return s.str();
}

std::string optional_number(const std::optional<double>& v) {
  return v ? number(*v, 9) : std::string();
}

// "76.815 ms", "2.346 s".
std::string format_time(const std::optional<double>& s) {
  if (!s) return "-";
  std::ostringstream o;
  o.setf(std::ios::fixed);
  o.precision(3);
  if (*s >= 1.0) {
    o << *s << " s";
  } else {
    o << *s * 1e3 << " ms";
  }
  return o.str();
}

std::string format_score(double v) {
  std::ostringstream o;
  o << (std::abs(v - std::round(v)) < 1e-9 ? std::round(v) : v);
  return o.str();
}

std::optional<double> get_number(const json& j, const char* key) {
  if (auto it = j.find(key); it != j.end() && it->is_number()) return it->get<double>();
  return std::nullopt;
}

// Who runs: one ChildProcess per team in flight.
struct Running {
  std::size_t index;  // into summary.teams
  std::unique_ptr<ChildProcess> child;
  Clock::time_point start;
  int slot = -1;  // the GPU it holds (index into the GPU list), -1: none
};

}  // namespace

int ClassSummary::graded() const {
  return static_cast<int>(
      std::count_if(teams.begin(), teams.end(), [](const TeamOutcome& t) { return t.graded; }));
}

void request_grade_all_stop() {
  g_stop = 1;
}

bool detail::stop_requested() {
  return g_stop != 0;
}

void detail::clear_stop() {
  g_stop = 0;
}

std::vector<std::string> visible_gpus() {
  std::vector<std::string> gpus;
  if (const char* env = std::getenv("CUDA_VISIBLE_DEVICES"); env != nullptr) {
    std::stringstream list(env);
    for (std::string id; std::getline(list, id, ',');) {
      id.erase(0, id.find_first_not_of(" \t"));
      id.erase(id.find_last_not_of(" \t") + 1);
      if (!id.empty()) gpus.push_back(id);
    }
    return gpus;
  }
  std::error_code ec;
  int n = 0;
  for (fs::directory_iterator it("/proc/driver/nvidia/gpus", ec), end; !ec && it != end;
       it.increment(ec)) {
    ++n;
  }
  for (int i = 0; i < n; ++i) gpus.push_back(std::to_string(i));
  return gpus;
}

bool is_gpu_milestone(const std::string& milestone) {
  const fs::path root = convlab_root();
  const std::vector<std::string> graded = graded_milestone_ids(root);
  if (milestone != "all" && std::find(graded.begin(), graded.end(), milestone) == graded.end()) {
    std::string choices;
    for (const std::string& g : graded) choices += g + ", ";
    if (!choices.empty()) choices.resize(choices.size() - 2);
    throw Error("unknown milestone '" + milestone + "' for grading: choose " + choices + " or all");
  }
  // "all" runs on the GPU when one of its milestones does.
  for (const std::string& id : graded) {
    if (milestone != "all" && id != milestone) continue;
    const Milestone ms = load_milestone(root, id);
    if (std::find(ms.devices.begin(), ms.devices.end(), "gpu") != ms.devices.end()) return true;
  }
  return false;
}

std::vector<fs::path> find_team_folders(const fs::path& submissions, const fs::path& exclude) {
  if (!fs::is_directory(submissions)) {
    throw Error("no such folder: " + submissions.string() +
                " (grade-all takes a folder holding one subfolder per team)");
  }
  std::vector<fs::path> teams;
  for (const fs::directory_entry& e : fs::directory_iterator(submissions)) {
    const std::string name = e.path().filename().string();
    if (!e.is_directory() || name.starts_with(".")) continue;
    if (!exclude.empty() && fs::weakly_canonical(e.path()) == exclude) continue;
    teams.push_back(e.path());
  }
  if (teams.empty()) {
    throw Error(submissions.string() +
                " holds no team folder: put each team's submission in a subfolder named after "
                "the team (e.g. " +
                submissions.string() + "/team-01/student/m2/conv_cpu.cpp)");
  }
  std::sort(teams.begin(), teams.end());
  return teams;
}

bool read_team_report(TeamOutcome& t) {
  const fs::path file = t.out / "report.json";
  std::ifstream in(file);
  if (!in) {
    t.error = "no report.json was written";
    return false;
  }
  json r;
  try {
    in >> r;
  } catch (const json::exception& e) {
    t.error = "report.json is not valid JSON (" + std::string(e.what()) + ")";
    return false;
  }
  const auto schema = r.is_object() ? r.find("schema") : r.end();
  if (!r.is_object() || schema == r.end() || *schema != "convlab-grade-report/1") {
    t.error = "report.json is not a grade report (schema convlab-grade-report/1)";
    return false;
  }
  const auto ge = r.find("grader_error");
  t.grader_error = ge != r.end() && ge->is_string() ? ge->get<std::string>() : std::string();
  t.score = get_number(r, "score").value_or(0.0);
  t.max_score = get_number(r, "max_score").value_or(0.0);
  t.op_time_s = get_number(r, "op_time_s");
  t.op_time_median_s = get_number(r, "op_time_median_s");
  t.speedup = get_number(r, "speedup");
  t.flags.clear();
  if (auto f = r.find("flags"); f != r.end() && f->is_array()) {
    for (const json& s : *f) {
      if (s.is_string()) t.flags.push_back(s.get<std::string>());
    }
  }
  t.checks_passed = t.checks_total = 0;
  t.contended = false;
  if (auto c = r.find("checks"); c != r.end() && c->is_array()) {
    for (const json& check : *c) {
      ++t.checks_total;
      const auto out = check.is_object() ? check.find("output") : check.end();
      if (out != check.end() && out->is_string() &&
          out->get<std::string>().find(kOutOfProcesses) != std::string::npos) {
        t.contended = true;
      }
      if (check.is_object() && check.contains("status") && check["status"] == "passed") {
        ++t.checks_passed;
      }
    }
  }
  return true;
}

detail::ClassPlan detail::plan_class(const GradeAllOptions& options) {
  ClassPlan plan;
  plan.gpu = is_gpu_milestone(options.milestone);
  if (options.out.empty()) throw Error("grade-all needs --out: the folder for the results");
  plan.submissions = fs::weakly_canonical(fs::absolute(options.submissions));
  plan.out = fs::weakly_canonical(fs::absolute(options.out));
  if (plan.out == plan.submissions) {
    throw Error("--out must not be the submissions folder itself; choose another folder");
  }
  plan.class_folders = find_team_folders(plan.submissions, plan.out);
  plan.folders = plan.class_folders;

  if (!options.teams.empty()) {
    std::vector<fs::path> chosen;
    for (const std::string& name : options.teams) {
      auto it = std::find_if(plan.folders.begin(), plan.folders.end(),
                             [&](const fs::path& f) { return f.filename() == name; });
      if (it == plan.folders.end()) {
        throw Error("no team '" + name + "' in " + plan.submissions.string() +
                    " (a team is a subfolder; --team takes its name)");
      }
      if (std::find(chosen.begin(), chosen.end(), *it) == chosen.end()) chosen.push_back(*it);
    }
    std::sort(chosen.begin(), chosen.end());
    plan.folders = chosen;
  }
  for (const fs::path& f : plan.class_folders) {
    // Removing a team's old results must never touch a submission.
    const fs::path team_out = plan.out / f.filename();
    if (is_under(plan.submissions, team_out) || is_under(team_out, f)) {
      throw Error("--out " + plan.out.string() + " overlaps the submission of team " +
                  f.filename().string() + "; choose a folder outside " + plan.submissions.string());
    }
  }
  // Re-grading some teams keeps the other teams' rows of the summary.
  if (!options.teams.empty()) {
    plan.kept = earlier_rows(plan.out, options.milestone, plan.class_folders, plan.folders);
  }
  std::error_code ec;
  fs::create_directories(plan.out, ec);
  if (ec || !fs::is_directory(plan.out)) {
    throw Error("cannot create --out " + plan.out.string() + (ec ? ": " + ec.message() : ""));
  }
  return plan;
}

TeamOutcome detail::new_outcome(const fs::path& folder, const fs::path& out) {
  TeamOutcome t;
  // Printed and stored without control characters; its folders keep their own names.
  t.team = strip_control_chars(folder.filename().string());
  t.submission = folder;
  t.out = out / folder.filename();
  return t;
}

void detail::start_team_folder(const TeamOutcome& t, const std::vector<std::string>& argv) {
  std::error_code ec;
  fs::remove_all(t.out, ec);
  fs::create_directories(t.out, ec);
  std::ofstream header(t.out / "grade.log");
  header << "$";
  for (const std::string& a : argv) header << " " << shell_quote(a);
  header << "\n" << std::flush;
}

void detail::judge(TeamOutcome& t, const ChildExit& exit, double team_timeout_s) {
  t.exit_code = exit.signal == 0 && !exit.timed_out ? exit.exit_code : -1;
  t.error.clear();
  const bool report = read_team_report(t);
  if (exit.timed_out) {
    t.graded = false;
    t.error = "convlab grade ran past " + number(team_timeout_s, 6) +
              " s (--team-timeout) and was killed";
  } else if (report && !t.grader_error.empty()) {
    // `convlab grade` could not complete the grade for reasons of its own (exit 2).
    t.graded = false;
    t.error = "the grader failed: " + t.grader_error;
  } else if (exit.signal != 0 || (exit.exit_code != 0 && exit.exit_code != kExitIncomplete)) {
    // kExitIncomplete is a grade too: its report says what did not run, and it never ranks.
    // The submission's faults are failed checks in a report; a grade that ends otherwise is
    // the grader's own failure, even where it left a report behind.
    t.graded = false;
    t.error = "convlab grade " + exit.describe() + (report ? " after writing its report" : "");
  } else {
    t.graded = report;
  }
  if (!t.graded) t.error += "; see " + (t.out / "grade.log").string();
}

void detail::write_atomically(const fs::path& path, const std::string& text) {
  const fs::path tmp = path.string() + ".tmp";
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    f << text;
    f.close();
    if (!f) throw Error("cannot write " + path.string());
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec) throw Error("cannot write " + path.string() + ": " + ec.message());
}

void detail::write_summary(ClassSummary& summary, std::vector<TeamOutcome> kept,
                           const fs::path& out) {
  for (TeamOutcome& t : kept) summary.teams.push_back(std::move(t));
  std::sort(summary.teams.begin(), summary.teams.end(),
            [](const TeamOutcome& a, const TeamOutcome& b) { return a.team < b.team; });
  write_atomically(out / "summary.csv", summary_csv(summary));
  write_atomically(out / "summary.json", summary_json(summary));
}

namespace {

// Grades a class on this machine: up to `jobs` graders at a time (on GPU milestones one per
// GPU, each pinned to its GPU, so that no team is timed while another team's code runs on the
// same GPU; without a GPU list, one at a time). Each pass of step() starts, polls and finishes
// graders; run() loops until the queue is empty.
class LocalRun {
 public:
  LocalRun(const GradeAllOptions& options, const GradeAllEvents& events, const ClassPlan& plan,
           ClassSummary& summary)
      : options_(options),
        events_(events),
        plan_(plan),
        summary_(summary),
        exe_(options.grader.value_or("/proc/self/exe")) {
    if (plan.gpu) gpus_ = options.gpus.empty() ? visible_gpus() : options.gpus;
    gpu_busy_.assign(gpus_.size(), false);
    jobs_ = options.jobs > 0
                ? options.jobs
                : std::max(1, static_cast<int>(std::thread::hardware_concurrency()) / 2);
    if (plan.gpu) jobs_ = std::max<int>(1, static_cast<int>(gpus_.size()));
    summary.jobs = jobs_;
    summary.gpus = gpus_;
    total_ = static_cast<int>(summary.teams.size());
    for (std::size_t i = 0; i < summary.teams.size(); ++i) queue_.push_back(i);
    // With several graders, the first team is graded alone: it builds the framework cache
    // that the others then reuse instead of all waiting on one build.
    warming_ = jobs_ > 1 && total_ > 1;
  }

  int jobs() const { return jobs_; }
  int total() const { return total_; }
  void run();

 private:
  void interrupt();
  void start_team(std::size_t i);
  void poll_running();
  void finish(Running& r, const ChildExit& exit);
  void queue_regrades();
  void counted_finish(const TeamOutcome& t) {
    if (!regrading_) ++done_;
    if (events_.finished) events_.finished(t, done_, total_);
  }

  const GradeAllOptions& options_;
  const GradeAllEvents& events_;
  const ClassPlan& plan_;
  ClassSummary& summary_;
  const fs::path exe_;
  std::vector<std::string> gpus_;
  std::vector<bool> gpu_busy_;
  int jobs_ = 1, total_ = 0, done_ = 0;
  std::vector<Running> running_;
  std::deque<std::size_t> queue_;
  bool warming_ = false;
  // Then the teams whose checks ran out of processes while others were graded are graded
  // again, one at a time (see TeamOutcome::contended).
  bool regrading_ = false;
};

void LocalRun::run() {
  while (!queue_.empty() || !running_.empty()) {
    if (g_stop != 0) {
      interrupt();
      break;
    }
    const std::size_t capacity = warming_ || regrading_ ? 1 : static_cast<std::size_t>(jobs_);
    while (running_.size() < capacity && !queue_.empty()) {
      const std::size_t i = queue_.front();
      queue_.pop_front();
      start_team(i);
    }
    poll_running();
    if (queue_.empty() && running_.empty() && !regrading_ && jobs_ > 1) queue_regrades();
    if (events_.tick) events_.tick();
    if (!running_.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
}

void LocalRun::interrupt() {
  summary_.interrupted = true;
  for (Running& r : running_) {
    r.child->kill_group(false);
    TeamOutcome& t = summary_.teams[r.index];
    t.graded = false;
    t.wall_s = seconds_since(r.start);
    t.error = "interrupted while grading";
  }
  running_.clear();
  if (!regrading_) {
    for (std::size_t i : queue_)
      summary_.teams[i].error = "not graded: the class run was interrupted";
  }
}

void LocalRun::start_team(std::size_t i) {
  TeamOutcome& t = summary_.teams[i];
  const std::vector<std::string> argv = grade_argv(options_, t, plan_.class_folders, plan_.out);
  start_team_folder(t, argv);
  Running r{i, nullptr, Clock::now()};
  std::vector<std::pair<std::string, std::string>> env;
  if (!gpus_.empty()) {
    r.slot =
        static_cast<int>(std::find(gpu_busy_.begin(), gpu_busy_.end(), false) - gpu_busy_.begin());
    t.gpu = gpus_[r.slot];
    env.emplace_back("CUDA_VISIBLE_DEVICES", t.gpu);
  }
  try {
    r.child = std::make_unique<ChildProcess>(argv, t.out / "grade.log", exe_, env);
  } catch (const Error& e) {
    t.graded = false;
    t.error = e.what();
    counted_finish(t);
    return;
  }
  if (r.slot >= 0) gpu_busy_[r.slot] = true;
  if (events_.started) events_.started(t.team);
  running_.push_back(std::move(r));
}

void LocalRun::poll_running() {
  for (auto it = running_.begin(); it != running_.end();) {
    std::optional<ChildExit> exit = it->child->poll();
    if (!exit && options_.team_timeout_s > 0 &&
        seconds_since(it->start) > options_.team_timeout_s) {
      exit = it->child->kill_group(true);
    }
    if (exit) {
      finish(*it, *exit);
      it = running_.erase(it);
      warming_ = false;
    } else {
      ++it;
    }
  }
}

void LocalRun::finish(Running& r, const ChildExit& exit) {
  TeamOutcome& t = summary_.teams[r.index];
  t.wall_s = seconds_since(r.start);
  if (r.slot >= 0) gpu_busy_[r.slot] = false;
  judge(t, exit, options_.team_timeout_s);
  counted_finish(t);
}

void LocalRun::queue_regrades() {
  regrading_ = true;
  for (std::size_t i = 0; i < summary_.teams.size(); ++i) {
    TeamOutcome& t = summary_.teams[i];
    if (t.graded && t.contended) {
      t.regraded_alone = true;
      queue_.push_back(i);
    }
  }
}

}  // namespace

ClassSummary grade_all(const GradeAllOptions& options, const GradeAllEvents& events) {
  clear_stop();
  const ClassPlan plan = plan_class(options);
  ClassSummary summary;
  summary.milestone = options.milestone;
  summary.submissions = plan.submissions;
  summary.started_at = utc_now();
  for (const fs::path& f : plan.folders) summary.teams.push_back(new_outcome(f, plan.out));

  LocalRun run(options, events, plan, summary);
  if (events.begin) events.begin(run.total(), run.jobs());
  const auto start = Clock::now();
  run.run();
  summary.duration_s = seconds_since(start);
  write_summary(summary, plan.kept, plan.out);
  return summary;
}

std::string summary_csv(const ClassSummary& s) {
  std::ostringstream o;
  o << "team,status,score,max_score,op_time_s,op_time_median_s,speedup,checks_passed,"
       "checks_total,flags,wall_s,exit_code,error,regraded_alone,gpu,slurm_task,resubmitted\n";
  for (const TeamOutcome& t : s.teams) {
    std::string flags;
    for (const std::string& f : t.flags) flags += (flags.empty() ? "" : "; ") + f;
    o << csv_field(t.team) << "," << t.status() << "," << (t.graded ? number(t.score, 9) : "")
      << "," << (t.graded ? number(t.max_score, 9) : "") << "," << optional_number(t.op_time_s)
      << "," << optional_number(t.op_time_median_s) << "," << optional_number(t.speedup) << ","
      << t.checks_passed << "," << t.checks_total << "," << csv_field(flags) << ","
      << number(t.wall_s, 6) << "," << t.exit_code << "," << csv_field(t.error) << ","
      << (t.regraded_alone ? "true" : "false") << "," << csv_field(t.gpu) << ","
      << csv_field(t.slurm_task) << "," << (t.resubmitted ? "true" : "false") << "\n";
  }
  return o.str();
}

json detail::team_json(const TeamOutcome& t) {
  auto opt = [](const std::optional<double>& v) { return v ? json(*v) : json(nullptr); };
  return {{"team", t.team},
          {"status", t.status()},
          {"graded", t.graded},
          {"score", t.graded ? json(t.score) : json(nullptr)},
          {"max_score", t.graded ? json(t.max_score) : json(nullptr)},
          {"op_time_s", opt(t.op_time_s)},
          {"op_time_median_s", opt(t.op_time_median_s)},
          {"speedup", opt(t.speedup)},
          {"checks_passed", t.checks_passed},
          {"checks_total", t.checks_total},
          {"flags", t.flags},
          {"regraded_alone", t.regraded_alone},
          {"gpu", t.gpu},
          {"slurm_task", t.slurm_task},
          {"resubmitted", t.resubmitted},
          {"wall_s", t.wall_s},
          {"exit_code", t.exit_code},
          {"error", t.error},
          {"submission", t.submission.string()},
          {"out", t.out.string()}};
}

std::string summary_json(const ClassSummary& s) {
  json teams = json::array();
  for (const TeamOutcome& t : s.teams) teams.push_back(team_json(t));
  json j{{"schema", "convlab-class-summary/1"},
         {"milestone", s.milestone},
         {"submissions", s.submissions.string()},
         {"started_at", s.started_at},
         {"duration_s", s.duration_s},
         {"jobs", s.jobs},
         {"gpus", s.gpus},
         {"interrupted", s.interrupted},
         {"total", s.teams.size()},
         {"graded", s.graded()},
         {"teams", teams}};
  if (!s.slurm_jobs.empty()) j["slurm_jobs"] = s.slurm_jobs;
  return j.dump(2) + "\n";
}

std::string summary_table(const ClassSummary& s) {
  std::size_t w = 4;
  for (const TeamOutcome& t : s.teams) w = std::max(w, t.team.size());
  auto pad = [](const std::string& text, std::size_t width) {
    return text + std::string(text.size() < width ? width - text.size() : 1, ' ');
  };
  auto row = [&](const std::string& team, const std::string& score, const std::string& time,
                 const std::string& status, const std::string& notes) {
    std::string line = pad(team, w + 2) + pad(score, 12) + pad(time, 13) + pad(status, 14) + notes;
    while (!line.empty() && line.back() == ' ') line.pop_back();
    return line + "\n";
  };
  std::string text = row("team", "score", "op time", "status", "notes");
  for (const TeamOutcome& t : s.teams) {
    std::string notes;
    if (!t.graded) {
      notes = t.error;
    } else {
      for (const std::string& f : t.flags) notes += (notes.empty() ? "look: " : "; ") + f;
      if (t.resubmitted) {
        notes += std::string(notes.empty() ? "" : "; ") +
                 "graded by a second Slurm task (the first was lost to the cluster)";
      }
      if (t.regraded_alone) {
        notes += std::string(notes.empty() ? "" : "; ") +
                 "graded again alone (a check ran out of processes while others were graded)";
      }
      if (t.checks_total > t.checks_passed) {
        notes += (notes.empty() ? "" : "; ") + std::to_string(t.checks_total - t.checks_passed) +
                 " of " + std::to_string(t.checks_total) + " checks not passed";
      }
    }
    text += row(t.team, t.graded ? format_score(t.score) + "/" + format_score(t.max_score) : "-",
                t.graded ? format_time(t.op_time_s) : "-", t.status(), notes);
  }
  return text;
}

}  // namespace convlab::grader
