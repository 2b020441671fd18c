#include "grader/service/slurm_executor.hpp"

#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <fstream>
#include <iostream>
#include <list>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <sstream>

#include "grader/class/ingest.hpp"
#include "grader/class/slurm_commands.hpp"
#include "grader/service/executor.hpp"
#include "grader/service/job_output.hpp"
#include "grader/service/job_request.hpp"
#include "reference/core/error.hpp"
#include "reference/core/files.hpp"
#include "reference/core/stopwatch.hpp"
#include "reference/core/text.hpp"

namespace convlab::service {
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

namespace {

// Written by the batch script once `convlab grade` has ended by itself.
constexpr const char* kStatusFile = "exit-status";
// The Slurm job of an attempt, so that a later attempt can cancel it.
constexpr const char* kSlurmJobFile = "slurm-job";
// How often the executor looks at its jobs' files (output, exit status); Slurm's queue is
// asked every poll_s only.
constexpr auto kTick = 500ms;
// sbatch refusing a job this many times fails it with sbatch's message.
constexpr int kMaxRefusals = 3;

fs::path job_folder(const fs::path& work, std::int64_t id, int attempt) {
  return work / ("job-" + std::to_string(id) + "-" + std::to_string(attempt));
}

// A line of the service's in a job's output; `apart`: after an empty line, as a job's end.
std::string note(const std::string& text, bool apart = false) {
  std::string line = apart ? "\n" : "";
  line += "[convlab serve] ";
  line += text;
  line += '\n';
  return line;
}

// The exit status the batch script wrote, once the whole line is there.
std::optional<int> read_status(const fs::path& dir) {
  const auto text = try_read_file(dir / kStatusFile);
  if (!text || !text->ends_with("\n")) return std::nullopt;
  const std::string code = trim(*text);
  if (code.empty() || code.size() > 3 ||
      code.find_first_not_of("0123456789") != std::string::npos) {
    return std::nullopt;
  }
  return std::stoi(code);
}

}  // namespace

std::string slurm_job_script(const JobInfo& job, const std::vector<std::string>& grade_argv,
                             const fs::path& dir, const SlurmSettings& slurm, double time_limit_s) {
  grader::check_sbatch_path(dir, "--work");
  const bool gpu = job.device == "gpu";
  const std::string partition =
      gpu && !slurm.gpu_partition.empty() ? slurm.gpu_partition : slurm.partition;
  const fs::path status = dir / kStatusFile;
  const fs::path status_tmp = dir / (std::string(kStatusFile) + ".tmp");

  std::ostringstream t;
  t << "#!/bin/bash\n"
    << "# convlab serve: job " << job.id << " of team " << job.team << " (" << job.command << " "
    << job.milestone << "), attempt " << job.attempts << ". The service follows it and\n"
    << "# reads the grade's output and exit status in " << dir.string() << ".\n"
    << "#SBATCH --job-name=convlab-job-" << job.id << "\n"
    << "#SBATCH --ntasks=1\n"
    // The service queues a lost job again itself, once, and tells the team; Slurm's own
    // requeue would hide it.
    << "#SBATCH --no-requeue\n"
    << "#SBATCH --output=" << (dir / "output.log").string() << "\n"
    << "#SBATCH --chdir=" << dir.string() << "\n"
    << "#SBATCH --time=" << std::max(1, static_cast<int>(std::ceil(time_limit_s / 60.0))) << "\n";
  if (!partition.empty()) t << "#SBATCH --partition=" << partition << "\n";
  if (!slurm.account.empty()) t << "#SBATCH --account=" << slurm.account << "\n";
  if (gpu && !slurm.gres.empty()) t << "#SBATCH --gres=" << slurm.gres << "\n";
  for (const std::string& extra : slurm.sbatch_options) t << "#SBATCH " << extra << "\n";
  for (std::size_t i = 0; i < grade_argv.size(); ++i) {
    t << (i == 0 ? "" : " ") << grader::shell_quote(grade_argv[i]);
  }
  t << "\nstatus=$?\n"
    << "# 128 and above: a signal ended the grade (scancel, the time limit, a node going down):\n"
    << "# no exit status, so the service sees a lost job.\n"
    << "if [ \"$status\" -lt 128 ]; then\n"
    << "  echo \"$status\" > " << grader::shell_quote(status_tmp.string()) << " && mv "
    << grader::shell_quote(status_tmp.string()) << " " << grader::shell_quote(status.string())
    << "\n"
    << "fi\n"
    << "exit \"$status\"\n";
  return t.str();
}

struct SlurmExecutor::Followed {
  JobInfo job;
  fs::path dir;
  std::string slurm_job;
  std::unique_ptr<OutputForwarder> output;
  bool running_seen = false;
  bool start_asked = false;                       // Slurm asked once its output began
  std::optional<Clock::time_point> completed_at;  // COMPLETED seen, exit status not yet
};

struct SlurmExecutor::Impl {
  JobStore& store;
  ExecutorSettings settings;
  SlurmSettings slurm;
  std::atomic<bool> stopping{false};
  std::mutex mutex;
  std::condition_variable wake;
  bool woken = false;

