// The submission service's parts without a server: tokens and their digests, the limit on
// failed logins, the roster, the allow-list of job requests, the grade's argument vector, and
// the queue's order, output chunks and recovery after a restart.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "grader/service/job_request.hpp"
#include "grader/service/job_store.hpp"
#include "grader/service/roster.hpp"
#include "grader/service/tokens.hpp"
#include "reference/core/error.hpp"
#include "reference/milestones/cli_values.hpp"
#include "tests/grader/service/service_test_support.hpp"

namespace fs = std::filesystem;
using namespace convlab::service;
using convlab::test::write_file;
using nlohmann::json;

namespace {

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "(no error)";
}

int status_of(const std::string& body) {
  try {
    parse_job_request(body, "alpha", convlab::test::source_dir());
  } catch (const RequestError& e) {
    return e.status();
  }
  return 0;
}

json m2_check() {
  return {{"command", "check"},
          {"milestone", "m2"},
          {"files", {{"student/m2/conv_cpu.cpp", "int x;\n"}}}};
}

}  // namespace

TEST_CASE("tokens are random, and the database keeps their SHA-256 only") {
  const std::string a = new_token(), b = new_token();
  CHECK(a != b);
  CHECK(a.starts_with("cvl_"));
  CHECK(a.size() == 4 + 64);
  CHECK(token_digest("abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  CHECK(token_digest(a) != token_digest(b));
}

TEST_CASE("failed logins: an address is refused after the limit, for the rest of the minute") {
  LoginLimiter limiter(3);
  const auto t0 = LoginLimiter::Clock::now();
  for (int i = 0; i < 2; ++i) limiter.failed("10.0.0.1", t0);
  CHECK(limiter.blocked_for("10.0.0.1", t0) == 0);
  limiter.failed("10.0.0.1", t0 + std::chrono::seconds(1));
  const int wait = limiter.blocked_for("10.0.0.1", t0 + std::chrono::seconds(1));
  CHECK(wait > 0);
  CHECK(wait <= 60);
  CHECK(limiter.blocked_for("10.0.0.2", t0) == 0);  // another address is not concerned
  CHECK(limiter.blocked_for("10.0.0.1", t0 + std::chrono::seconds(61)) == 0);
}

TEST_CASE("the roster: CSV or JSON, and one clear error for each mistake") {
  convlab::test::TempDir tmp;
  const fs::path csv = tmp.path() / "roster.csv";
  write_file(csv, "team,role\nalpha,team\n# a comment\nbeta\nprof,staff\n");
  const auto accounts = load_roster(csv);
  REQUIRE(accounts.size() == 3);
  CHECK(accounts[0].name == "alpha");
  CHECK_FALSE(accounts[1].staff);
  CHECK(accounts[2].staff);

  const fs::path json_file = tmp.path() / "roster.json";
  write_file(json_file, R"({"teams": ["alpha", {"name": "beta"}], "staff": ["prof"]})");
  const auto from_json = load_roster(json_file);
  REQUIRE(from_json.size() == 3);
  CHECK(from_json[2].name == "prof");
  CHECK(from_json[2].staff);

  write_file(csv, "team\nalpha\nbad name\n");
  CHECK(error_of([&] { load_roster(csv); }).find("roster.csv:3: 'bad name' is not a valid name") !=
        std::string::npos);
  write_file(csv, "team\nalpha\nalpha\n");
  CHECK(error_of([&] { load_roster(csv); }).find("names 'alpha' twice") != std::string::npos);
  write_file(csv, "alpha\nbeta\n");
  CHECK(error_of([&] { load_roster(csv); }).find("the first line must name the columns") !=
        std::string::npos);
  write_file(csv, "team,role\nalpha,admin\n");
  CHECK(error_of([&] { load_roster(csv); }).find("role 'admin'") != std::string::npos);
  write_file(csv, "team\n");
  CHECK(error_of([&] { load_roster(csv); }).find("names no team") != std::string::npos);
  CHECK_FALSE(valid_account_name("../x"));
  CHECK_FALSE(valid_account_name("-rf"));
  CHECK(valid_account_name("team-7.b_2"));
}

TEST_CASE("a job request: commands, milestones, variants, models and counts from an allow-list") {
  const fs::path root = convlab::test::source_dir();
  const JobSpec ok = parse_job_request(m2_check().dump(), "alpha", root);
  CHECK(ok.team == "alpha");
  CHECK(ok.device == "cpu");
  CHECK(ok.files.at("student/m2/conv_cpu.cpp") == "int x;\n");

  json run = m2_check();
  run["command"] = "run";
  run["model"] = "ece408-low";
  run["images"] = 100;
  CHECK(json::parse(parse_job_request(run.dump(), "alpha", root).args_json) ==
        json{{"model", "ece408-low"}, {"images", 100}});

  CHECK(status_of("not json") == 400);
  json j = m2_check();
  j["command"] = "sh -c 'id'";
  CHECK(status_of(j.dump()) == 422);
  j = m2_check();
  j["milestone"] = "m1";  // nothing of the team's to run
  CHECK(status_of(j.dump()) == 422);
  j = m2_check();
  j["variant"] = convlab::variant_names().front();  // m2 has no GPU variant
  CHECK(status_of(j.dump()) == 422);
  j = run;
  j["model"] = "ece408-high; ls";
  CHECK(status_of(j.dump()) == 422);
  j = run;
  j["images"] = 123;  // not a count the milestone checks
  CHECK(status_of(j.dump()) == 422);
  j = run;
  j["images"] = "100";
  CHECK(status_of(j.dump()) == 400);
  j = m2_check();
  j["model"] = "ece408-low";  // only run takes one
  CHECK(status_of(j.dump()) == 422);
  for (const char* bad : {"student/../x.cpp", "/etc/passwd", "other/x.cpp", "student/.hidden",
                          "student/a\\b.cpp", "student//x.cpp"}) {
    j = m2_check();
    j["files"] = {{bad, "x"}};
    CAPTURE(bad);
    CHECK(status_of(j.dump()) == 422);
  }
  j = m2_check();
  j["files"] = {{"student/m2/conv_cpu.cpp", std::string((1u << 20) + 1, 'x')}};
  CHECK(status_of(j.dump()) == 413);
  j = m2_check();
  for (int i = 0; i < 65; ++i) j["files"]["student/f" + std::to_string(i) + ".cpp"] = "";
  CHECK(status_of(j.dump()) == 413);
  j = m2_check();
  j["files"] = json::object();
  CHECK(status_of(j.dump()) == 422);
}

TEST_CASE("the grader's own file rules judge an upload") {
  const fs::path root = convlab::test::source_dir();
  convlab::test::TempDir tmp;
  write_job_files({{"student/m2/conv_cpu.cpp", "int x;\n"}}, tmp.path() / "ok");
  CHECK(upload_problems(tmp.path() / "ok", "m2", root).empty());
  write_job_files({{"student/m2/notes.txt", "hello\n"}}, tmp.path() / "extra");
  const auto problems = upload_problems(tmp.path() / "extra", "m2", root);
  REQUIRE(problems.size() == 1);
  CHECK(problems[0].find("student/m2/notes.txt: only these files are graded") !=
        std::string::npos);
}

TEST_CASE("a job runs as an argument vector: a team's words stay single arguments") {
  JobInfo job;
  job.team = "alpha";
  job.milestone = "m2";
  job.command = "run";
  job.args_json = R"({"model": "ece408-high", "images": 100})";
  GradeSettings settings;
  settings.db = "/srv/results.sqlite";
  settings.allow_degraded = true;
  const auto run = grade_arguments(job, settings, "/w/sub", "/w/out");
  CHECK(run == std::vector<std::string>{"grade", "/w/sub", "--milestone", "m2", "--team", "alpha",
                                        "--out", "/w/out", "--only",
                                        "network/*/ece408-high/100", "--allow-degraded"});
  job.command = "check";
  job.args_json = "{}";
  const auto check = grade_arguments(job, settings, "/w/sub", "/w/out");
  CHECK(std::find(check.begin(), check.end(), "elementwise/*") != check.end());
  CHECK(std::find(check.begin(), check.end(), "--db") == check.end());  // a check is no grade
  job.command = "grade";
  const auto grade = grade_arguments(job, settings, "/w/sub", "/w/out");
  CHECK(std::find(grade.begin(), grade.end(), "--db") != grade.end());
  CHECK(std::find(grade.begin(), grade.end(), "--only") == grade.end());
}

TEST_CASE("the queue: oldest first, output in chunks, a restart queues a running job once") {
  convlab::test::TempDir tmp;
  JobStore store(tmp.path() / "results.sqlite");
  JobSpec spec;
  spec.team = "alpha";
  spec.command = "check";
  spec.milestone = "m2";
  spec.device = "cpu";
  spec.args_json = "{}";
  spec.files = {{"student/m2/conv_cpu.cpp", "int x;\n"}};
  const auto first = store.enqueue(spec);
  int in_flight = 0;
  CHECK_FALSE(store.enqueue_within(spec, 1, &in_flight));  // alpha is at its limit of 1
  CHECK(in_flight == 1);
  spec.team = "beta";
  const auto second = store.enqueue(spec);
  CHECK(store.in_flight("alpha") == 1);
  CHECK(store.position(second) == 2);
  CHECK_FALSE(store.claim("gpu"));  // no GPU job queued

  auto claimed = store.claim("cpu");
  REQUIRE(claimed);
  CHECK(claimed->first.id == first);
  CHECK(claimed->first.attempts == 1);
  CHECK(claimed->second.at("student/m2/conv_cpu.cpp") == "int x;\n");
  CHECK(store.position(second) == 1);

  store.append_output(first, "ab");
  store.append_output(first, "cde");
  CHECK(store.output(first, 0).text == "abcde");
  CHECK(store.output(first, 0).next == 5);
  CHECK(store.output(first, 3).text == "de");
  CHECK(store.output(first, 5).text.empty());
  CHECK(store.output(first, 5).next == 5);

  CHECK(store.recover_interrupted() == 1);
  CHECK(store.get(first)->state == "queued");
  CHECK(store.output(first, 5).text.find("queued again (attempt 2 of 2)") != std::string::npos);
  claimed = store.claim("cpu");
  REQUIRE(claimed);
  CHECK(claimed->first.id == first);  // still the oldest
  CHECK(claimed->first.attempts == 2);
  CHECK(store.recover_interrupted() == 1);
  CHECK(store.get(first)->state == "failed");
  CHECK(store.get(first)->error == "interrupted by restarts");
  CHECK(store.in_flight("alpha") == 0);

  store.finish(second, "done", 0, "", std::string(R"({"checks": []})"));
  CHECK(store.report(second) == std::string(R"({"checks": []})"));
  CHECK(store.list("beta", 10).size() == 1);
  CHECK(store.list("", 10).size() == 2);
}
