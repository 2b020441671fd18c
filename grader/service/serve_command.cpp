// `convlab serve`: the submission service on this host; `convlab serve issue-token`: a team's
// token, printed once, stored as its digest.
#include <signal.h>
#include <sys/stat.h>

#include <CLI/CLI.hpp>
#include <fstream>
#include <iostream>
#include <sstream>
#include <thread>

#include "grader/service/executor.hpp"
#include "grader/service/job_store.hpp"
#include "grader/service/roster.hpp"
#include "grader/service/server.hpp"
#include "grader/service/tokens.hpp"
#include "reference/core/error.hpp"
#include "reference/milestones/milestone.hpp"

namespace convlab::service {
namespace fs = std::filesystem;

namespace {

struct ServeArgs {
  std::string roster, db, host = "127.0.0.1", port_file, data, cache, work, tokens_out, gpus;
  std::vector<std::string> models;
  int port = 8408, cpu_jobs = 2, max_in_flight = 2, max_failed_logins = 10;
  double time_limit_s = 7200;
  bool allow_degraded = false, keep_work = false;
  std::string team;  // issue-token
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

int serve(const ServeArgs& a) {
  if (a.roster.empty() || a.db.empty()) {
    throw Error("convlab serve needs --roster FILE and --db FILE");
  }
  if (a.port < 0 || a.port > 65535) throw Error("--port must be 0 (any free port) to 65535");
  if (a.cpu_jobs < 0 || a.cpu_jobs > 256) throw Error("--cpu-jobs must be 0 to 256");
  if (a.max_in_flight < 1) throw Error("--max-in-flight must be at least 1");
  if (a.max_failed_logins < 1) throw Error("--max-failed-logins must be at least 1");
  const auto roster = load_roster(a.roster);
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
  if (!issued.empty()) {
    const fs::path file =
        a.tokens_out.empty() ? fs::path(db.string() + ".new-tokens.csv") : fs::path(a.tokens_out);
    save_tokens(file, issued);
    std::cout << "convlab serve: " << issued.size() << " new token(s) in " << file.string()
              << " (readable by you only): hand each team its own, then delete the file"
              << std::endl;
  }

  ExecutorSettings ex;
  ex.program = fs::read_symlink("/proc/self/exe");
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

  ApiSettings api;
  api.root = convlab_root();
  api.staging = work / "staging";
  api.gpu_jobs = !ex.gpus.empty();
  api.max_in_flight = a.max_in_flight;
  api.max_failed_logins = a.max_failed_logins;
  api.roster = roster;

  Executors executors(store, ex);
  Server server(store, executors, api);
  const int port = server.bind(a.host, a.port);
  std::cout << "convlab serve: listening on http://" << a.host << ":" << port << " ("
            << roster.size() << " accounts, " << ex.gpus.size() << " GPU executor(s), "
            << ex.cpu_jobs << " CPU job(s) at once)" << std::endl;
  if (!a.port_file.empty()) {
    const fs::path tmp = a.port_file + ".tmp";
    std::ofstream(tmp) << port << "\n";
    fs::rename(tmp, a.port_file);
  }
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
  cmd->add_option("--gpus", a->gpus, "GPU ids for GPU jobs, one job each, e.g. 0,1 (default: "
                                     "none; GPU milestones are then refused)");
  cmd->add_option("--cpu-jobs", a->cpu_jobs, "CPU jobs (m2) run at once (default 2)");
  cmd->add_option("--max-in-flight", a->max_in_flight,
                  "jobs a team may have queued or running (default 2)");
  cmd->add_option("--max-failed-logins", a->max_failed_logins,
                  "failed logins per address and minute before 429 (default 10)");
  cmd->add_option("--time-limit", a->time_limit_s, "seconds a job may run (default 7200)");
  cmd->add_flag("--allow-degraded", a->allow_degraded,
                "grade where the sandbox lacks a feature (see convlab grade)");
  cmd->add_flag("--keep-work", a->keep_work, "keep each job's folder");

  CLI::App* issue = cmd->add_subcommand(
      "issue-token", "Print a new token for one account of the roster (replacing its old one)");
  issue->add_option("--roster", a->roster, "the roster")->required();
  issue->add_option("--db", a->db, "the results database")->required();
  issue->add_option("--team", a->team, "the account")->required();
  issue->callback([a, &exit_code] { exit_code = issue_token(*a); });
  cmd->require_subcommand(0, 1);
  cmd->callback([a, cmd, issue, &exit_code] {
    if (issue->parsed()) return;
    exit_code = serve(*a);
  });
}

}  // namespace convlab::service