  std::list<Followed> followed;
  Clock::time_point last_look{};
  int queue_failures = 0;
  bool gpu_first = false;
  std::optional<Clock::time_point> paused_until;  // after sbatch refused a job
  std::map<std::int64_t, int> refusals;

  Impl(JobStore& s, const ExecutorSettings& e) : store(s), settings(e), slurm(*e.slurm) {}

  void run();
  void submit_queued();
  bool submit(const JobInfo& job, const std::map<std::string, std::string>& files);
  bool should_look();
  void look();
  bool settle(Followed& f);
  void finish_done(Followed& f, int grade_exit);
  void lost(Followed& f, const std::string& why);
  void fail(const JobInfo& job, const std::string& why, const std::optional<std::string>& report);
  void remove_folder(const fs::path& dir) const;
  void cancel_all();
};

SlurmExecutor::SlurmExecutor(JobStore& store, const ExecutorSettings& settings)
    : impl_(std::make_unique<Impl>(store, settings)) {
  grader::require_slurm_commands("use --executor local");
  grader::check_sbatch_path(settings.work, "--work");
  thread_ = std::thread([this] { impl_->run(); });
}

SlurmExecutor::~SlurmExecutor() {
  stop();
}

void SlurmExecutor::notify() {
  {
    const std::lock_guard lock(impl_->mutex);
    impl_->woken = true;
  }
  impl_->wake.notify_all();
}

void SlurmExecutor::stop() {
  impl_->stopping = true;
  impl_->wake.notify_all();
  if (thread_.joinable()) thread_.join();
}

void SlurmExecutor::Impl::run() {
  while (!stopping) {
    try {
      submit_queued();
      // Before the output: a job that has started is then told where it runs first.
      if (should_look()) look();
      for (Followed& f : followed) f.output->forward(false);
    } catch (const std::exception& e) {
      std::cerr << "convlab serve: the Slurm executor: " << e.what() << std::endl;
    }
    std::unique_lock lock(mutex);
    wake.wait_for(lock, kTick, [this] { return woken || stopping.load(); });
    woken = false;
  }
  cancel_all();
}

void SlurmExecutor::Impl::submit_queued() {
  if (paused_until && Clock::now() < *paused_until) return;
  paused_until.reset();
  while (!stopping && static_cast<int>(followed.size()) < slurm.max_jobs) {
    // GPU and CPU jobs in turn, so that neither waits behind a stream of the other.
    const char* first = gpu_first ? "gpu" : "cpu";
    const char* second = gpu_first ? "cpu" : "gpu";
    auto job = store.claim(first);
    if (!job) job = store.claim(second);
    if (!job) return;
    gpu_first = job->first.device == "cpu";
    bool taken = false;
    try {
      taken = submit(job->first, job->second);
    } catch (const std::exception& e) {
      // The service failed the job (disk full, a database error): the team reads why.
      fail(job->first, e.what(), std::nullopt);
      remove_folder(job_folder(settings.work, job->first.id, job->first.attempts));
      continue;
    }
    if (!taken) return;
  }
}

bool SlurmExecutor::Impl::submit(const JobInfo& job,
                                 const std::map<std::string, std::string>& files) {
  // An earlier attempt's Slurm job may still run when the service stopped without cancelling
  // it (a crash): cancel it, so that a job never runs twice at once.
  for (int a = 1; a < job.attempts; ++a) {
    const fs::path earlier = job_folder(settings.work, job.id, a);
    if (const auto id = try_read_file(earlier / kSlurmJobFile); id && !trim(*id).empty()) {
      grader::scancel(trim(*id));
    }
    if (!settings.keep_work) remove_folder(earlier);
  }
  const fs::path dir = job_folder(settings.work, job.id, job.attempts);
  fs::remove_all(dir);
  fs::create_directories(dir);
  write_job_files(files, dir / "submission");
  // The grade writes no database on the node: finish_done ingests its report.
  GradeSettings grade = settings.grade;
  grade.db.clear();
  std::vector<std::string> argv{settings.program.string()};
  const std::vector<std::string> args =
      grade_arguments(job, grade, dir / "submission", dir / "out" / job.team);
  argv.insert(argv.end(), args.begin(), args.end());
  const fs::path script = dir / "job.sbatch";
  {
    std::ofstream out(script);
    out << slurm_job_script(job, argv, dir, slurm, settings.time_limit_s);
    if (!out) throw Error("cannot write " + script.string());
  }

  std::string slurm_job;
  try {
    slurm_job = grader::sbatch(script);
  } catch (const Error& e) {
    const int refused = ++refusals[job.id];
    std::cerr << "convlab serve: job " << job.id << ": " << e.what() << std::endl;
    remove_folder(dir);
    if (refused >= kMaxRefusals) {
      refusals.erase(job.id);
      // The team reads what sbatch said, without the server's paths; the log has it all.
      std::string said = e.what();
      said = said.substr(0, said.find('\n'));
      fail(job,
           "Slurm refused the job " + std::to_string(refused) + " times (" + said +
               "): tell your course staff",
           std::nullopt);
      return true;
    }
    // Given back untouched; every submission waits a while, as Slurm may be down.
    const double pause_s = 6 * slurm.poll_s;
    store.requeue(job.id,
                  refused == 1 ? note("Slurm did not take the job; the service tries again") : "",
                  false);
    paused_until = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                      std::chrono::duration<double>(pause_s));
    return false;
  }
  refusals.erase(job.id);
  { std::ofstream(dir / kSlurmJobFile) << slurm_job << "\n"; }
  store.append_output(job.id, note("job " + std::to_string(job.id) + ": " + job.command + " " +
                                   job.milestone + " submitted to Slurm as job " + slurm_job));
  Followed f;
  f.job = job;
  f.dir = dir;
  f.slurm_job = slurm_job;
  f.output = std::make_unique<OutputForwarder>(store, job.id, dir / "output.log", dir);
  followed.push_back(std::move(f));
  return true;
}

