// `convlab grade-all DIR --milestone M`: grades a whole class, with a progress bar on a
// terminal (plain lines otherwise) and a summary table at the end.
#include <sys/ioctl.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <csignal>
#include <iostream>
#include <mutex>
#include <set>
#include <sstream>

#include "grader/class/commands.hpp"
#include "grader/class/grade_all.hpp"
#include "grader/class/slurm.hpp"
#include "reference/core/error.hpp"
#include "reference/core/stopwatch.hpp"

namespace convlab::grader {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace {

/// Exit status when at least one team could not be graded (its scores are not at fault).
constexpr int kExitGraderErrors = 4;

struct GradeAllArgs {
  std::string submissions, milestone, out, db, data, cache;
  std::vector<std::string> models, teams, only;
  std::uint64_t seed = 0;
  int runs = 0, jobs = 0;
  double team_timeout_s = 7200.0;
  std::string grader;
  std::string gpus;
  // --slurm
  bool slurm = false, dry_run = false;
  std::string partition, account, gres;
  int time_min = 0, max_parallel = 0;
  std::vector<std::string> sbatch_options;
  int slurm_task = -1;
  double slurm_poll_s = 5.0;
  bool allow_degraded = false;
};

std::string clock_text(double s) {
  const long t = static_cast<long>(s + 0.5);
  char buf[32];
  if (t >= 3600) {
    std::snprintf(buf, sizeof buf, "%ld:%02ld:%02ld", t / 3600, t / 60 % 60, t % 60);
  } else {
    std::snprintf(buf, sizeof buf, "%ld:%02ld", t / 60, t % 60);
  }
  return buf;
}

// What the user sees while the class is graded: on a terminal, one bar redrawn in place
// ("\r") with finished teams printed above it; elsewhere (a log file, CI), one line per event.
class Progress {
 public:
  Progress() : tty_(isatty(STDERR_FILENO) == 1), start_(Clock::now()) {}

  // jobs 0: said by the caller (--slurm).
  void begin(int total, int jobs, bool gpu) {
    total_ = total;
    if (jobs == 0) return;
    std::cerr << "grading " << total << " team" << (total == 1 ? "" : "s") << ", " << jobs
              << " at a time" << (gpu && jobs > 1 ? " (one per GPU)" : "")
              << (jobs > 1 ? " (the first alone: it builds the framework cache)" : "") << "\n";
  }
  void started(const std::string& team) {
    running_.insert(team);
    if (!tty_) std::cerr << "[" << done_ << "/" << total_ << "] started " << team << "\n";
    draw();
  }
  void finished(const TeamOutcome& t, int done) {
    running_.erase(t.team);
    done_ = done;
    std::ostringstream line;
    line << "[" << done << "/" << total_ << "] " << t.team << ": " << t.status();
    if (t.graded) line << ", " << t.score << "/" << t.max_score;
    line << " (" << clock_text(t.wall_s) << ")";
    if (!t.graded) line << ": " << t.error;
    clear();
    std::cerr << line.str() << "\n";
    draw();
  }
  void tick() {
    if (tty_ && Clock::now() - last_draw_ > std::chrono::milliseconds(500)) draw();
  }
  // A line that stays (the job submitted, tasks resubmitted...).
  void note(const std::string& line) {
    clear();
    std::cerr << line << "\n";
    draw();
  }
  // --slurm: the array's state, redrawn in place on a terminal, one line per change elsewhere.
  void status(const std::string& line) {
    status_ = line;
    if (!tty_) std::cerr << line << "\n";
    draw();
  }
  void end() { clear(); }

