// `convlab serve`: the submission service on this host; `convlab serve issue-token`: a team's
// token, printed once, stored as its digest; `convlab serve extend`: a team's later deadline.
#include <signal.h>
#include <sys/stat.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <fstream>
#include <iostream>
#include <sstream>
#include <thread>

#include "grader/service/deadlines.hpp"
#include "grader/service/executor.hpp"
#include "grader/service/job_store.hpp"
#include "grader/service/roster.hpp"
#include "grader/service/server.hpp"
#include "grader/service/slurm_executor.hpp"
#include "grader/service/tokens.hpp"
#include "reference/core/error.hpp"
#include "reference/milestones/milestone.hpp"

namespace convlab::service {
namespace fs = std::filesystem;

namespace {

struct ServeArgs {
  std::string roster, db, host = "127.0.0.1", port_file, data, cache, work, tokens_out, gpus;
  std::string grade_program;  // a stand-in for `convlab grade`, for testing the service
  std::vector<std::string> models, deadlines;
  int port = 8408, cpu_jobs = 2, max_in_flight = 2, max_per_hour = 30, max_failed_logins = 10,
      keepalive_s = 15;
  double time_limit_s = 7200;
  bool allow_degraded = false, keep_work = false;
  std::string executor = "local";
  SlurmSettings slurm;
  std::vector<std::string> local_only, slurm_only;  // the options given, to refuse a mix
  std::string team;              // issue-token, extend
  std::string milestone, until;  // extend
};

const Account& roster_account(const std::vector<Account>& roster, const std::string& name,
                              const std::string& file) {
  for (const Account& a : roster) {
    if (a.name == name) return a;
  }
  throw Error("'" + name + "' is not in the roster " + file + ": add it there first");
}

// Appends "name,token" lines to a file only its owner can read.
void save_tokens(const fs::path& file, const std::vector<std::pair<std::string, std::string>>& t) {
  const mode_t old = umask(077);
  std::ofstream out(file, std::ios::app);
  umask(old);
  if (!out) throw Error("cannot write the new tokens to " + file.string());
  for (const auto& [name, token] : t) out << name << "," << token << "\n";
  if (!out) throw Error("cannot write the new tokens to " + file.string());
}

int issue_token(const ServeArgs& a) {
  const auto roster = load_roster(a.roster);
  roster_account(roster, a.team, a.roster);
  JobStore store(a.db);
  const std::string token = new_token();
  store.set_token(a.team, token_digest(token));
  std::cout << token << std::endl;
  std::cerr << "convlab serve: a new token for " << a.team
            << " (any older one no longer works); it is shown once: hand it to the team\n";
  return 0;
}

void check_milestone(const std::string& milestone) {
  const auto graded = graded_milestone_ids(convlab_root());
  if (std::find(graded.begin(), graded.end(), milestone) == graded.end()) {
    std::string list;
    for (const std::string& m : graded) list += (list.empty() ? "" : ", ") + m;
    throw Error("unknown milestone '" + milestone + "': use " + list);
  }
}

int extend(const ServeArgs& a) {
  const auto roster = load_roster(a.roster);
  roster_account(roster, a.team, a.roster);
  check_milestone(a.milestone);
  const UnixTime until = parse_time(a.until);
  JobStore store(a.db);
  store.set_extension(a.team, a.milestone, iso_utc(until), "admin");
  std::cout << "team " << a.team << " may submit grade jobs for " << a.milestone << " until "
            << utc_text(until) << " (when that is later than the milestone's deadline)"
            << std::endl;
  return 0;
}

std::map<std::string, UnixTime> deadlines_of(const std::vector<std::string>& options) {
  std::map<std::string, UnixTime> out;
  for (const std::string& text : options) {
    const auto [milestone, at] = parse_deadline_option(text);
    check_milestone(milestone);
    if (!out.emplace(milestone, at).second) {
      throw Error("--deadline names milestone " + milestone + " twice: keep one");
    }
  }
  return out;
}

// The options checked before anything starts; each error names the option to fix.
void check_serve_options(const ServeArgs& a) {
  if (a.roster.empty() || a.db.empty()) {
    throw Error("convlab serve needs --roster FILE and --db FILE");
  }
  if (a.port < 0 || a.port > 65535) throw Error("--port must be 0 (any free port) to 65535");
  if (a.cpu_jobs < 0 || a.cpu_jobs > 256) throw Error("--cpu-jobs must be 0 to 256");
  if (a.max_in_flight < 1) throw Error("--max-in-flight must be at least 1");
  if (a.max_per_hour < 0) throw Error("--max-per-hour must be 0 (no limit) or more");
  if (a.max_failed_logins < 1) throw Error("--max-failed-logins must be at least 1");
  const bool slurm = a.executor == "slurm";
  if (slurm && !a.local_only.empty()) {
    throw Error(a.local_only.front() +
                " is for --executor local: with slurm, Slurm places the jobs (--partition, "
                "--gres)");
  }
  if (!slurm && !a.slurm_only.empty()) {
    throw Error(a.slurm_only.front() + " is for --executor slurm");
  }
}

// Queues again the jobs a stopped server left running, and gives every team on the roster
// without a token one, saved where only the staff can read it.
void prepare_store(JobStore& store, const std::vector<Account>& roster, const ServeArgs& a,
                   const fs::path& db) {
  if (const int n = store.recover_interrupted(); n > 0) {
    std::cout << "convlab serve: " << n << " job(s) were running when the server stopped; "
              << "queued again (or failed after " << JobStore::kMaxAttempts << " starts)"
              << std::endl;
  }
  std::vector<std::pair<std::string, std::string>> issued;
  for (const Account& acc : roster) {
    if (store.has_token(acc.name)) continue;
    const std::string token = new_token();
    store.set_token(acc.name, token_digest(token));
    issued.emplace_back(acc.name, token);
  }
  if (issued.empty()) return;
  const fs::path file =
      a.tokens_out.empty() ? fs::path(db.string() + ".new-tokens.csv") : fs::path(a.tokens_out);
  save_tokens(file, issued);
  std::cout << "convlab serve: " << issued.size() << " new token(s) in " << file.string()
            << " (readable by you only): hand each team its own, then delete the file"
            << std::endl;
}

// Where and how the jobs run: the grade's program and options, the GPUs or Slurm.
ExecutorSettings executor_settings(const ServeArgs& a, const fs::path& db, const fs::path& work) {
  ExecutorSettings ex;
  ex.program =
      a.grade_program.empty() ? fs::read_symlink("/proc/self/exe") : fs::absolute(a.grade_program);
  ex.work = work;
  ex.grade.db = db;
  if (!a.data.empty()) ex.grade.data = fs::absolute(a.data);
  if (!a.cache.empty()) ex.grade.cache = fs::absolute(a.cache);
  for (const std::string& m : a.models) ex.grade.models.push_back(fs::absolute(m));
  ex.grade.allow_degraded = a.allow_degraded;
  std::stringstream gpus(a.gpus);
  for (std::string id; std::getline(gpus, id, ',');) {
    if (id.empty() || id.find_first_not_of("0123456789") != std::string::npos) {
      throw Error("--gpus " + a.gpus + ": give GPU ids separated by commas, e.g. 0,1");
    }
    ex.gpus.push_back(id);
  }
  ex.cpu_jobs = a.cpu_jobs;
  ex.time_limit_s = a.time_limit_s;
  ex.keep_work = a.keep_work;
  if (a.executor == "slurm") ex.slurm = a.slurm;
  return ex;
}

// What the HTTP side enforces: accounts, limits, deadlines.
ApiSettings api_settings(const ServeArgs& a, const fs::path& db, const fs::path& work,
                         const std::vector<Account>& roster,
                         const std::map<std::string, UnixTime>& deadlines, bool gpu_jobs) {
  ApiSettings api;
  api.root = convlab_root();
  api.db = db;
  api.staging = work / "staging";
  api.gpu_jobs = gpu_jobs;
  api.max_in_flight = a.max_in_flight;
  api.max_per_hour = a.max_per_hour;
  api.max_failed_logins = a.max_failed_logins;
  api.keepalive = std::chrono::seconds(a.keepalive_s);
  api.roster = roster;
  api.deadlines = deadlines;
  return api;
}

// The lines the staff read when the server is up, and the port file a script waits for.
void announce(const ServeArgs& a, int port, std::size_t accounts, const ExecutorSettings& ex,
              const std::map<std::string, UnixTime>& deadlines) {
  std::cout << "convlab serve: listening on http://" << a.host << ":" << port << " (" << accounts
            << " accounts, ";
  if (a.executor == "slurm") {
    std::cout << "every job a Slurm job, at most " << a.slurm.max_jobs << " in Slurm at once";
  } else {
    std::cout << ex.gpus.size() << " GPU executor(s), " << ex.cpu_jobs << " CPU job(s) at once";
  }
  std::cout << ")" << std::endl;
  for (const auto& [milestone, at] : deadlines) {
    std::cout << "convlab serve: grade jobs for " << milestone << " close at " << utc_text(at)
              << std::endl;
  }
  if (!a.port_file.empty()) {
    const fs::path tmp = a.port_file + ".tmp";
    std::ofstream(tmp) << port << "\n";
    fs::rename(tmp, a.port_file);
  }
}

int serve(const ServeArgs& a) {
  check_serve_options(a);
  const bool slurm = a.executor == "slurm";
  const auto roster = load_roster(a.roster);
  const auto deadlines = deadlines_of(a.deadlines);
  const fs::path db = fs::absolute(a.db);
  const fs::path work = a.work.empty() ? fs::path(db.string() + ".jobs") : fs::absolute(a.work);
  fs::create_directories(work);

  // SIGINT and SIGTERM go to one waiting thread; every other thread blocks them.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  signal(SIGPIPE, SIG_IGN);

  JobStore store(db);
  prepare_store(store, roster, a, db);
  const ExecutorSettings ex = executor_settings(a, db, work);
  const ApiSettings api =
      api_settings(a, db, work, roster, deadlines, slurm || !ex.gpus.empty());

  Executors executors(store, ex);
  Server server(store, executors, api);
  const int port = server.bind(a.host, a.port);
  announce(a, port, roster.size(), ex, deadlines);
  std::thread waiter([&] {
    int sig = 0;
    sigwait(&stop_signals, &sig);
    std::cout << "convlab serve: stopping (signal " << sig << ")" << std::endl;
    server.stop();
  });
  server.listen();
  executors.stop();
  if (waiter.joinable()) {
    // listen() also returns on its own (a failed socket): wake the waiter to end it.
    pthread_kill(waiter.native_handle(), SIGTERM);
    waiter.join();
  }
  return 0;
}

}  // namespace

void add_serve_command(CLI::App& app, int& exit_code) {
  auto a = std::make_shared<ServeArgs>();
  CLI::App* cmd = app.add_subcommand(
      "serve",
      "Run the submission service: teams on the roster send their student/ files with "
      "`convlab submit`; jobs wait in a queue in the results database and run here through "
      "`convlab grade` (staff; put a TLS reverse proxy in front, docs/instructor.md)");
  cmd->add_option("--roster", a->roster, "CSV (name,role) or JSON ({teams, staff}) of accounts");
  cmd->add_option("--db", a->db, "results database: tokens, the job queue, graded runs");
  cmd->add_option("--host", a->host, "address to listen on (default 127.0.0.1, for a proxy)");
  cmd->add_option("--port", a->port, "port (default 8408; 0: any free port)");
  cmd->add_option("--port-file", a->port_file, "write the port here once listening");
  cmd->add_option("--data", a->data, "Fashion-MNIST folder for the grades");
  cmd->add_option("--cache", a->cache, "framework cache for the grades");
  cmd->add_option("--models", a->models, "folder of hidden models, for grade jobs (repeatable)");
  cmd->add_option("--work", a->work, "folder for the jobs' files (default: DB.jobs)");
  cmd->add_option("--tokens-out", a->tokens_out,
                  "where tokens issued at startup go (default: DB.new-tokens.csv)");
  cmd->add_option("--executor", a->executor,
                  "where jobs run: local (this host: --gpus, --cpu-jobs) or slurm (one Slurm "
                  "job each, submitted with sbatch; --work must be on a file system every node "
                  "sees; docs/instructor.md)")
      ->check(CLI::IsMember({"local", "slurm"}));
  const auto local = [a](const std::string& name) {
    return [a, name](const std::string&) { a->local_only.push_back(name); };
  };
  const auto on_slurm = [a](const std::string& name) {
    return [a, name](const std::string&) { a->slurm_only.push_back(name); };
  };
  cmd->add_option("--gpus", a->gpus, "GPU ids for GPU jobs, one job each, e.g. 0,1 (default: "
                                     "none; GPU milestones are then refused)")
      ->each(local("--gpus"));
  cmd->add_option("--cpu-jobs", a->cpu_jobs, "CPU jobs (m2) run at once (default 2)")
      ->each(local("--cpu-jobs"));
  cmd->add_option("--partition", a->slurm.partition,
                  "slurm: the partition of every job (default: the cluster's)")
      ->each(on_slurm("--partition"));
  cmd->add_option("--gpu-partition", a->slurm.gpu_partition,
                  "slurm: the partition of GPU jobs (default: --partition)")
      ->each(on_slurm("--gpu-partition"));
  cmd->add_option("--account", a->slurm.account, "slurm: the account charged")
      ->each(on_slurm("--account"));
  cmd->add_option("--gres", a->slurm.gres,
                  "slurm: what a GPU job asks for (default gpu:1); CPU jobs ask for none")
      ->each(on_slurm("--gres"));
  cmd->add_option("--sbatch-option", a->slurm.sbatch_options,
                  "slurm: one more #SBATCH line for every job, e.g. --qos=course (repeatable)")
      ->each(on_slurm("--sbatch-option"));
  cmd->add_option("--slurm-max-jobs", a->slurm.max_jobs,
                  "slurm: jobs handed to Slurm at once; the others wait in the service's queue "
                  "(default 64)")
      ->check(CLI::Range(1, 100000))
      ->each(on_slurm("--slurm-max-jobs"));
  cmd->add_option("--slurm-poll", a->slurm.poll_s,
                  "slurm: seconds between two looks at Slurm's queue (default 5)")
      ->check(CLI::Range(0.1, 3600.0))
      ->each(on_slurm("--slurm-poll"));
  cmd->add_option("--max-in-flight", a->max_in_flight,
                  "jobs a team may have queued or running (default 2)");
  cmd->add_option("--max-per-hour", a->max_per_hour,
                  "jobs a team may submit per hour (default 30; 0: no limit)");
  cmd->add_option("--max-failed-logins", a->max_failed_logins,
                  "failed logins per address and minute before 429 (default 10)");
  cmd->add_option("--keepalive", a->keepalive_s,
                  "seconds of silence after which a job's output stream sends a keepalive line "
                  "(default 15; keep it below your proxy's idle timeout)")
      ->check(CLI::Range(1, 3600));
  cmd->add_option("--time-limit", a->time_limit_s, "seconds a job may run (default 7200)");
  cmd->add_option("--deadline", a->deadlines,
                  "MILESTONE=TIME: grade jobs for it after TIME are refused, e.g. "
                  "m2=2026-03-01T23:59:00Z (repeatable; extend per team with `serve extend`)");
  // For the service's own tests: a program that stands in for `convlab grade`.
  cmd->add_option("--grade-program", a->grade_program)->group("");
  cmd->add_flag("--allow-degraded", a->allow_degraded,
                "grade where the sandbox lacks a feature (see convlab grade)");
  cmd->add_flag("--keep-work", a->keep_work, "keep each job's folder");

  CLI::App* issue = cmd->add_subcommand(
      "issue-token", "Print a new token for one account of the roster (replacing its old one)");
  issue->add_option("--roster", a->roster, "the roster")->required();
  issue->add_option("--db", a->db, "the results database")->required();
  issue->add_option("--team", a->team, "the account")->required();
  issue->callback([a, &exit_code] { exit_code = issue_token(*a); });
  CLI::App* ext = cmd->add_subcommand(
      "extend",
      "Give one team until a later time for a milestone's grade jobs (the server "
      "reads it at the team's next grade; run it beside a running server)");
  ext->add_option("--roster", a->roster, "the roster")->required();
  ext->add_option("--db", a->db, "the results database")->required();
  ext->add_option("--team", a->team, "the team")->required();
  ext->add_option("--milestone", a->milestone, "the milestone")->required();
  ext->add_option("--until", a->until, "its new deadline, e.g. 2026-03-08T23:59:00Z")->required();
  ext->callback([a, &exit_code] { exit_code = extend(*a); });
  cmd->require_subcommand(0, 1);
  cmd->callback([a, issue, ext, &exit_code] {
    if (issue->parsed() || ext->parsed()) return;
    exit_code = serve(*a);
  });
}

}  // namespace convlab::service