// Slurm's queue is asked every poll_s; at once when a job's output begins, to tell the team
// where it runs; and at most once a second while an exit status waits for its Slurm job to
// leave the queue.
bool SlurmExecutor::Impl::should_look() {
  if (followed.empty()) return false;
  const double since = seconds_since(last_look);
  if (since >= slurm.poll_s) return true;
  bool look = false;
  for (Followed& f : followed) {
    std::error_code ec;
    if (!f.start_asked && fs::file_size(f.dir / "output.log", ec) > 0 && !ec) {
      f.start_asked = true;
      look = true;
    }
    if (since >= 1.0 && fs::exists(f.dir / kStatusFile, ec)) look = true;
  }
  return look;
}

void SlurmExecutor::Impl::look() {
  std::set<std::string> ids;
  for (const Followed& f : followed) ids.insert(f.slurm_job);
  const grader::QueueLook q = grader::squeue(ids);
  last_look = Clock::now();
  if (!q.ok) {
    // The jobs go on; their state is known again once the controller answers.
    if (queue_failures++ % 60 == 0) {
      std::cerr << "convlab serve: cannot read Slurm's queue (squeue: " << q.error
                << "); trying again" << std::endl;
    }
    return;
  }
  queue_failures = 0;
  std::map<std::string, grader::SlurmTaskState> queued;
  for (const grader::SlurmTaskState& s : q.queued) queued[s.job] = s;
  for (auto it = followed.begin(); it != followed.end();) {
    Followed& f = *it;
    bool ended = false;
    try {
      if (store.cancel_requested(f.job.id)) {
        // The team cancelled it (Ctrl-C in convlab submit).
        grader::scancel(f.slurm_job);
        f.output->forward(true);
        store.append_output(f.job.id, note("cancelled by the team"));
        store.finish(f.job.id, "failed", std::nullopt, "cancelled", std::nullopt);
        ended = true;
      } else if (const auto s = queued.find(f.slurm_job); s != queued.end()) {
        if (s->second.state == "RUNNING" && !f.running_seen) {
          f.running_seen = true;
          store.append_output(
              f.job.id, note("Slurm job " + f.slurm_job + " started" +
                             (s->second.node.empty() ? std::string() : " on " + s->second.node)));
        }
      } else {
        ended = settle(f);
      }
    } catch (const std::exception& e) {
      fail(f.job, e.what(), std::nullopt);
      ended = true;
    }
    if (ended) {
      if (!settings.keep_work) remove_folder(f.dir);
      it = followed.erase(it);
    } else {
      ++it;
    }
  }
}

