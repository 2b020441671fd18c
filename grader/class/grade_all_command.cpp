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

#include "grader/class/grade_all.hpp"
#include "grader/cli/commands.hpp"

namespace convlab::grader {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace {

/// Exit status when at least one team could not be graded (its scores are not at fault).
constexpr int kExitGraderErrors = 4;

struct GradeAllArgs {
  std::string submissions, milestone, out, db, data, cache;
  std::vector<std::string> models, teams;
  std::uint64_t seed = 0;
  int runs = 0, jobs = 0;
  double team_timeout_s = 7200.0;
  std::string grader;
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

  void begin(int total, int jobs) {
    total_ = total;
    std::cerr << "grading " << total << " team" << (total == 1 ? "" : "s") << ", " << jobs
              << " at a time"
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
  void end() { clear(); }

 private:
  void clear() {
    if (tty_ && drawn_) std::cerr << "\r\x1b[K";
    drawn_ = false;
  }
  void draw() {
    if (!tty_ || total_ == 0) return;
    const double elapsed = std::chrono::duration<double>(Clock::now() - start_).count();
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
    if (!running_.empty()) {
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
};

void on_signal(int) {
  request_grade_all_stop();
}

int run_grade_all(const GradeAllArgs& a, const CLI::App& cmd) {
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
  o.jobs = a.jobs;
  o.team_timeout_s = a.team_timeout_s;
  if (!a.grader.empty()) o.grader = fs::absolute(a.grader);
  if (a.jobs > 1 && is_gpu_milestone(a.milestone)) {
    std::cerr << "note: " << a.milestone
              << " runs on the GPU: teams are graded one at a time so their timings do not "
                 "disturb each other (--jobs applies to m2)\n";
  }

  Progress progress;
  GradeAllEvents events;
  events.begin = [&](int total, int jobs) { progress.begin(total, jobs); };
  events.started = [&](const std::string& team) { progress.started(team); };
  events.finished = [&](const TeamOutcome& t, int done, int) { progress.finished(t, done); };
  events.tick = [&] { progress.tick(); };

  struct sigaction sa {};
  sa.sa_handler = on_signal;
  struct sigaction old_int {
  }, old_term{};
  sigaction(SIGINT, &sa, &old_int);
  sigaction(SIGTERM, &sa, &old_term);
  ClassSummary s;
  try {
    s = grade_all(o, events);
  } catch (...) {
    sigaction(SIGINT, &old_int, nullptr);
    sigaction(SIGTERM, &old_term, nullptr);
    progress.end();
    throw;
  }
  sigaction(SIGINT, &old_int, nullptr);
  sigaction(SIGTERM, &old_term, nullptr);
  progress.end();

  const fs::path out = fs::absolute(o.out);
  std::cout << "\n" << summary_table(s) << "\n";
  const int errors = static_cast<int>(s.teams.size()) - s.graded();
  std::cout << "Graded " << s.graded() << " of " << s.teams.size() << " teams (" << s.milestone
            << ") in " << clock_text(s.duration_s) << ". Per team: " << (out / "TEAM").string()
            << "/ (report.json, results.json, grade.log). Summary: "
            << (out / "summary.csv").string() << ", " << (out / "summary.json").string() << "\n";
  if (s.interrupted) {
    std::cout << "Interrupted: the summary holds the teams graded so far.\n";
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
      "`convlab grade` in its own process (m2 in parallel, GPU milestones one at a time). "
      "Exit status: 0 when every team was graded (whatever the scores), 4 when some could not "
      "be, 1 on bad input, 130 when interrupted");
  cmd->add_option("DIR", a->submissions, "Folder with one subfolder per team (the team's name)")
      ->required();
  cmd->add_option("--milestone", a->milestone, "m2, m3, final or all")
      ->required()
      ->check(CLI::IsMember({"m2", "m3", "final", "all"}));
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
  cmd->add_option("--team-timeout", a->team_timeout_s,
                  "Seconds one team's whole grade may take before it is killed (default 7200)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--grader", a->grader,
                  "The convlab executable that grades each team (default: this one)");
  cmd->callback([a, cmd, &exit_code] { exit_code = run_grade_all(*a, *cmd); });
}

}  // namespace convlab::grader
