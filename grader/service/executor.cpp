#include "grader/service/executor.hpp"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "grader/service/job_output.hpp"
#include "reference/core/error.hpp"
#include "reference/core/files.hpp"

extern char** environ;

namespace convlab::service {
namespace fs = std::filesystem;
using namespace std::chrono_literals;

namespace {

// How often a running job's log is read: a line reaches a streaming client this long after it
// was written, at worst.
constexpr auto kLogPoll = 50ms;

// A child started with posix_spawn: safe in a threaded server, where fork followed by anything
// but exec is not. Its own process group, so a kill reaches all it started; stdin from
// /dev/null, stdout and stderr into `log`, no descriptor of the server inherited.
class Child {
 public:
  Child(const fs::path& program, const std::vector<std::string>& args, const fs::path& log,
        const std::vector<std::string>& extra_env) {
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, log.c_str(),
                                     O_WRONLY | O_CREAT | O_APPEND, 0600);
    posix_spawn_file_actions_adddup2(&actions, STDOUT_FILENO, STDERR_FILENO);
    posix_spawn_file_actions_addclosefrom_np(&actions, 3);
    posix_spawnattr_t attr;
    posix_spawnattr_init(&attr);
    sigset_t none, defaults;
    sigemptyset(&none);
    sigemptyset(&defaults);
    sigaddset(&defaults, SIGINT);
    sigaddset(&defaults, SIGTERM);
    sigaddset(&defaults, SIGPIPE);
    posix_spawnattr_setsigmask(&attr, &none);
    posix_spawnattr_setsigdefault(&attr, &defaults);
    posix_spawnattr_setpgroup(&attr, 0);
    posix_spawnattr_setflags(
        &attr, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);

    std::vector<std::string> argv_text{program.string()};
    argv_text.insert(argv_text.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (std::string& a : argv_text) argv.push_back(a.data());
    argv.push_back(nullptr);
    std::vector<std::string> env_text;
    for (char** e = environ; *e != nullptr; ++e) {
      bool replaced = false;
      for (const std::string& x : extra_env) {
        replaced = replaced || std::strncmp(*e, x.c_str(), x.find('=') + 1) == 0;
      }
      if (!replaced) env_text.emplace_back(*e);
    }
    env_text.insert(env_text.end(), extra_env.begin(), extra_env.end());
    std::vector<char*> envp;
    for (std::string& e : env_text) envp.push_back(e.data());
    envp.push_back(nullptr);

    const int rc = posix_spawn(&pid_, program.c_str(), &actions, &attr, argv.data(), envp.data());
    posix_spawn_file_actions_destroy(&actions);
    posix_spawnattr_destroy(&attr);
    if (rc != 0) throw Error("cannot start " + program.string() + ": " + std::strerror(rc));
  }
  ~Child() {
    if (!status_) kill_all();
  }
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;

  /// The wait status once the child ended.
  std::optional<int> poll() {
    if (status_) return status_;
    int status = 0;
    if (waitpid(pid_, &status, WNOHANG) == pid_) status_ = status;
    return status_;
  }
  void kill_all() {
    if (status_) return;
    kill(-pid_, SIGKILL);
    int status = 0;
    while (waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
    }
    status_ = status;
  }

