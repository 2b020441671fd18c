// `convlab serve` and `convlab submit` for real: a server on loopback (an ephemeral port), its
// results database and job folders in a temporary folder, and `convlab submit` clients, each
// with its own home folder. The jobs are m2 jobs: they run on the CPU.
#include <doctest/doctest.h>
#include <httplib.h>
#include <sqlite3.h>

#include <nlohmann/json.hpp>
#include <string>

#include "grader/service/job_store.hpp"
#include "tests/grader/service/service_test_support.hpp"

namespace test_service {

namespace fs = std::filesystem;
using namespace convlab::test;
using nlohmann::json;

namespace {

// A class of two teams and one staff account; alpha's checkout holds a working m2, beta's
// the untouched stub (which fails every check).
struct Class {
  TempDir tmp;
  fs::path dir = tmp.path() / "server";
  fs::path alpha = tmp.path() / "alpha", beta = tmp.path() / "beta";

  Class() {
    write_file(dir / "roster.csv", "team,role\nalpha,team\nbeta,team\nprof,staff\n");
    write_file(alpha / "student/m2/conv_cpu.cpp", working_m2());
    write_file(beta / "student/m2/conv_cpu.cpp",
               read_file(source_dir() / "student/m2/conv_cpu.cpp"));
  }
  fs::path home(const std::string& team) const { return tmp.path() / ("home-" + team); }
  fs::path checkout(const std::string& team) const { return tmp.path() / team; }

