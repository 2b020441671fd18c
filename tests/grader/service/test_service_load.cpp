// A load test of `convlab serve` on loopback: 50 real `convlab submit` clients (25 teams, two
// clients each) send 500 m2 check jobs, each client one job after the other, and follow each to
// its end. It checks that no job is lost or run twice, that each client read its own team's
// output only, and prints the latencies (submit to the job's start, to the grader's first
// line, to the end: percentiles over the 500 jobs as the clients saw them), the throughput and
// the server's peak memory.
//
// By default each job runs a stand-in grader (a shell script that prints a check's lines and
// writes a passing report at once), so the run measures the service (HTTP, queue, database,
// executors, output) and stays short. With CONVLAB_LOAD_REAL=1 the jobs run the real
// `convlab grade` (build in the sandbox, the element-wise check; the data and the staff
// solution needed), one per core: about 2 CPU-seconds a job. CONVLAB_LOAD_JOBS=N sends N jobs
// instead of 500 (a multiple of the 50 clients). docs/instructor.md shows both.
#include <doctest/doctest.h>
#include <fcntl.h>
#include <poll.h>
#include <spawn.h>
#include <sqlite3.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <optional>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "tests/grader/service/service_test_support.hpp"

extern char** environ;

namespace test_service_load {

namespace fs = std::filesystem;
using namespace convlab::test;
using Clock = std::chrono::steady_clock;

namespace {

constexpr int kClients = 50;
constexpr int kTeams = 25;

// Stand-in for `convlab grade` (the service runs PROGRAM grade SUBMISSION --milestone m2 --team
// T --out OUT --only 'elementwise/*' ...): records the run's folder (job-ID-ATTEMPT) in
// @RUNS@, prints what a check prints and writes a passing report.
constexpr const char* kStandIn = R"SH(#!/bin/sh
shift 2
while [ $# -gt 0 ]; do
  case $1 in
    --team) team=$2; shift 2;;
    --out) out=$2; shift 2;;
    *) shift;;
  esac
done
echo "$(dirname "$out")" >> '@RUNS@'
echo "grading $team, milestone m2 (stand-in grader)"
mkdir -p "$out"
printf '{"team": "%s", "checks": [{"id": "elementwise/cpu", "status": "passed"}]}\n' "$team" \
  > "$out/report.json"
echo "[1/1] elementwise/cpu: passed 5/5, 0.0 s"
)SH";

std::string team_name(int t) {
  char name[16];
  std::snprintf(name, sizeof name, "team%02d", t);
  return name;
}

double seconds(Clock::time_point from, Clock::time_point to) {
  return std::chrono::duration<double>(to - from).count();
}

// One job as its client saw it.
struct Sample {
  std::string team;
  int exit = -1;
  std::string output;
  std::int64_t job = 0;
  std::optional<double> started_s, first_line_s;  // the service's start line; the grader's
  double done_s = 0;                              // the client's exit
};

// Runs `convlab submit check m2` as a client of `home` on `checkout` and times its output.
// Called on the clients' threads: no assertion here.
Sample run_client(const std::string& team, const fs::path& home, const fs::path& checkout,
                  const fs::path& err_log) {
  Sample s;
  s.team = team;
  int out[2];
  if (pipe2(out, O_CLOEXEC) != 0) {
    s.output = std::string("pipe: ") + std::strerror(errno);
    return s;
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, out[1], STDOUT_FILENO);
  posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, err_log.c_str(),
                                   O_WRONLY | O_CREAT | O_APPEND, 0600);
  std::vector<std::string> args{convlab_binary().string(), "submit", "check", "m2", "--dir",
                                checkout.string()};
  std::vector<std::string> env{"HOME=" + home.string(), "XDG_CONFIG_HOME="};
  for (char** e = environ; *e != nullptr; ++e) {
    if (std::strncmp(*e, "HOME=", 5) != 0 && std::strncmp(*e, "XDG_CONFIG_HOME=", 16) != 0) {
      env.emplace_back(*e);
    }
  }
  std::vector<char*> argv, envp;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  for (std::string& e : env) envp.push_back(e.data());
  envp.push_back(nullptr);

  const auto t0 = Clock::now();
  pid_t pid = -1;
  const int rc = posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  close(out[1]);
  if (rc != 0) {
    close(out[0]);
    s.output = std::string("posix_spawn: ") + std::strerror(rc);
    return s;
  }
  char buf[4096];
  for (ssize_t n; (n = read(out[0], buf, sizeof buf)) != 0;) {
    if (n < 0) {
      if (errno == EINTR) continue;
      break;
    }
    s.output.append(buf, static_cast<std::size_t>(n));
    const double at = seconds(t0, Clock::now());
    if (!s.started_s) s.started_s = at;
    if (!s.first_line_s && s.output.find("\ngrading ") != std::string::npos) s.first_line_s = at;
  }
  close(out[0]);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  s.done_s = seconds(t0, Clock::now());
  s.exit = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  std::smatch m;
  if (std::regex_search(s.output, m,
                        std::regex(R"(\[convlab serve\] job (\d+): check m2 started)"))) {
    s.job = std::stoll(m[1]);
  }
  return s;
}