 private:
  pid_t pid_ = -1;
  std::optional<int> status_;
};

}  // namespace

Executors::Executors(JobStore& store, ExecutorSettings settings)
    : store_(store), settings_(std::move(settings)) {
  if (settings_.slurm) {
    slurm_ = std::make_unique<SlurmExecutor>(store_, settings_);
    return;
  }
  for (int g = 0; g < static_cast<int>(settings_.gpus.size()); ++g) {
    threads_.emplace_back([this, g] { loop("gpu", g); });
  }
  for (int c = 0; c < settings_.cpu_jobs; ++c) {
    threads_.emplace_back([this, c] { loop("cpu", c); });
  }
}

Executors::~Executors() {
  stop();
}

void Executors::notify() {
  if (slurm_) slurm_->notify();
  wake_.notify_all();
}

void Executors::stop() {
  if (slurm_) slurm_->stop();
  stopping_ = true;
  wake_.notify_all();
  for (std::thread& t : threads_) {
    if (t.joinable()) t.join();
  }
}

void Executors::loop(const std::string& device, int slot) {
  while (!stopping_) {
    std::optional<std::pair<JobInfo, std::map<std::string, std::string>>> job;
    try {
      job = store_.claim(device);
    } catch (const std::exception& e) {
      std::cerr << "convlab serve: cannot take a job from the queue: " << e.what() << std::endl;
    }
    if (!job) {
      std::unique_lock lock(mutex_);
      wake_.wait_for(lock, 500ms);
      continue;
    }
    try {
      run_job(job->first, job->second, device, slot);
    } catch (const std::exception& e) {
      // The service failed the job (disk full, a database error): the team reads why.
      try {
        store_.append_output(job->first.id, std::string("\n[convlab serve] ") + e.what() + "\n");
        store_.finish(job->first.id, "failed", std::nullopt, e.what(), std::nullopt);
      } catch (const std::exception& again) {
        std::cerr << "convlab serve: job " << job->first.id << ": " << again.what() << std::endl;
      }
    }
  }
}

namespace {

// "job 12 (alpha, grade m3)": a job in the service's log.
std::string job_label(const JobInfo& job) {
  return "job " + std::to_string(job.id) + " (" + job.team + ", " + job.command + " " +
         job.milestone + ")";
}

}  // namespace

void Executors::run_job(const JobInfo& job, const std::map<std::string, std::string>& files,
                        const std::string& device, int slot) {
  const fs::path dir =
      settings_.work / ("job-" + std::to_string(job.id) + "-" + std::to_string(job.attempts));
  fs::remove_all(dir);
  fs::create_directories(dir);
  const fs::path submission = dir / "submission", out = dir / "out", log = dir / "output.log";
  write_job_files(files, submission);
  const std::vector<std::string> args = grade_arguments(job, settings_.grade, submission, out);
  std::vector<std::string> env;
  if (device == "gpu") env.push_back("CUDA_VISIBLE_DEVICES=" + settings_.gpus[slot]);

  const std::string where =
      device == "gpu" ? "on GPU " + settings_.gpus[slot] : "CPU slot " + std::to_string(slot);
  store_.append_output(job.id, "[convlab serve] job " + std::to_string(job.id) + ": " +
                                   job.command + " " + job.milestone + " started (" + where +
                                   ")\n");
  // The service's own log: one line as a job starts and one as it ends, for the staff.
  std::cout << ("convlab serve: " + job_label(job) + " started " + where + "\n") << std::flush;
  OutputForwarder output(store_, job.id, log, dir);

  Child child(settings_.program, args, log, env);
  const auto start = std::chrono::steady_clock::now();
  std::optional<int> status;
  bool timed_out = false, cancelled = false;
  int looks = 0;
  while (!(status = child.poll())) {
    if (stopping_) {
      child.kill_all();
      output.forward(true);
      return;  // left running: the next start queues it again
    }
    if (std::chrono::steady_clock::now() - start >
        std::chrono::duration<double>(settings_.time_limit_s)) {
      child.kill_all();
      timed_out = true;
      status = child.poll();
      break;
    }
    // Every fifth look (250 ms): has the team cancelled it (Ctrl-C in convlab submit)?
    if (++looks % 5 == 0 && store_.cancel_requested(job.id)) {
      child.kill_all();
      cancelled = true;
      status = child.poll();
      break;
    }
    output.forward(false);
    std::this_thread::sleep_for(kLogPoll);
  }
  output.forward(true);

  const std::optional<std::string> report = try_read_file(out / "report.json");
  std::string ended;  // for the service's log
  if (cancelled) {
    ended = "cancelled";
    store_.append_output(job.id, "\n[convlab serve] cancelled by the team\n");
    store_.finish(job.id, "failed", std::nullopt, "cancelled", std::nullopt);
  } else if (timed_out || WIFSIGNALED(*status)) {
    ended = timed_out ? "stopped after the service's limit of " +
                            std::to_string(static_cast<int>(settings_.time_limit_s)) + " s"
                      : "the grader was killed by signal " + std::to_string(WTERMSIG(*status));
    store_.append_output(job.id, "\n[convlab serve] " + ended + "\n");
    store_.finish(job.id, "failed", std::nullopt, ended, report);
  } else {
    const int code = job_exit_code(job, WEXITSTATUS(*status), report);
    ended = "exit status " + std::to_string(code);
    store_.append_output(
        job.id, "\n[convlab serve] job " + std::to_string(job.id) + " finished: " + ended + "\n");
    store_.finish(job.id, "done", code, "", report);
  }
  const auto took = std::chrono::duration<double>(std::chrono::steady_clock::now() - start);
  std::cout << ("convlab serve: " + job_label(job) + " ended after " +
                std::to_string(std::lround(took.count())) + " s: " + ended + "\n")
            << std::flush;
  if (!settings_.keep_work) {
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
}

}  // namespace convlab::service