 private:
  void clear() {
    if (tty_ && drawn_) std::cerr << "\r\x1b[K";
    drawn_ = false;
  }
  void draw() {
    if (!tty_ || total_ == 0) return;
    const double elapsed = seconds_since(start_);
    std::ostringstream bar;
    constexpr int kWidth = 24;
    const int filled = done_ * kWidth / total_;
    bar << "[" << std::string(filled, '#') << std::string(kWidth - filled, '.') << "] " << done_
        << "/" << total_ << "  " << clock_text(elapsed) << " elapsed  ETA ";
    if (done_ > 0 && done_ < total_) {
      bar << clock_text(elapsed / done_ * (total_ - done_));
    } else {
      bar << "--";
    }
    if (!status_.empty()) {
      bar << "  " << status_;
    } else if (!running_.empty()) {
      bar << "  grading:";
      for (const std::string& t : running_) bar << " " << t;
    }
    std::string text = bar.str();
    winsize ws{};
    const std::size_t cols =
        ioctl(STDERR_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0 ? ws.ws_col : 100;
    if (text.size() >= cols) text = text.substr(0, cols - 1);
    std::cerr << "\r" << text << "\x1b[K" << std::flush;
    drawn_ = true;
    last_draw_ = Clock::now();
  }

  bool tty_;
  Clock::time_point start_, last_draw_{};
  int total_ = 0, done_ = 0;
  bool drawn_ = false;
  std::set<std::string> running_;
  std::string status_;
};

void on_signal(int) {
  request_grade_all_stop();
}

// Options that only mean something with --slurm, and those that mean nothing with it.
void check_mode(const GradeAllArgs& a, const CLI::App& cmd) {
  if (!a.slurm) {
    for (const char* opt : {"--partition", "--gres", "--account", "--time", "--max-parallel",
                            "--dry-run", "--sbatch-option"}) {
      if (cmd.count(opt) > 0) {
        throw Error(std::string(opt) +
                    " belongs to --slurm: add --slurm to grade the class as "
                    "a Slurm job array, or leave " +
                    opt + " out");
      }
    }
    return;
  }
  for (const char* opt : {"--gpus", "--jobs"}) {
    if (cmd.count(opt) > 0) {
      throw Error(std::string(opt) +
                  " is for grading on this host; with --slurm each team is one array task "
                  "(--max-parallel limits how many run at once)");
    }
  }
}

// Runs `body` with SIGINT and SIGTERM asking the class run to stop, then puts them back.
template <typename F>
auto with_stop_signals(F&& body) {
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  struct sigaction old_int {
  }, old_term{};
  sigaction(SIGINT, &sa, &old_int);
  sigaction(SIGTERM, &sa, &old_term);
  struct Restore {
    struct sigaction i, t;
    ~Restore() {
      sigaction(SIGINT, &i, nullptr);
      sigaction(SIGTERM, &t, nullptr);
    }
  } restore{old_int, old_term};
  return body();
}

int run_grade_all(const GradeAllArgs& a, const CLI::App& cmd) {
  check_mode(a, cmd);
  GradeAllOptions o;
  o.submissions = a.submissions;
  o.milestone = a.milestone;
  o.out = a.out.empty() ? fs::path("grade-all-" + a.milestone) : fs::path(a.out);
  if (!a.db.empty()) o.db = fs::absolute(a.db);
  for (const std::string& m : a.models) o.model_dirs.push_back(fs::absolute(m));
  if (!a.data.empty()) o.data = fs::absolute(a.data);
  if (cmd.count("--seed") > 0) o.seed = a.seed;
  if (cmd.count("--runs") > 0) o.runs = a.runs;
  if (!a.cache.empty()) o.cache = fs::absolute(a.cache);
  o.teams = a.teams;
  o.only = a.only;
  o.allow_degraded = a.allow_degraded;
  o.jobs = a.jobs;
  o.team_timeout_s = a.team_timeout_s;
  if (!a.grader.empty()) o.grader = fs::absolute(a.grader);
  std::stringstream gpus(a.gpus);
  for (std::string id; std::getline(gpus, id, ',');) {
    if (id.empty())
      throw Error("--gpus " + a.gpus + ": give GPU ids separated by commas, e.g. 0,1");
    o.gpus.push_back(id);
  }
  if (cmd.count("--slurm-task") > 0) {
    // Inside an array task of the job --slurm submitted.
    return with_stop_signals([&] { return run_slurm_task(o, a.slurm_task); });
  }
  SlurmOptions slurm;
  slurm.partition = a.partition;
  slurm.account = a.account;
  slurm.gres = a.gres;
  if (cmd.count("--time") > 0) slurm.time_min = a.time_min;
  slurm.max_parallel = a.max_parallel;
  slurm.sbatch_options = a.sbatch_options;
  slurm.poll_s = a.slurm_poll_s;
  if (a.dry_run) {
    std::cout << slurm_script(o, slurm);
    return 0;
  }
  const bool gpu = is_gpu_milestone(a.milestone);
  if (a.jobs > 1 && gpu) {
    std::cerr << "note: " << a.milestone
              << " runs on the GPU: teams are graded one per GPU at a time so their timings do "
                 "not disturb each other (--jobs applies to m2)\n";
  }

  Progress progress;
  GradeAllEvents events;
  events.begin = [&](int total, int jobs) {
    if (a.slurm) {
      std::cerr << "grading " << total << " team" << (total == 1 ? "" : "s")
                << " as a Slurm job array, one task per team\n";
      progress.begin(total, 0, false);
    } else {
      progress.begin(total, jobs, gpu);
    }
  };
  events.started = [&](const std::string& team) { progress.started(team); };
  events.finished = [&](const TeamOutcome& t, int done, int) { progress.finished(t, done); };
  events.tick = [&] { progress.tick(); };
  events.note = [&](const std::string& line) { progress.note(line); };
  events.status = [&](const std::string& line) { progress.status(line); };

  ClassSummary s;
  try {
    s = with_stop_signals(
        [&] { return a.slurm ? grade_all_slurm(o, slurm, events) : grade_all(o, events); });
  } catch (...) {
    progress.end();
    throw;
  }
  progress.end();

  const fs::path out = fs::absolute(o.out);
  std::cout << "\n" << summary_table(s) << "\n";
  const int errors = static_cast<int>(s.teams.size()) - s.graded();
  std::cout << "Graded " << s.graded() << " of " << s.teams.size() << " teams (" << s.milestone
            << ") in " << clock_text(s.duration_s) << ". Per team: " << (out / "TEAM").string()
            << "/ (report.json, results.json, grade.log). Summary: "
            << (out / "summary.csv").string() << ", " << (out / "summary.json").string() << "\n";
  if (s.interrupted) {
    std::cout << "Interrupted: the summary holds the teams graded so far"
              << (s.slurm_jobs.empty() ? "" : " (the Slurm tasks still running were cancelled)")
              << ".\n";
    return 130;
  }
  if (errors > 0) {
    std::cout << errors << " team" << (errors == 1 ? "" : "s")
              << " could not be graded (grader error above): read their grade.log, fix the "
                 "cause, then re-grade them with --team NAME.\n";
    return kExitGraderErrors;
  }
  return 0;
}

}  // namespace

void add_grade_all_command(CLI::App& app, int& exit_code) {
  auto a = std::make_shared<GradeAllArgs>();
  CLI::App* cmd = app.add_subcommand(
      "grade-all",
      "Grade a whole class: every subfolder of DIR is one team's submission, graded by "
      "`convlab grade` in its own process (m2 in parallel, GPU milestones one per GPU at a "
      "time; with --slurm, one Slurm array task per team). "
      "Exit status: 0 when every team was graded (whatever the scores), 4 when some could not "
      "be, 1 on bad input, 130 when interrupted");
  cmd->add_option("DIR", a->submissions, "Folder with one subfolder per team (the team's name)")
      ->required();
  cmd->add_option("--milestone", a->milestone, "m2, m3, final or all")
      ->required()
      ->check(CLI::Validator(
          [](std::string& m) -> std::string {
            // The graded milestones are the folders of milestones/ a team writes code for.
            try {
              is_gpu_milestone(m);
            } catch (const Error& e) {
              return e.what();
            }
            return {};
          },
          "MILESTONE"));
  cmd->add_option("--out", a->out,
                  "Results folder: <out>/<team>/, summary.csv, summary.json "
                  "(default ./grade-all-<milestone>)");
  cmd->add_option("--db", a->db, "Results database every grade adds a row to (SQLite)");
  cmd->add_option("--models", a->models, "Folder of hidden models (repeatable)");
  cmd->add_option("--data", a->data, "Fashion-MNIST directory");
  cmd->add_option("--seed", a->seed,
                  "Seed of the element-wise inputs, the same for every team "
                  "(default: each grade draws its own)");
  cmd->add_option("--runs", a->runs, "Timed runs of the ranked check (default: the milestone's)")
      ->check(CLI::Range(1, 100));  // what convlab grade accepts
  cmd->add_option("--cache", a->cache, "Where the pristine framework is built once and reused");
  cmd->add_option("--jobs,-j", a->jobs,
                  "Teams graded at once for m2 (default: half the cores, at least 1)")
      ->check(CLI::Range(1, 1024));
  cmd->add_option("--team", a->teams, "Grade only this team (repeatable): re-grading");
  cmd->add_option("--only", a->only,
                  "Run only the checks whose id matches this glob (repeatable, as convlab grade "
                  "--only): a partial grade, to try a setup quickly; it never ranks");
  cmd->add_flag("--allow-degraded", a->allow_degraded,
                "Passed on: grade even where this machine lacks an isolation feature");
  cmd->add_option("--team-timeout", a->team_timeout_s,
                  "Seconds one team's whole grade may take before it is killed (default 7200)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--grader", a->grader,
                  "The convlab executable that grades each team (default: this one)");
  cmd->add_option("--gpus", a->gpus,
                  "GPU milestones: the GPUs to grade on, one team per GPU at a time, e.g. 0,1 "
                  "(default: every visible GPU)");
  cmd->add_flag("--slurm", a->slurm,
                "Grade as one Slurm job array, one task per team, and wait for it; the tasks "
                "write the team folders, this command merges them and writes --db");
  cmd->add_option("--partition", a->partition, "--slurm: the partition of the tasks");
  cmd->add_option("--gres", a->gres,
                  "--slurm: what each task of a GPU milestone asks for (default gpu:1); CPU "
                  "milestones ask for none");
  cmd->add_option("--account", a->account, "--slurm: the account charged");
  cmd->add_option("--time", a->time_min, "--slurm: each task's time limit, minutes")
      ->check(CLI::Range(1, 100000));
  cmd->add_option("--max-parallel", a->max_parallel, "--slurm: tasks running at once")
      ->check(CLI::Range(1, 100000));
  cmd->add_option("--sbatch-option", a->sbatch_options,
                  "--slurm: one more #SBATCH line for the script, e.g. --qos=course "
                  "(repeatable)");
  cmd->add_flag("--dry-run", a->dry_run, "--slurm: print the batch script and submit nothing");
  // Internal: what each array task runs, and how often the submitter looks at the queue.
  cmd->add_option("--slurm-task", a->slurm_task)->group("")->check(CLI::NonNegativeNumber);
  cmd->add_option("--slurm-poll", a->slurm_poll_s)->group("")->check(CLI::PositiveNumber);
  cmd->callback([a, cmd, &exit_code] { exit_code = run_grade_all(*a, *cmd); });
}

}  // namespace convlab::grader