  // Logs `team` in to `server` with its token; the login must work.
  void login(const ServeProcess& server, const std::string& team) const {
    login_client(home(team), checkout(team), server, dir, team);
  }
};

// What a grade needs on this machine: the test data, a shared framework cache, and no
// isolation feature that a test machine may lack.
std::vector<std::string> grade_options() {
  std::string why;
  const auto data = real_data_dir(&why);
  if (!data) skip(why);
  return {"--data", data->string(), "--cache", CONVLAB_TEST_CACHE, "--allow-degraded"};
}

std::vector<std::string> with(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

httplib::Headers bearer(const std::string& token) {
  return {{"Authorization", "Bearer " + token}};
}

std::string error_text(const httplib::Result& res) {
  const json j = json::parse(res->body, nullptr, false);
  return j.is_object() ? j.value("error", "") : "";
}

}  // namespace

TEST_CASE("a wrong token is refused (401); failed logins from one address get 429") {
  Class c;
  ServeProcess server(c.dir, {"--cpu-jobs", "0", "--max-failed-logins", "3"});
  c.login(server, "alpha");

  std::string out;
  CHECK(submit(c.home("beta"), c.checkout("beta"),
               "login --server " + server.url() + " --token cvl_0000", &out) == 1);
  CHECK(out.find("HTTP 401") != std::string::npos);
  CHECK(out.find("the token is not valid") != std::string::npos);
  CHECK_FALSE(fs::exists(c.home("beta") / ".config/convlab/submit.json"));

  httplib::Client http(server.url());
  CHECK(http.Get("/api/v1/jobs")->status == 401);  // no token: no failure counted
  CHECK(http.Get("/api/v1/jobs", bearer("cvl_1111"))->status == 401);
  CHECK(http.Get("/api/v1/jobs", bearer("cvl_2222"))->status == 401);
  // Three failures in the minute: the address is refused, even with a good token.
  const auto refused = http.Get("/api/v1/jobs", bearer(issued_tokens(c.dir).at("alpha")));
  REQUIRE(refused);
  CHECK(refused->status == 429);
  CHECK(error_text(refused).find("too many failed logins") != std::string::npos);
  CHECK(std::stoi(refused->get_header_value("Retry-After")) > 0);
  CHECK(submit(c.home("alpha"), c.checkout("alpha"), "status", &out) == 1);
  CHECK(out.find("HTTP 429") != std::string::npos);
}

TEST_CASE("issue-token replaces an account's token; bad input to serve is one clear error") {
  Class c;
  ServeProcess server(c.dir, {"--cpu-jobs", "0"});
  const std::string old_token = issued_tokens(c.dir).at("alpha");
  const std::string issue = shell_quote(convlab_binary().string()) +
                            " serve issue-token --roster " +
                            shell_quote((c.dir / "roster.csv").string()) + " --db " +
                            shell_quote((c.dir / "results.sqlite").string());
  std::string out;
  REQUIRE(run_command(issue + " --team alpha 2>/dev/null", &out) == 0);
  const std::string new_token = out.substr(0, out.find('\n'));
  CHECK(new_token.starts_with("cvl_"));
  CHECK(new_token != old_token);
  httplib::Client http(server.url());
  CHECK(http.Get("/api/v1/jobs", bearer(old_token))->status == 401);
  CHECK(http.Get("/api/v1/jobs", bearer(new_token))->status == 200);
  // The database keeps digests only: the token itself is nowhere in it.
  for (const char* file : {"results.sqlite", "results.sqlite-wal"}) {
    CHECK(read_file(c.dir / file).find(new_token) == std::string::npos);
  }

  CHECK(run_command(issue + " --team mallory", &out) == 1);
  CHECK(out.find("'mallory' is not in the roster") != std::string::npos);
  CHECK(run_command(shell_quote(convlab_binary().string()) + " serve --port 0", &out) == 1);
  CHECK(out.find("needs --roster FILE and --db FILE") != std::string::npos);
}

TEST_CASE("malformed, oversized and disallowed uploads: one clear error each, nothing queued") {
  Class c;
  ServeProcess server(c.dir, {"--cpu-jobs", "0"});
  const std::string token = issued_tokens(c.dir).at("alpha");
  httplib::Client http(server.url());
  const auto post = [&](const std::string& body) {
    auto res = http.Post("/api/v1/jobs", bearer(token), body, "application/json");
    REQUIRE(res);
    return res;
  };
  auto res = post("{not json");
  CHECK(res->status == 400);
  CHECK(error_text(res).find("not a JSON object") != std::string::npos);
  res = post(std::string(9u << 20, ' '));
  CHECK(res->status == 413);
  CHECK(error_text(res).find("larger than 8 MiB") != std::string::npos);

  json job = {{"command", "check"}, {"milestone", "m2"}, {"files", {{"student/../../x", "x"}}}};
  res = post(job.dump());
  CHECK(res->status == 422);
  CHECK(error_text(res).find("is refused") != std::string::npos);
  job["files"] = {{"student/m2/notes.txt", "x"}};
  res = post(job.dump());
  CHECK(res->status == 422);
  CHECK(error_text(res).find("only these files are graded: student/m2/conv_cpu.cpp") !=
        std::string::npos);
  job["files"] = {{"student/m2/conv_cpu.cpp", "x"}};
  job["command"] = "run; rm -rf /";
  res = post(job.dump());
  CHECK(res->status == 422);
  CHECK(error_text(res).find("use check, run or grade") != std::string::npos);
  job["command"] = "check";
  job["milestone"] = "m3";  // a GPU milestone on a server without GPU executors
  res = post(job.dump());
  CHECK(res->status == 422);
  CHECK(error_text(res).find("runs no GPU jobs") != std::string::npos);

  const auto list = http.Get("/api/v1/jobs", bearer(token));
  CHECK(json::parse(list->body)["jobs"].empty());
  // The client refuses an unknown milestone itself.
  c.login(server, "alpha");
  std::string out;
  CHECK(submit(c.home("alpha"), c.checkout("alpha"), "check m9", &out) == 1);
}

TEST_CASE("a team may have a limited number of jobs in flight; the reply says the limit") {
  Class c;
  ServeProcess server(c.dir, {"--cpu-jobs", "0", "--max-in-flight", "1"});  // nothing runs
  c.login(server, "alpha");
  c.login(server, "beta");
  std::string out;
  REQUIRE(submit(c.home("alpha"), c.checkout("alpha"), "check m2 --no-wait", &out) == 0);
  CHECK(out.find("queued, position 1") != std::string::npos);
  CHECK(submit(c.home("alpha"), c.checkout("alpha"), "run m2 ece408-high 100 --no-wait", &out) ==
        1);
  CHECK(out.find("HTTP 429") != std::string::npos);
  CHECK(out.find("the limit is 1") != std::string::npos);
  // The limit is per team: beta still gets its place, behind alpha's job.
  REQUIRE(submit(c.home("beta"), c.checkout("beta"), "check m2 --no-wait", &out) == 0);
  CHECK(out.find("queued, position 2") != std::string::npos);
  REQUIRE(submit(c.home("alpha"), c.checkout("alpha"), "status", &out) == 0);
  CHECK(out.find("team alpha: 1 job(s)") != std::string::npos);
  CHECK(out.find("check m2  queued (position 1)") != std::string::npos);
}

TEST_CASE("two teams submit at once: each gets its own result and cannot see the other's job") {
  Class c;
  ServeProcess server(c.dir, with({"--cpu-jobs", "2"}, grade_options()));
  c.login(server, "alpha");
  c.login(server, "beta");
  // Both clients at once, each output to its own file.
  const fs::path a_out = c.tmp.path() / "a.out", b_out = c.tmp.path() / "b.out";
  const auto background = [&](const std::string& team, const fs::path& file) {
    std::string line = "(";
    line += submit_line(c.home(team), c.checkout(team), "check m2");
    line += " > " + shell_quote(file.string()) + " 2>&1; echo $? >> ";
    line += shell_quote(file.string()) + ") & ";
    return line;
  };
  const std::string both = background("alpha", a_out) + background("beta", b_out) + "wait";
  REQUIRE(run_command(both, nullptr) == 0);
  const std::string a = read_file(a_out), b = read_file(b_out);
  INFO("alpha:\n" << a << "\nbeta:\n" << b << "\nserver:\n" << server.log());
  CHECK(a.ends_with("\n0\n"));  // the working code passes: exit 0
  CHECK(a.find("grading alpha, milestone m2") != std::string::npos);
  CHECK(a.find("elementwise/cpu: passed") != std::string::npos);
  CHECK(a.find("beta") == std::string::npos);
  // The server's folders are not shown: the job's own files are "job/...".
  CHECK(a.find(c.dir.string()) == std::string::npos);
  CHECK(a.find("building job/submission") != std::string::npos);
  CHECK(b.ends_with("\n1\n"));  // the stub fails its check: exit 1
  CHECK(b.find("grading beta, milestone m2") != std::string::npos);
  CHECK(b.find("alpha") == std::string::npos);
  // The service's log: where each job ran and how it ended.
  CHECK(server.log().find("(alpha, check m2) started CPU slot") != std::string::npos);
  CHECK(server.log().find("(beta, check m2) ended after") != std::string::npos);
  CHECK(server.log().find("s: exit status 1") != std::string::npos);

  // beta asks for alpha's job: 404, as for a job that does not exist.
  httplib::Client http(server.url());
  const auto tokens = issued_tokens(c.dir);
  const json alpha_jobs = json::parse(http.Get("/api/v1/jobs", bearer(tokens.at("alpha")))->body);
  REQUIRE(alpha_jobs["jobs"].size() == 1);
  const std::string id = std::to_string(alpha_jobs["jobs"][0]["id"].get<int>());
  CHECK(alpha_jobs["jobs"][0]["state"] == "done");
  for (const std::string path : {"", "/output", "/report"}) {
    const auto res = http.Get("/api/v1/jobs/" + id + path, bearer(tokens.at("beta")));
    CAPTURE(path);
    CHECK(res->status == 404);
    CHECK(res->body.find("passed") == std::string::npos);
  }
  std::string out;
  CHECK(submit(c.home("beta"), c.checkout("beta"), "output " + id, &out) == 1);
  CHECK(out.find("HTTP 404") != std::string::npos);
  CHECK(http.Get("/api/v1/jobs/" + id + "/report", bearer(tokens.at("alpha")))->status == 200);
  // Staff see every team's jobs.
  CHECK(json::parse(http.Get("/api/v1/jobs", bearer(tokens.at("prof")))->body)["jobs"].size() == 2);
}

TEST_CASE("restart: queued jobs wait in the database; a running one is queued again, once") {
  Class c;
  const auto grade = grade_options();
  int port = 0;
  const fs::path follow_out = c.tmp.path() / "follow.out";
  {
    ServeProcess server(c.dir, {"--cpu-jobs", "0"});  // accepts, runs nothing
    port = server.port();
    c.login(server, "alpha");
    c.login(server, "beta");
    std::string out;
    REQUIRE(submit(c.home("alpha"), c.checkout("alpha"), "check m2 --no-wait", &out) == 0);
    REQUIRE(submit(c.home("beta"), c.checkout("beta"), "check m2 --no-wait", &out) == 0);
    // alpha follows its job across the restart.
    // Built piecewise: g++ 12 warns, wrongly, with -Wrestrict on literal + string.
    std::string follow = "(";
    follow += submit_line(c.home("alpha"), c.checkout("alpha"), "output 1");
    follow += " > " + shell_quote(follow_out.string()) + " 2>&1; echo $? >> ";
    follow += shell_quote(follow_out.string()) + ") > /dev/null 2>&1 &";
    REQUIRE(run_command(follow, nullptr) == 0);
    std::this_thread::sleep_for(std::chrono::seconds(1));
    CHECK(server.stop(SIGTERM) == 0);
  }
  // An executor had taken alpha's job when the server went down.
  {
    convlab::service::JobStore store(c.dir / "results.sqlite");
    const auto taken = store.claim("cpu");
    REQUIRE(taken);
    CHECK(taken->first.team == "alpha");
  }
  // Down long enough for the follower's polls to fail.
  std::this_thread::sleep_for(std::chrono::milliseconds(2500));
  // The same port, as a real server keeps it.
  ServeProcess server(c.dir, with({"--cpu-jobs", "1"}, grade), port);
  CHECK(server.log().find("1 job(s) were running when the server stopped") != std::string::npos);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(90);
  std::string followed;
  while (std::chrono::steady_clock::now() < deadline) {
    followed = read_file(follow_out);
    if (followed.ends_with("\n0\n") || followed.ends_with("\n1\n")) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  INFO(followed);
  CHECK(followed.find("lost the server; trying again") != std::string::npos);
  CHECK(followed.find("queued again (attempt 2 of 2)") != std::string::npos);
  CHECK(followed.find("elementwise/cpu: passed") != std::string::npos);
  CHECK(followed.ends_with("\n0\n"));
  std::string out;
  CHECK(submit(c.home("beta"), c.checkout("beta"), "output 2", &out) == 1);  // the stub fails
  CHECK(out.find("grading beta") != std::string::npos);
  CHECK(out.find("queued again") == std::string::npos);
}

TEST_CASE("a grade job records the run in the results database and keeps its report") {
  Class c;
  ServeProcess server(c.dir, with({"--cpu-jobs", "1"}, grade_options()));
  c.login(server, "beta");
  std::string out;
  // The stub fails every check quickly; the grade itself completes: exit 0, whatever the score.
  CHECK(submit(c.home("beta"), c.checkout("beta"), "grade m2", &out) == 0);
  INFO(out);
  CHECK(out.find("Total: 0 / 30 points") != std::string::npos);

  // One grade, one row.
  CHECK(recorded_runs(c.dir / "results.sqlite") == std::vector<RecordedRun>{{"beta", "m2", 0.0}});
  sqlite3* db = nullptr;
  REQUIRE(sqlite3_open_v2((c.dir / "results.sqlite").c_str(), &db, SQLITE_OPEN_READONLY, nullptr) ==
          SQLITE_OK);
  sqlite3_stmt* st = nullptr;
  // The job's row, and its output stored as it came: in several chunks, not once at the end.
  REQUIRE(sqlite3_prepare_v2(db,
                             "SELECT state, attempts, exit_code, started_at IS NOT NULL, "
                             "finished_at IS NOT NULL, report_json IS NOT NULL, "
                             "(SELECT count(*) FROM job_output WHERE job_id = 1) "
                             "FROM jobs WHERE id = 1",
                             -1, &st, nullptr) == SQLITE_OK);
  REQUIRE(sqlite3_step(st) == SQLITE_ROW);
  CHECK(std::string(reinterpret_cast<const char*>(sqlite3_column_text(st, 0))) == "done");
  CHECK(sqlite3_column_int(st, 1) == 1);
  CHECK(sqlite3_column_int(st, 2) == 0);
  CHECK(sqlite3_column_int(st, 3) == 1);
  CHECK(sqlite3_column_int(st, 4) == 1);
  CHECK(sqlite3_column_int(st, 5) == 1);
  CHECK(sqlite3_column_int(st, 6) > 3);
  sqlite3_finalize(st);
  sqlite3_close(db);

  httplib::Client http(server.url());
  const auto report = http.Get("/api/v1/jobs/1/report", bearer(issued_tokens(c.dir).at("beta")));
  REQUIRE(report->status == 200);
  const json r = json::parse(report->body);
  CHECK(r["team"] == "beta");
  CHECK(r["checks"].size() > 3);
  CHECK_FALSE(r.contains("submission"));  // the server's paths stay on the server
}

}  // namespace test_service