std::string percentiles(std::vector<double> v) {
  if (v.empty()) return "none";
  std::sort(v.begin(), v.end());
  const auto at = [&](double p) {
    return v[std::min(v.size() - 1, static_cast<std::size_t>(p * static_cast<double>(v.size())))];
  };
  std::ostringstream out;
  out.precision(3);
  out << "p50 " << at(0.50) << " s, p90 " << at(0.90) << " s, p99 " << at(0.99) << " s, max "
      << v.back() << " s";
  return out.str();
}

// VmHWM (peak resident memory) of a process, in KiB.
long peak_rss_kib(pid_t pid) {
  std::stringstream in(read_file("/proc/" + std::to_string(pid) + "/status"));
  for (std::string line; std::getline(in, line);) {
    if (line.starts_with("VmHWM:")) return std::stol(line.substr(6));
  }
  return -1;
}

// CPU time (user + system) a process has used, in seconds.
double cpu_seconds(pid_t pid) {
  const std::string stat = read_file("/proc/" + std::to_string(pid) + "/stat");
  // Fields after the command's closing parenthesis; utime and stime are the 14th and 15th.
  std::stringstream in(stat.substr(stat.rfind(')') + 2));
  std::vector<std::string> fields;
  for (std::string f; in >> f;) fields.push_back(f);
  if (fields.size() < 13) return -1;
  return static_cast<double>(std::stoll(fields[11]) + std::stoll(fields[12])) /
         static_cast<double>(sysconf(_SC_CLK_TCK));
}

std::vector<std::string> sql_row(const fs::path& db, const std::string& query) {
  sqlite3* conn = nullptr;
  REQUIRE(sqlite3_open_v2(db.c_str(), &conn, SQLITE_OPEN_READONLY, nullptr) == SQLITE_OK);
  sqlite3_busy_timeout(conn, 5000);
  sqlite3_stmt* st = nullptr;
  REQUIRE(sqlite3_prepare_v2(conn, query.c_str(), -1, &st, nullptr) == SQLITE_OK);
  std::vector<std::string> row;
  if (sqlite3_step(st) == SQLITE_ROW) {
    for (int i = 0; i < sqlite3_column_count(st); ++i) {
      const auto* text = sqlite3_column_text(st, i);
      row.emplace_back(text != nullptr ? reinterpret_cast<const char*>(text) : "");
    }
  }
  sqlite3_finalize(st);
  sqlite3_close(conn);
  return row;
}

}  // namespace