// A job that left Slurm's queue: done (its exit status is there), lost, or not yet known.
// True once the job is settled.
bool SlurmExecutor::Impl::settle(Followed& f) {
  if (const auto status = read_status(f.dir)) {
    finish_done(f, *status);
    return true;
  }
  const grader::EndLook end = grader::job_end(f.slurm_job);
  if (!end.ok) return false;  // ask again at the next look
  const grader::SlurmTaskState* state = nullptr;
  for (const grader::SlurmTaskState& s : end.ended) {
    if (s.job == f.slurm_job && s.task < 0) state = &s;
  }
  const std::string name = state ? state->state : "";
  if (grader::is_between_states(name)) return false;
  const std::string exit =
      state && !state->exit_code.empty() ? " (exit " + state->exit_code + ")" : "";
  if (name == "COMPLETED") {
    // The script wrote the status before it exited 0: wait for the file system to show it.
    if (!f.completed_at) f.completed_at = Clock::now();
    if (seconds_since(*f.completed_at) < slurm.result_grace_s) return false;
    lost(f, "Slurm job " + f.slurm_job +
                " completed, but its exit status never appeared in "
                "the job's folder (is --work on a file system every node shares?)");
    return true;
  }
  if (name == "TIMEOUT") {
    // Run again, it would only hit the limit again.
    f.output->forward(true);
    const std::string why = "stopped after the service's limit of " +
                            std::to_string(static_cast<int>(settings.time_limit_s)) +
                            " s (Slurm job " + f.slurm_job + " timed out)";
    fail(f.job, why, std::nullopt);
    return true;
  }
  lost(f, "Slurm job " + f.slurm_job + " ended " + (name.empty() ? "out of sight" : name) + exit +
              " before the grade did");
  return true;
}

void SlurmExecutor::Impl::finish_done(Followed& f, int grade_exit) {
  f.output->forward(true);
  const JobInfo& job = f.job;
  const fs::path out = f.dir / "out";
  const std::optional<std::string> report = try_read_file(out / job.team / "report.json");
  if (job.command == "grade" && report && !settings.grade.db.empty()) {
    // The one writer: the grade's run goes into the results database here.
    const grader::IngestSummary in = grader::ingest_reports(out, settings.grade.db, {job.team});
    for (const grader::IngestedFolder& folder : in.folders) {
      if (folder.outcome != grader::IngestOutcome::rejected) continue;
      fail(job, "the grade's report was not recorded: " + folder.reason, report);
      return;
    }
  }
  const int code = job_exit_code(job, grade_exit, report);
  store.append_output(job.id, note("job " + std::to_string(job.id) + " finished: exit status " +
                                       std::to_string(code),
                                   true));
  store.finish(job.id, "done", code, "", report);
}

void SlurmExecutor::Impl::lost(Followed& f, const std::string& why) {
  f.output->forward(true);
  const JobInfo& job = f.job;
  if (job.attempts < JobStore::kMaxAttempts) {
    store.requeue(
        job.id,
        note(why + "; the job is queued again (attempt " + std::to_string(job.attempts + 1) +
                 " of " + std::to_string(JobStore::kMaxAttempts) + ")",
             true),
        true);
    const std::lock_guard lock(mutex);
    woken = true;  // submitted again at once
    return;
  }
  fail(job,
       why + "; the job was started " + std::to_string(job.attempts) +
           " times, the most a job gets: submit it anew",
       std::nullopt);
}

void SlurmExecutor::Impl::fail(const JobInfo& job, const std::string& why,
                               const std::optional<std::string>& report) {
  try {
    store.append_output(job.id, note(why, true));
    store.finish(job.id, "failed", std::nullopt, why, report);
  } catch (const std::exception& e) {
    std::cerr << "convlab serve: job " << job.id << ": " << e.what() << std::endl;
  }
}

void SlurmExecutor::Impl::remove_folder(const fs::path& dir) const {
  std::error_code ec;
  fs::remove_all(dir, ec);
}

void SlurmExecutor::Impl::cancel_all() {
  // Their jobs stay `running`: the next start queues them again, once, and says so.
  for (Followed& f : followed) {
    grader::scancel(f.slurm_job);
    try {
      f.output->forward(true);
    } catch (const std::exception&) {
    }
  }
  followed.clear();
}

}  // namespace convlab::service
