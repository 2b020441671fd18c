#include "grader/class/slurm.hpp"

#include <unistd.h>

#include <csignal>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <thread>

#include "grader/class/child_process.hpp"
#include "grader/class/grade_all_detail.hpp"
#include "reference/core/error.hpp"
#include "reference/core/files.hpp"
#include "reference/core/stopwatch.hpp"
#ifdef CONVLAB_HAVE_SQLITE
#include "grader/class/ingest.hpp"
#endif

namespace convlab::grader {

namespace fs = std::filesystem;
using nlohmann::json;
using Clock = std::chrono::steady_clock;
using namespace detail;

namespace {

// The grader's own files in --out: hidden, so that no team folder can be named like them.
constexpr const char* kSlurmDir = ".slurm";
constexpr const char* kTeamsFile = "teams.txt";
constexpr const char* kScriptFile = "grade.sbatch";
constexpr const char* kTaskFile = "task.json";
// Looks at the queue that fail in a row before the follower gives up (the tasks go on).
constexpr int kMaxQueueFailures = 30;

// The convlab that runs the tasks: this executable, by its real path (the nodes see it there
// when it lives on the shared file system).
fs::path self_exe() {
  std::error_code ec;
  const fs::path p = fs::read_symlink("/proc/self/exe", ec);
  return ec ? fs::path("convlab") : p;
}

// The team names of a class run, refused where a line of teams.txt cannot hold them.
void check_team_names(const std::vector<fs::path>& folders) {
  for (const fs::path& f : folders) {
    const std::string name = f.filename().string();
    if (std::any_of(name.begin(), name.end(),
                    [](unsigned char c) { return c < 0x20 || c == 0x7f; })) {
      throw Error("team folder '" + f.string() +
                  "' has a control character in its name; rename it before grading with "
                  "--slurm");
    }
  }
}

std::string job_name(const std::string& milestone) {
  return "convlab-" + milestone;
}

// Every #SBATCH line and the task's command; `tasks` array indices 0..tasks-1.
std::string script_text(const GradeAllOptions& o, const SlurmOptions& s, const ClassPlan& plan,
                        int tasks) {
  const fs::path slurm_dir = plan.out / kSlurmDir;
  std::string gres = s.gres;
  if (!plan.gpu && !gres.empty()) {
    throw Error("--gres " + gres + ": " + o.milestone +
                " runs on the CPU, so its tasks ask for no GPU; leave --gres out");
  }
  if (plan.gpu && gres.empty()) gres = "gpu:1";
  check_sbatch_path(plan.out, "--out");
  const fs::path exe = self_exe();

  std::ostringstream t;
  t << "#!/bin/bash\n"
    << "# convlab grade-all --slurm: milestone " << o.milestone << ", " << tasks << " team"
    << (tasks == 1 ? "" : "s") << " of " << plan.submissions.string() << ".\n"
    << "# One array task per team: task N grades the team on line N+1 of\n"
    << "# " << (slurm_dir / kTeamsFile).string() << " and writes only that team's folder in\n"
    << "# " << plan.out.string() << " (report.json, task.json, grade.log); the grade-all that\n"
    << "# submitted this script merges them and is the only one to write the database.\n"
    << "#SBATCH --job-name=" << job_name(o.milestone) << "\n"
    << "#SBATCH --array=0-" << tasks - 1;
  if (s.max_parallel > 0) t << "%" << s.max_parallel;
  t << "\n"
    << "#SBATCH --ntasks=1\n"
    // grade-all resubmits a lost task itself, once, and counts it; Slurm's own requeue would
    // hide it.
    << "#SBATCH --no-requeue\n"
    << "#SBATCH --output=" << (slurm_dir / "logs" / "task-%A_%a.log").string() << "\n";
  if (!s.partition.empty()) t << "#SBATCH --partition=" << s.partition << "\n";
  if (!s.account.empty()) t << "#SBATCH --account=" << s.account << "\n";
  if (s.time_min) t << "#SBATCH --time=" << *s.time_min << "\n";
  if (!gres.empty()) t << "#SBATCH --gres=" << gres << "\n";
  for (const std::string& extra : s.sbatch_options) t << "#SBATCH " << extra << "\n";

  std::vector<std::string> argv{exe.string(), "grade-all", plan.submissions.string(), "--milestone",
                                o.milestone,  "--out",     plan.out.string()};
  auto add = [&](const char* flag, const std::string& value) {
    argv.emplace_back(flag);
    argv.push_back(value);
  };
  for (const fs::path& m : o.model_dirs) add("--models", m.string());
  if (o.data) add("--data", o.data->string());
  if (o.seed) add("--seed", std::to_string(*o.seed));
  if (o.runs) add("--runs", std::to_string(*o.runs));
  if (o.cache) add("--cache", o.cache->string());
  for (const std::string& glob : o.only) add("--only", glob);
  std::ostringstream timeout;
  timeout << o.team_timeout_s;
  add("--team-timeout", timeout.str());
  if (o.grader) add("--grader", o.grader->string());
  t << "exec";
  for (const std::string& a : argv) t << " " << shell_quote(a);
  t << " --slurm-task \"$SLURM_ARRAY_TASK_ID\"\n";
  return t.str();
}

// One team of the class as the follower sees it.
struct Track {
  std::size_t index = 0;  // into summary.teams
  std::string job;        // the array it runs in now
  int task = 0;           // its index there (always its line in teams.txt)
  int attempts = 1;       // 2 after a resubmission
  enum class Phase { queued, running, done, failed } phase = Phase::queued;
  std::optional<Clock::time_point> completed_at;  // COMPLETED seen, task.json not yet
};

// task.json of a team, when the task wrote one that reads as a summary row.
std::optional<TeamOutcome> read_task_file(const fs::path& team_out) {
  const fs::path file = team_out / kTaskFile;
  std::error_code ec;
  if (!fs::is_regular_file(fs::symlink_status(file, ec))) return std::nullopt;
  try {
    const json j = json::parse(try_read_file(file).value_or(""));
    if (!j.is_object()) return std::nullopt;
    return team_from_json(j);
  } catch (const json::exception&) {
    return std::nullopt;
  }
}

}  // namespace

std::string slurm_script(const GradeAllOptions& options, const SlurmOptions& slurm) {
  // The plan without creating --out: a dry run writes nothing.
  GradeAllOptions o = options;
  const bool gpu = is_gpu_milestone(o.milestone);
  if (o.out.empty()) throw Error("grade-all needs --out: the folder for the results");
  ClassPlan plan;
  plan.gpu = gpu;
  plan.submissions = fs::weakly_canonical(fs::absolute(o.submissions));
  plan.out = fs::weakly_canonical(fs::absolute(o.out));
  plan.class_folders = find_team_folders(plan.submissions, plan.out);
  int tasks = static_cast<int>(plan.class_folders.size());
  if (!o.teams.empty()) {
    for (const std::string& name : o.teams) {
      if (std::none_of(plan.class_folders.begin(), plan.class_folders.end(),
                       [&](const fs::path& f) { return f.filename() == name; })) {
        throw Error("no team '" + name + "' in " + plan.submissions.string() +
                    " (a team is a subfolder; --team takes its name)");
      }
    }
    tasks = static_cast<int>(std::set(o.teams.begin(), o.teams.end()).size());
  }
  return script_text(o, slurm, plan, tasks);
}

namespace {

// Follows one class run on Slurm: submits the array job (one task per team), looks at the
// queue until every task has a result or has failed, and resubmits, once, a task the cluster
// lost. Each look is one pass of look(); its steps are the member functions below.
class SlurmRun {
 public:
  SlurmRun(const SlurmOptions& slurm, const GradeAllEvents& events, const fs::path& out,
           ClassSummary& summary)
      : slurm_(slurm),
        events_(events),
        slurm_dir_(out / kSlurmDir),
        summary_(summary),
        total_(static_cast<int>(summary.teams.size())) {}