TEST_CASE("load: 50 clients, 500 m2 check jobs; none lost or run twice") {
  const char* real_env = std::getenv("CONVLAB_LOAD_REAL");
  const bool real = real_env != nullptr && std::string(real_env) == "1";
  int jobs = 500;
  if (const char* n = std::getenv("CONVLAB_LOAD_JOBS"); n != nullptr && *n != '\0') {
    jobs = std::stoi(n);
    const bool whole = jobs > 0 && jobs % kClients == 0;
    REQUIRE_MESSAGE(whole, "CONVLAB_LOAD_JOBS must be a positive multiple of " << kClients);
  }
  TempDir tmp;
  const fs::path dir = tmp.path() / "server", runs = tmp.path() / "runs.log";
  std::string roster = "team,role\n";
  for (int t = 1; t <= kTeams; ++t) roster += team_name(t) + ",team\n";
  write_file(dir / "roster.csv", roster);

  std::vector<std::string> options{"--max-in-flight", "2"};
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  if (real) {
    std::string why;
    const auto data = real_data_dir(&why);
    if (!data) skip(why);
    if (!fs::exists(source_dir() / "reference/solutions/m2/conv_cpu.cpp")) {
      skip("staff solutions (reference/solutions/) are not part of this tree");
    }
    options.insert(options.end(), {"--cpu-jobs", std::to_string(cores), "--data", data->string(),
                                   "--cache", CONVLAB_TEST_CACHE, "--allow-degraded"});
  } else {
    std::string text = kStandIn;
    text.replace(text.find("@RUNS@"), 6, runs.string());
    write_file(tmp.path() / "stand-in-grader", text);
    fs::permissions(tmp.path() / "stand-in-grader", fs::perms::owner_all);
    options.insert(options.end(), {"--cpu-jobs", "8", "--grade-program",
                                   (tmp.path() / "stand-in-grader").string()});
  }
  // The real m2 file, which the stand-in never reads.
  const std::string code = fs::exists(source_dir() / "reference/solutions/m2/conv_cpu.cpp")
                               ? working_m2()
                               : read_file(source_dir() / "student/m2/conv_cpu.cpp");

  ServeProcess server(dir, options);
  const auto tokens = issued_tokens(dir);
  // Two clients per team, each with its own home and checkout.
  std::vector<std::string> client_team;
  for (int c = 0; c < kClients; ++c) {
    const std::string team = team_name(c % kTeams + 1);
    client_team.push_back(team);
    const fs::path home = tmp.path() / ("home-" + std::to_string(c));
    write_file(tmp.path() / ("checkout-" + std::to_string(c)) / "student/m2/conv_cpu.cpp", code);
    std::string out;
    REQUIRE(submit(home, tmp.path(),
                   "login --server " + server.url() + " --token " + tokens.at(team), &out) == 0);
  }

  const int per_client = jobs / kClients;
  std::vector<std::vector<Sample>> samples(kClients);
  const auto t0 = Clock::now();
  std::vector<std::thread> clients;
  for (int c = 0; c < kClients; ++c) {
    clients.emplace_back([&, c] {
      const fs::path home = tmp.path() / ("home-" + std::to_string(c));
      const fs::path checkout = tmp.path() / ("checkout-" + std::to_string(c));
      for (int j = 0; j < per_client; ++j) {
        samples[c].push_back(run_client(client_team[c], home, checkout,
                                        tmp.path() / ("client-" + std::to_string(c) + ".err")));
      }
    });
  }
  for (std::thread& t : clients) t.join();
  const double wall_s = seconds(t0, Clock::now());
  const long rss_kib = peak_rss_kib(server.pid());
  const double server_cpu_s = cpu_seconds(server.pid());
  const std::string log = server.log();
  INFO("server:\n" << log.substr(0, 4000));

  // Every client: exit 0, its own team's job and output only.
  std::set<std::int64_t> seen;
  std::vector<double> started, first_line, done;
  int bad = 0;
  for (int c = 0; c < kClients; ++c) {
    for (const Sample& s : samples[c]) {
      const bool ok = s.exit == 0 && s.job > 0 &&
                      s.output.find("grading " + s.team + ", milestone m2") != std::string::npos &&
                      s.output.find("elementwise/cpu: passed") != std::string::npos;
      bool foreign = false;
      for (int t = 1; t <= kTeams; ++t) {
        if (team_name(t) != s.team && s.output.find(team_name(t)) != std::string::npos) {
          foreign = true;
        }
      }
      if ((!ok || foreign) && ++bad <= 3) {
        MESSAGE("client " << c << " (" << s.team << "): exit " << s.exit << "\n"
                          << s.output << "\n"
                          << read_file(tmp.path() / ("client-" + std::to_string(c) + ".err")));
      }
      if (s.job > 0) CHECK_MESSAGE(seen.insert(s.job).second, "job " << s.job << " seen twice");
      if (s.started_s) started.push_back(*s.started_s);
      if (s.first_line_s) first_line.push_back(*s.first_line_s);
      done.push_back(s.done_s);
    }
  }
  CHECK(bad == 0);
  CHECK(static_cast<int>(seen.size()) == jobs);

  // The database: every job done, started once.
  const auto row = sql_row(dir / "results.sqlite",
                           "SELECT count(*), sum(state = 'done'), min(attempts), max(attempts), "
                           "sum(exit_code = 0) FROM jobs");
  REQUIRE(row.size() == 5);
  CHECK(row[0] == std::to_string(jobs));
  CHECK(row[1] == std::to_string(jobs));
  CHECK(row[2] == "1");
  CHECK(row[3] == "1");
  CHECK(row[4] == std::to_string(jobs));
  if (!real) {
    // The grader ran once per job: one line per run, each job's folder (attempt 1) once.
    std::stringstream in(read_file(runs));
    std::map<std::int64_t, int> ran;
    int lines = 0;
    std::smatch m;
    for (std::string line; std::getline(in, line); ++lines) {
      const std::string name = fs::path(line).filename().string();
      if (std::regex_match(name, m, std::regex(R"(job-(\d+)-1)"))) ++ran[std::stoll(m[1])];
    }
    CHECK(lines == jobs);
    CHECK(static_cast<int>(ran.size()) == jobs);
    for (const auto& [id, count] : ran) {
      CHECK_MESSAGE(count == 1, "job " << id << " ran " << count << " times");
      CHECK_MESSAGE(seen.contains(id), "job " << id << " ran, but no client saw it");
    }
  }
  CHECK(rss_kib > 0);
  CHECK(rss_kib < 1024 * 1024);  // a queue of small jobs: far below a GiB

  std::ostringstream report;
  report.precision(3);
  report << jobs << " m2 check jobs (" << (real ? "the real convlab grade" : "stand-in grader")
         << "), " << kClients << " clients of " << kTeams << " teams, on "
         << (real ? std::to_string(cores) : std::string("8")) << " CPU executor slots, " << cores
         << " cores\n"
         << "  wall " << wall_s << " s, " << jobs / wall_s << " jobs/s\n"
         << "  submit to start (first output line): " << percentiles(started) << "\n"
         << "  submit to the grader's first line:   " << percentiles(first_line) << "\n"
         << "  submit to done (client exits):       " << percentiles(done) << "\n"
         << "  server peak RSS (VmHWM): " << rss_kib / 1024.0 << " MiB; server CPU time "
         << server_cpu_s << " s (its executors' children not counted)";
  MESSAGE(report.str());
  CHECK(server.stop(SIGTERM) == 0);
}

}  // namespace test_service_load
