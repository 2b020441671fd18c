// Cancelling jobs and the per-team limits, for real: a `convlab serve` on loopback and
// `convlab submit` clients, one of them interrupted with SIGINT as Ctrl-C would. The jobs run
// the stand-in grader (fake_grade.cpp), which can print its process id and sleep.
#include <doctest/doctest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <nlohmann/json.hpp>
#include <string>

#include "tests/grader/service/fake_class.hpp"

namespace test_service_cancel {

using convlab::test::contains;
namespace fs = std::filesystem;
using namespace convlab::test;
using nlohmann::json;

namespace {

// `convlab submit ARGS...` as `team`, its output into `out`, as a terminal would start it:
// SIGINT at its default, so that Ctrl-C reaches it.
pid_t start_client(const FakeClass& c, const std::string& team,
                   const std::vector<std::string>& args, const fs::path& out) {
  const pid_t pid = fork();
  if (pid == 0) {
    if (chdir(c.checkout(team).c_str()) != 0) _exit(126);
    setenv("HOME", c.home(team).c_str(), 1);
    unsetenv("XDG_CONFIG_HOME");
    if (std::freopen(out.c_str(), "w", stdout) == nullptr) _exit(126);
    dup2(STDOUT_FILENO, STDERR_FILENO);
    signal(SIGINT, SIG_DFL);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    std::vector<std::string> words{convlab_binary().string(), "submit"};
    words.insert(words.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (std::string& w : words) argv.push_back(w.data());
    argv.push_back(nullptr);
    execv(argv[0], argv.data());
    _exit(127);
  }
  return pid;
}

// Waits until `file` holds `what` (at most 20 s); returns its text.
std::string wait_for_text(const fs::path& file, const std::string& what) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  std::string text;
  while (std::chrono::steady_clock::now() < deadline) {
    text = read_file(file);
    if (contains(text, what)) return text;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  FAIL("no '" << what << "' in:\n" << text);
  return text;
}

int wait_exit(pid_t pid) {
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

}  // namespace

TEST_CASE("Ctrl-C in convlab submit cancels the job on the server; its process is killed") {
  FakeClass c;
  ServeProcess server(c.dir, c.options({"--cpu-jobs", "1", "--max-in-flight", "3"}));
  c.login(server, "alpha");
  c.login(server, "beta");
  c.code("alpha", "op_ms=2 sleep_s=60");
  const fs::path out = c.tmp.path() / "client.out";
  const pid_t client = start_client(c, "alpha", {"check", "m2"}, out);
  const std::string before = wait_for_text(out, " sleeping\n");  // the job runs
  const int job_pid = std::stoi(before.substr(before.find("pid ") + 4));
  REQUIRE(kill(job_pid, 0) == 0);

  const auto interrupted = std::chrono::steady_clock::now();
  REQUIRE(kill(client, SIGINT) == 0);
  CHECK(wait_exit(client) == 130);
  const std::string said = read_file(out);
  INFO(said);
  CHECK(contains(said, "convlab submit: job 1 is being stopped on the server"));
  const json job = wait_job(server, c.token("alpha"), 1);
  const double stop_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - interrupted)
          .count();
  MESSAGE("Ctrl-C -> job stopped on the server: " << stop_ms << " ms");
  CHECK(job["state"] == "failed");
  CHECK(job["error"] == "cancelled");
  CHECK(kill(job_pid, 0) == -1);
  CHECK(errno == ESRCH);
  std::string text;
  CHECK(c.client("alpha", "output 1", &text) == 1);
  CHECK(contains(text, "[convlab serve] cancelled by the team"));
  CHECK(contains(text, "job 1 failed: cancelled"));

  // A queued job is cancelled before it starts; Ctrl-C on `output` only stops following.
  REQUIRE(c.client("alpha", "check m2 --no-wait", &text) == 0);  // job 2: runs, sleeps
  REQUIRE(c.client("alpha", "check m2 --no-wait", &text) == 0);  // job 3: waits
  const fs::path follow_out = c.tmp.path() / "follow.out";
  const pid_t follower = start_client(c, "alpha", {"output", "2"}, follow_out);
  wait_for_text(follow_out, " sleeping\n");
  REQUIRE(kill(follower, SIGINT) == 0);
  CHECK(wait_exit(follower) == 130);
  CHECK(contains(read_file(follow_out), "stopped following job 2; it goes on"));
  httplib::Client http(server.url());
  CHECK(json::parse(http.Get("/api/v1/jobs/2", bearer(c.token("alpha")))->body)["state"] ==
        "running");
  CHECK(c.client("beta", "cancel 3", &text) == 1);  // not beta's job
  CHECK(contains(text, "HTTP 404"));
  REQUIRE(c.client("alpha", "cancel 3", &text) == 0);
  CHECK(contains(text, "job 3 cancelled before it started"));
  CHECK(wait_job(server, c.token("alpha"), 3)["error"] == "cancelled");
  CHECK(c.client("alpha", "cancel 1", &text) == 1);  // over already
  CHECK(contains(text, "HTTP 409"));
  CHECK(contains(text, "job 1 has already ended"));
  REQUIRE(c.client("alpha", "cancel 2", &text) == 0);
  CHECK(wait_job(server, c.token("alpha"), 2)["error"] == "cancelled");
}

TEST_CASE("a team's jobs per hour are limited; the reply says the limit and when it frees") {
  FakeClass c;
  ServeProcess server(
      c.dir, c.options({"--cpu-jobs", "0", "--max-in-flight", "10", "--max-per-hour", "2"}));
  c.login(server, "alpha");
  c.login(server, "beta");
  std::string out;
  REQUIRE(c.client("alpha", "check m2 --no-wait", &out) == 0);
  CHECK(contains(out, "and submit 2 an hour: 1 so far"));
  REQUIRE(c.client("alpha", "cancel 1", &out) == 0);  // a cancelled job still counts
  REQUIRE(c.client("alpha", "check m2 --no-wait", &out) == 0);
  CHECK(c.client("alpha", "check m2 --no-wait", &out) == 1);
  CHECK(contains(out, "HTTP 429"));
  CHECK(contains(out, "team alpha has submitted 2 jobs in the last hour; the limit is 2 an hour"));
  CHECK(contains(out, " UTC (in 60 min)"));
  REQUIRE(c.client("beta", "check m2 --no-wait", &out) == 0);  // per team
  httplib::Client http(server.url());
  const auto refused = http.Post("/api/v1/jobs", bearer(c.token("alpha")),
                                 json{{"command", "check"},
                                      {"milestone", "m2"},
                                      {"files", {{"student/m2/conv_cpu.cpp", "// x\n"}}}}
                                     .dump(),
                                 "application/json");
  REQUIRE(refused);
  CHECK(refused->status == 429);
  CHECK(std::stoi(refused->get_header_value("Retry-After")) > 3500);
  CHECK(json::parse(http.Get("/api/v1/jobs", bearer(c.token("alpha")))->body)["jobs"].size() == 2);
}

}  // namespace test_service_cancel