  void submit_all();
  // Looks until every task is finished or the run is interrupted.
  void follow();

 private:
  // Tasks that left the queue, by "JOB_TASK", as scontrol shows them; jobs it could not show.
  struct Ended {
    bool asked = false;
    std::map<std::string, SlurmTaskState> tasks;
    std::set<std::string> unreadable;
  };

  static bool finished(const Track& tr) {
    return tr.phase == Track::Phase::done || tr.phase == Track::Phase::failed;
  }
  fs::path script_file() const { return slurm_dir_ / kScriptFile; }
  void note(const std::string& line) const {
    if (events_.note) events_.note(line);
  }
  std::set<std::string> live_jobs() const;
  bool look();
  std::optional<std::map<std::string, std::string>> queued_tasks(const std::set<std::string>& live);
  void settle(Track& tr, const std::map<std::string, std::string>& active,
              const std::set<std::string>& live, Ended& ended, std::vector<Track*>& lost);
  bool take_result(Track& tr, const std::string& id);
  void ask_scontrol(const std::set<std::string>& live, Ended& ended) const;
  void judge_ended(Track& tr, const std::string& id, const Ended& ended, std::vector<Track*>& lost);
  void resubmit(const std::vector<Track*>& lost, const Ended& ended);
  void cancel();
  void fail(Track& tr, const std::string& why);
  void report_status();
  void sleep_a_poll() const;

  const SlurmOptions& slurm_;
  const GradeAllEvents& events_;
  const fs::path slurm_dir_;
  ClassSummary& summary_;
  const int total_;
  std::vector<Track> tracks_;
  int done_ = 0, failed_ = 0, resubmitted_ = 0, queue_failures_ = 0;
  std::string last_status_;
};

void SlurmRun::submit_all() {
  const std::string job = sbatch(script_file());
  summary_.slurm_jobs.push_back(job);
  note("submitted Slurm job " + job + ": " + std::to_string(total_) + " array task" +
       (total_ == 1 ? "" : "s") + ", one per team (script: " + script_file().string() + ")");
  for (std::size_t i = 0; i < summary_.teams.size(); ++i) {
    Track tr;
    tr.index = i;
    tr.job = job;
    tr.task = static_cast<int>(i);
    tracks_.push_back(tr);
  }
}

void SlurmRun::follow() {
  while (look()) sleep_a_poll();
  report_status();
}

std::set<std::string> SlurmRun::live_jobs() const {
  std::set<std::string> live;
  for (const Track& tr : tracks_) {
    if (!finished(tr)) live.insert(tr.job);
  }
  return live;
}

// One look at the queue; false when there is nothing left to wait for.
bool SlurmRun::look() {
  if (stop_requested()) {
    cancel();
    return false;
  }
  const std::set<std::string> live = live_jobs();
  if (live.empty()) return false;
  const auto active = queued_tasks(live);
  if (!active) return true;  // the queue could not be read this time: look again
  Ended ended;
  std::vector<Track*> lost;
  for (Track& tr : tracks_) {
    if (!finished(tr)) settle(tr, *active, live, ended, lost);
  }
  if (!lost.empty()) resubmit(lost, ended);
  report_status();
  if (events_.tick) events_.tick();
  return !std::all_of(tracks_.begin(), tracks_.end(), finished);
}

// What is still queued or running ("JOB_TASK" -> state), or nullopt when squeue failed (it
// throws after kMaxQueueFailures failures in a row).
std::optional<std::map<std::string, std::string>> SlurmRun::queued_tasks(
    const std::set<std::string>& live) {
  const QueueLook sq = squeue(live);
  if (!sq.ok) {
    if (++queue_failures_ >= kMaxQueueFailures) {
      throw Error("cannot read the Slurm queue (squeue: " + sq.error + "); the tasks of job " +
                  summary_.slurm_jobs.front() +
                  " may still run: when they end, load their reports with `convlab ingest " +
                  slurm_dir_.parent_path().string() + " --db FILE`");
    }
    return std::nullopt;
  }
  queue_failures_ = 0;
  std::map<std::string, std::string> active;
  for (const SlurmTaskState& s : sq.queued) active[slurm_task_id(s.job, s.task)] = s.state;
  return active;
}

// A task not yet finished: still in the queue, done (its task.json), or ended without one.
void SlurmRun::settle(Track& tr, const std::map<std::string, std::string>& active,
                      const std::set<std::string>& live, Ended& ended, std::vector<Track*>& lost) {
  const std::string id = slurm_task_id(tr.job, tr.task);
  if (auto a = active.find(id); a != active.end()) {
    tr.phase = a->second == "PENDING" ? Track::Phase::queued : Track::Phase::running;
    return;
  }
  if (take_result(tr, id)) return;
  if (!ended.asked) ask_scontrol(live, ended);
  if (ended.unreadable.contains(tr.job)) return;
  judge_ended(tr, id, ended, lost);
}

// The task's result, when it wrote one: how the grade ended from task.json, the figures from
// the report it validates.
bool SlurmRun::take_result(Track& tr, const std::string& id) {
  TeamOutcome& t = summary_.teams[tr.index];
  const std::optional<TeamOutcome> row = read_task_file(t.out);
  if (!row) return false;
  t.graded = row->graded;
  t.error = row->error;
  t.exit_code = row->exit_code;
  t.wall_s = row->wall_s;
  t.gpu = row->gpu;
  t.slurm_task = id;
  t.resubmitted = tr.attempts > 1;
  const bool report = read_team_report(t);  // sets error when there is none
  if (t.graded && !report) {
    t.graded = false;
    t.error = "the task said graded, but " + t.error + "; see " + (t.out / "grade.log").string();
  } else {
    t.error = row->error;
  }
  tr.phase = Track::Phase::done;
  ++done_;
  if (events_.finished) events_.finished(t, done_ + failed_, total_);
  return true;
}

void SlurmRun::ask_scontrol(const std::set<std::string>& live, Ended& ended) const {
  ended.asked = true;
  for (const std::string& job : live) {
    const EndLook look = job_end(job);
    if (!look.ok) ended.unreadable.insert(job);
    for (const SlurmTaskState& s : look.ended) ended.tasks[slurm_task_id(s.job, s.task)] = s;
  }
}

// A task out of the queue with no task.json: between two looks, completed (its file may lag),
// lost to the cluster (resubmitted once) or failed.
void SlurmRun::judge_ended(Track& tr, const std::string& id, const Ended& ended,
                           std::vector<Track*>& lost) {
  const auto e = ended.tasks.find(id);
  const std::string state = e != ended.tasks.end() ? e->second.state : "";
  if (is_between_states(state)) return;  // the next look tells
  const std::string exit_code = e != ended.tasks.end() ? e->second.exit_code : "";
  if (state == "COMPLETED") {
    // The task wrote task.json before it exited 0: wait for the file system to show it.
    if (!tr.completed_at) tr.completed_at = Clock::now();
    if (seconds_since(*tr.completed_at) < slurm_.result_grace_s) return;
    fail(tr, "Slurm task " + id + " completed, but its " + std::string(kTaskFile) +
                 " never appeared in " + summary_.teams[tr.index].out.string() +
                 " (is --out on a file system every node shares?)");
    return;
  }
  // Unknown: the controller no longer knows the task (purged): lost as well.
  const bool cluster = state.empty() || is_cluster_failure(state);
  if (cluster && tr.attempts == 1) {
    lost.push_back(&tr);
    return;
  }
  fail(tr, "Slurm task " + id + " ended " + (state.empty() ? "out of sight" : state) +
               (exit_code.empty() ? "" : " (exit " + exit_code + ")") +
               (cluster ? " for the second time" : "") + " without a result");
}

void SlurmRun::resubmit(const std::vector<Track*>& lost, const Ended& ended) {
  std::string array, which;
  for (const Track* tr : lost) {
    if (!array.empty()) array += ',';
    array += std::to_string(tr->task);
    const auto e = ended.tasks.find(slurm_task_id(tr->job, tr->task));
    if (!which.empty()) which += ", ";
    which += slurm_task_id(tr->job, tr->task);
    which += ' ';
    which += e != ended.tasks.end() ? e->second.state : "lost";
  }
  if (slurm_.max_parallel > 0) array += "%" + std::to_string(slurm_.max_parallel);
  const std::string job = sbatch(script_file(), {"--array=" + array});
  summary_.slurm_jobs.push_back(job);
  std::error_code ec;
  for (Track* tr : lost) {
    // The lost task's partial results go; the new task starts clean.
    fs::remove_all(summary_.teams[tr->index].out, ec);
    fs::create_directories(summary_.teams[tr->index].out, ec);
    tr->job = job;
    tr->attempts = 2;
    tr->phase = Track::Phase::queued;
    tr->completed_at.reset();
    ++resubmitted_;
  }
  note("resubmitted " + std::to_string(lost.size()) + " task" + (lost.size() == 1 ? "" : "s") +
       " lost to the cluster (" + which + ") as job " + job);
}

void SlurmRun::cancel() {
  summary_.interrupted = true;
  for (const std::string& job : summary_.slurm_jobs) {
    scancel(job);
  }
  for (const Track& tr : tracks_) {
    if (!finished(tr)) {
      summary_.teams[tr.index].error =
          "not graded: the class run was interrupted (its Slurm task was cancelled)";
    }
  }
}

void SlurmRun::fail(Track& tr, const std::string& why) {
  TeamOutcome& t = summary_.teams[tr.index];
  tr.phase = Track::Phase::failed;
  t.graded = false;
  t.slurm_task = slurm_task_id(tr.job, tr.task);
  t.resubmitted = tr.attempts > 1;
  t.error = why + "; see " + (slurm_dir_ / "logs" / ("task-" + t.slurm_task + ".log")).string();
  ++failed_;
  if (events_.finished) events_.finished(t, done_ + failed_, total_);
}

void SlurmRun::report_status() {
  int queued = 0, running = 0;
  for (const Track& tr : tracks_) {
    queued += tr.phase == Track::Phase::queued;
    running += tr.phase == Track::Phase::running;
  }
  std::string jobs;
  for (const std::string& j : summary_.slurm_jobs) {
    if (!jobs.empty()) jobs += '+';
    jobs += j;
  }
  std::ostringstream line;
  line << "slurm job " << jobs << ": " << queued << " queued, " << running << " running, " << done_
       << " done, " << failed_ << " failed of " << total_;
  if (resubmitted_ > 0) line << " (" << resubmitted_ << " resubmitted)";
  if (line.str() != last_status_ && events_.status) events_.status(line.str());
  last_status_ = line.str();
}

// Sleeps one poll interval in short steps, so that Ctrl-C is answered at once.
void SlurmRun::sleep_a_poll() const {
  const auto wake = Clock::now() + std::chrono::duration<double>(slurm_.poll_s);
  while (Clock::now() < wake && !stop_requested()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

void require_slurm_tools(const GradeAllOptions& options) {
#ifndef CONVLAB_HAVE_SQLITE
  if (options.db) {
    throw Error(
        "--db needs the results database, and this convlab was built without SQLite: install "
        "libsqlite3-dev and configure again, or grade without --db");
  }
#else
  (void)options;
#endif
  require_slurm_commands("leave --slurm out");
}

// The teams' folders (old results removed: an old task.json must not read as new), teams.txt
// and the batch script, written before the job starts.
void prepare_slurm_files(const ClassPlan& plan, const std::string& script, ClassSummary& summary) {
  const fs::path slurm_dir = plan.out / kSlurmDir;
  std::error_code ec;
  fs::create_directories(slurm_dir / "logs", ec);
  std::string teams_text;
  for (const fs::path& f : plan.folders) {
    TeamOutcome t = new_outcome(f, plan.out);
    fs::remove_all(t.out, ec);
    fs::create_directories(t.out, ec);
    teams_text += t.team + "\n";
    summary.teams.push_back(std::move(t));
  }
  write_atomically(slurm_dir / kTeamsFile, teams_text);
  const fs::path script_file = slurm_dir / kScriptFile;
  write_atomically(script_file, script);
  fs::permissions(script_file, fs::perms::owner_all | fs::perms::group_read, ec);
}

#ifdef CONVLAB_HAVE_SQLITE
// The one writer: every report the tasks wrote goes into the database now.
void ingest_class(const fs::path& out, const fs::path& db, ClassSummary& summary,
                  const GradeAllEvents& events) {
  std::error_code ec;
  std::vector<std::string> with_report;
  for (const TeamOutcome& t : summary.teams) {
    if (fs::exists(fs::symlink_status(t.out / "report.json", ec))) with_report.push_back(t.team);
  }
  if (with_report.empty()) return;
  const IngestSummary in = ingest_reports(out, db, with_report);
  for (const IngestedFolder& f : in.folders) {
    if (f.outcome != IngestOutcome::rejected) continue;
    for (TeamOutcome& t : summary.teams) {
      if (t.team == f.team && t.graded) {
        t.graded = false;
        t.error = "its report was not ingested: " + f.reason;
      }
    }
  }
  if (events.note) {
    events.note("ingested into " + db.string() + ": " +
                std::to_string(in.count(IngestOutcome::added)) + " added, " +
                std::to_string(in.count(IngestOutcome::already)) + " already there, " +
                std::to_string(in.count(IngestOutcome::rejected)) + " rejected");
  }
}
#endif

}  // namespace

ClassSummary grade_all_slurm(const GradeAllOptions& options, const SlurmOptions& slurm,
                             const GradeAllEvents& events) {
  clear_stop();
  require_slurm_tools(options);
  const ClassPlan plan = plan_class(options);
  check_team_names(plan.folders);
  const int total = static_cast<int>(plan.folders.size());
  const std::string script = script_text(options, slurm, plan, total);

  ClassSummary summary;
  summary.milestone = options.milestone;
  summary.submissions = plan.submissions;
  summary.started_at = utc_now();
  summary.jobs = slurm.max_parallel > 0 ? std::min(slurm.max_parallel, total) : total;
  prepare_slurm_files(plan, script, summary);

  if (events.begin) events.begin(total, summary.jobs);
  const auto start = Clock::now();
  SlurmRun run(slurm, events, plan.out, summary);
  run.submit_all();
  run.follow();
#ifdef CONVLAB_HAVE_SQLITE
  if (options.db) ingest_class(plan.out, *options.db, summary, events);
#endif
  summary.duration_s = seconds_since(start);
  write_summary(summary, plan.kept, plan.out);
  return summary;
}

int run_slurm_task(const GradeAllOptions& options, int index) {
  clear_stop();
  if (options.db) {
    throw Error(
        "a Slurm task never writes the database (--db): the grade-all that submitted "
        "the job ingests the reports");
  }
  const fs::path submissions = fs::weakly_canonical(fs::absolute(options.submissions));
  const fs::path out = fs::weakly_canonical(fs::absolute(options.out));
  const fs::path list = out / kSlurmDir / kTeamsFile;
  std::ifstream in(list);
  if (!in) throw Error("cannot read " + list.string() + ": the task list grade-all --slurm wrote");
  std::vector<std::string> teams;
  for (std::string line; std::getline(in, line);) teams.push_back(line);
  if (index < 0 || index >= static_cast<int>(teams.size())) {
    throw Error("--slurm-task " + std::to_string(index) + ": " + list.string() + " lists " +
                std::to_string(teams.size()) + " teams");
  }
  const fs::path folder = submissions / teams[index];
  if (!fs::is_directory(folder)) throw Error("no team folder " + folder.string());
  const std::vector<fs::path> class_folders = find_team_folders(submissions, out);

  TeamOutcome t = new_outcome(folder, out);
  if (const char* job = std::getenv("SLURM_ARRAY_JOB_ID")) {
    t.slurm_task = std::string(job) + "_" + std::to_string(index);
  }
  if (is_gpu_milestone(options.milestone)) {
    // Slurm chose the GPU (--gres) and set CUDA_VISIBLE_DEVICES to it.
    if (const char* gpu = std::getenv("CUDA_VISIBLE_DEVICES")) t.gpu = gpu;
  }
  const std::vector<std::string> argv = grade_argv(options, t, class_folders, out);
  start_team_folder(t, argv);
  const auto start = Clock::now();
  ChildProcess child(argv, t.out / "grade.log", options.grader.value_or("/proc/self/exe"));
  std::optional<ChildExit> exit;
  while (!(exit = child.poll())) {
    if (stop_requested()) {
      // Cancelled (scancel, preemption): no task.json, so the submitter sees a lost task.
      child.kill_group(false);
      return 143;
    }
    if (options.team_timeout_s > 0 && seconds_since(start) > options.team_timeout_s) {
      exit = child.kill_group(true);
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  if (!exit->timed_out && (exit->signal == SIGTERM || exit->signal == SIGKILL)) {
    // Slurm's signals reached the grade first (scancel, preemption, a node going down): the
    // same as a stop. The team's code cannot send them: it runs as another user (and in its
    // own PID namespace where the kernel allows).
    return 143;
  }
  t.wall_s = seconds_since(start);
  judge(t, *exit, options.team_timeout_s);
  write_atomically(t.out / kTaskFile, team_json(t).dump(2) + "\n");
  return 0;
}

}  // namespace convlab::grader
