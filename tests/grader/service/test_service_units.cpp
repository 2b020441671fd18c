// The submission service's parts without a server: tokens and their digests, the limit on
// failed logins, the roster, the allow-list of job requests, the grade's argument vector, the
// queue's order, output chunks and recovery after a restart, a job's output sent on in lines,
// the Slurm executor's batch script, deadlines and the grade that counts.
#include <doctest/doctest.h>

#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>

#include "grader/db/results_db.hpp"
#include "grader/service/deadlines.hpp"
#include "grader/service/job_output.hpp"
#include "grader/service/job_request.hpp"
#include "grader/service/job_store.hpp"
#include "grader/service/roster.hpp"
#include "grader/service/slurm_executor.hpp"
#include "grader/service/tokens.hpp"
#include "reference/core/error.hpp"
#include "reference/milestones/cli_values.hpp"
#include "tests/grader/service/service_test_support.hpp"

namespace test_service_units {

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
  CHECK(problems[0].find("student/m2/notes.txt: only these files are graded") != std::string::npos);
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
                                        "--out", "/w/out", "--only", "network/*/ece408-high/100",
                                        "--as-run", "--allow-degraded"});
  job.command = "check";
  job.args_json = "{}";
  const auto check = grade_arguments(job, settings, "/w/sub", "/w/out");
  CHECK(std::find(check.begin(), check.end(), "elementwise/*") != check.end());
  CHECK(std::find(check.begin(), check.end(), "--db") == check.end());  // a check is no grade
  job.command = "grade";
  const auto grade = grade_arguments(job, settings, "/w/sub", "/w/out");
  CHECK(std::find(grade.begin(), grade.end(), "--db") != grade.end());
  CHECK(std::find(grade.begin(), grade.end(), "--only") == grade.end());
  // On Slurm the node writes no database: the service ingests the report.
  settings.db.clear();
  const auto on_node = grade_arguments(job, settings, "/w/sub", "/w/out");
  CHECK(std::find(on_node.begin(), on_node.end(), "--db") == on_node.end());
}

TEST_CASE("a Slurm job's script: its resources, the grade quoted, the exit status recorded") {
  JobInfo job;
  job.id = 12;
  job.team = "alpha";
  job.command = "run";
  job.milestone = "m3";
  job.device = "gpu";
  job.attempts = 2;
  SlurmSettings slurm;
  slurm.partition = "cpu";
  slurm.gpu_partition = "gpu";
  slurm.account = "ece408";
  slurm.sbatch_options = {"--qos=course"};
  const std::string script = slurm_job_script(
      job, {"/opt/convlab", "grade", "/w/job-12-2/submission", "--only", "network/*/x/1"},
      "/w/job-12-2", slurm, 3601);
  CHECK(script.starts_with("#!/bin/bash\n"));
  for (const char* line : {"#SBATCH --job-name=convlab-job-12\n", "#SBATCH --no-requeue\n",
                           "#SBATCH --output=/w/job-12-2/output.log\n", "#SBATCH --time=61\n",
                           "#SBATCH --partition=gpu\n", "#SBATCH --account=ece408\n",
                           "#SBATCH --gres=gpu:1\n", "#SBATCH --qos=course\n",
                           "/opt/convlab grade /w/job-12-2/submission --only 'network/*/x/1'\n",
                           "if [ \"$status\" -lt 128 ]; then\n",
                           "mv /w/job-12-2/exit-status.tmp /w/job-12-2/exit-status\n"}) {
    CHECK_MESSAGE(script.find(line) != std::string::npos, line);
  }
  // A CPU job asks for no GPU, on the CPU partition.
  job.device = "cpu";
  const std::string cpu = slurm_job_script(job, {"/opt/convlab"}, "/w/job-12-2", slurm, 60);
  CHECK(cpu.find("--gres") == std::string::npos);
  CHECK(cpu.find("#SBATCH --partition=cpu\n") != std::string::npos);
  CHECK(cpu.find("#SBATCH --time=1\n") != std::string::npos);
  CHECK(error_of([&] {
          slurm_job_script(job, {"/opt/convlab"}, "/my jobs/job-1-1", slurm, 60);
        }).find("holds a space") != std::string::npos);
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

  // A lost run is queued again with its attempt counted; a job Slurm never took, without.
  spec.team = "gamma";
  const auto third = store.enqueue(spec);
  REQUIRE(store.claim("cpu")->first.id == second);
  REQUIRE(store.claim("cpu")->first.id == third);
  store.requeue(third, "lost\n", true);
  CHECK(store.get(third)->state == "queued");
  CHECK(store.get(third)->attempts == 1);
  CHECK(store.output(third, 0).text == "lost\n");
  CHECK(store.claim("cpu")->first.attempts == 2);
  store.requeue(third, "", false);
  CHECK(store.get(third)->attempts == 1);
  CHECK(store.output(third, 0).text == "lost\n");

  store.finish(second, "done", 0, "", std::string(R"({"checks": []})"));
  CHECK(store.report(second) == std::string(R"({"checks": []})"));
  CHECK(store.list("beta", 10).size() == 1);
  CHECK(store.list("", 10).size() == 3);
}

TEST_CASE("a job's output goes on in whole lines, its folder shown as job/, capped") {
  convlab::test::TempDir tmp;
  JobStore store(tmp.path() / "results.sqlite");
  JobSpec spec;
  spec.team = "alpha";
  spec.command = "check";
  spec.milestone = "m2";
  spec.device = "cpu";
  spec.args_json = "{}";
  const auto id = store.enqueue(spec);
  const fs::path dir = tmp.path() / "job-1-1", log = dir / "output.log";
  fs::create_directories(dir);
  OutputForwarder output(store, id, log, dir);
  output.forward(false);  // no file yet
  CHECK_FALSE(output.started());
  std::ofstream out(log, std::ios::binary);
  out << "building " << dir.string() << "/submission\npart" << std::flush;
  output.forward(false);
  CHECK(output.started());
  CHECK(store.output(id, 0).text == "building job/submission\n");
  out << "ial line" << std::flush;
  output.forward(true);
  CHECK(store.output(id, 0).text == "building job/submission\npartial line");
  out << std::string(kMaxOutputBytes, 'x') << "\n" << std::flush;
  output.forward(false);
  const std::string all = store.output(id, 0).text;
  CHECK(all.size() < static_cast<std::size_t>(kMaxOutputBytes) + 100);
  CHECK(all.ends_with("output capped at 8 MiB; the rest is not kept\n"));

  JobInfo job;
  job.command = "check";
  CHECK(job_exit_code(job, 0, std::string(R"({"checks": [{"status": "failed"}]})")) == 1);
  CHECK(job_exit_code(job, 0, std::string(R"({"checks": [{"status": "passed"}]})")) == 0);
  CHECK(job_exit_code(job, 2, std::nullopt) == 2);
  job.command = "grade";  // any score
  CHECK(job_exit_code(job, 0, std::string(R"({"checks": [{"status": "failed"}]})")) == 0);
}

TEST_CASE("deadlines: times with a zone, shown in UTC; an extension only moves one later") {
  CHECK(parse_time("2026-03-01T23:59:00Z") == 1772409540);
  CHECK(parse_time("2026-03-01T23:59Z") == 1772409540);
  CHECK(parse_time("2026-03-01 23:59:00Z") == 1772409540);
  CHECK(parse_time("2026-03-02T00:59:00+01:00") == 1772409540);
  CHECK(parse_time("2026-03-01T18:59:00-05:00") == 1772409540);
  CHECK(utc_text(1772409540) == "2026-03-01 23:59:00 UTC");
  CHECK(iso_utc(1772409540) == "2026-03-01T23:59:00Z");
  CHECK(error_of([] { parse_time("2026-03-01T23:59:00"); }).find("a zone are needed") !=
        std::string::npos);
  CHECK(error_of([] { parse_time("2026-02-29T12:00Z"); }).find("no such day") !=
        std::string::npos);  // 2026 is no leap year
  CHECK(error_of([] { parse_time("2026-03-01T24:00Z"); }).find("out of range") !=
        std::string::npos);
  CHECK(error_of([] { parse_time("next friday"); }).find("2026-03-01T23:59:00Z (UTC)") !=
        std::string::npos);
  const auto [milestone, at] = parse_deadline_option("final=2026-03-01T23:59Z");
  CHECK(milestone == "final");
  CHECK(at == 1772409540);
  CHECK(error_of([] { parse_deadline_option("=2026-03-01T23:59Z"); }).find("MILESTONE=TIME") !=
        std::string::npos);

  const std::map<std::string, UnixTime> deadlines{{"m2", 1000}};
  CHECK_FALSE(team_deadline(deadlines, "m3", 5000));  // no deadline: none to extend
  CHECK(team_deadline(deadlines, "m2", std::nullopt)->at == 1000);
  CHECK_FALSE(team_deadline(deadlines, "m2", std::nullopt)->extended);
  CHECK(team_deadline(deadlines, "m2", 2000)->at == 2000);
  CHECK(team_deadline(deadlines, "m2", 2000)->extended);
  CHECK(team_deadline(deadlines, "m2", 500)->at == 1000);  // never earlier than the class's
}

TEST_CASE("the queue links a grade job to the run it recorded; extensions per team") {
  convlab::test::TempDir tmp;
  const fs::path file = tmp.path() / "results.sqlite";
  JobStore store(file);
  JobSpec spec;
  spec.team = "alpha";
  spec.command = "grade";
  spec.milestone = "m2";
  spec.device = "cpu";
  spec.args_json = "{}";
  spec.files = {{"student/m2/conv_cpu.cpp", "int x;\n"}};
  const auto first = store.enqueue(spec), second = store.enqueue(spec);
  spec.command = "check";
  const auto check = store.enqueue(spec);
  convlab::grader::GradeResult g;
  g.team = "alpha";
  g.milestone = "m2";
  g.started_at = "2026-01-01T00:00:00Z";
  const std::string report = R"({"schema": "convlab-grade-report/1", "seed": 1})";
  const std::int64_t run = convlab::grader::ResultsDb(file).record(g, report);

  store.finish(first, "done", 0, "", report);
  CHECK(store.get(first)->run_id == run);
  CHECK(store.counted_jobs("alpha") == std::map<std::string, std::int64_t>{{"m2", first}});
  store.finish(check, "done", 0, "", report);  // a check job records no run
  CHECK_FALSE(store.get(check)->run_id);
  store.finish(second, "failed", std::nullopt, "killed", std::nullopt);  // no run: first stays
  CHECK(store.counted_jobs("alpha").at("m2") == first);
  CHECK(store.counted_jobs("beta").empty());

  store.set_extension("alpha", "m2", "2026-03-01T23:59:00Z", "prof");
  store.set_extension("alpha", "m2", "2026-03-02T23:59:00Z", "prof");  // replaces
  CHECK(store.extensions("alpha") ==
        std::map<std::string, std::string>{{"m2", "2026-03-02T23:59:00Z"}});
  CHECK(store.extensions("beta").empty());
}

TEST_CASE("the queue: limits per team in flight and per hour; cancelling queued or running") {
  convlab::test::TempDir tmp;
  JobStore store(tmp.path() / "results.sqlite");
  JobSpec spec;
  spec.team = "alpha";
  spec.command = "check";
  spec.milestone = "m2";
  spec.device = "cpu";
  spec.args_json = "{}";
  spec.files = {{"student/m2/conv_cpu.cpp", "int x;\n"}};
  const auto first = store.admit(spec, 5, 2);
  REQUIRE(first.id);
  CHECK(first.last_hour == 0);
  const auto second = store.admit(spec, 5, 2);
  REQUIRE(second.id);
  const auto third = store.admit(spec, 5, 2);
  CHECK_FALSE(third.id);  // two this hour already
  CHECK(third.last_hour == 2);
  CHECK(third.in_flight == 2);
  CHECK(third.hour_frees_at.size() == 20);  // 2026-...T...Z
  CHECK(store.admit(spec, 5, 0).id);        // 0: no hourly limit
  CHECK_FALSE(store.admit(spec, 3, 0).id);  // three in flight

  const std::uint64_t before = store.generation();
  CHECK(store.cancel(*first.id) == "cancelled");  // queued: over at once
  CHECK(store.generation() != before);
  CHECK(store.get(*first.id)->state == "failed");
  CHECK(store.get(*first.id)->error == "cancelled");
  CHECK(store.output(*first.id, 0).text.find("cancelled by the team") != std::string::npos);
  const auto running = store.claim("cpu");
  REQUIRE(running);
  CHECK(running->first.id == *second.id);
  CHECK_FALSE(store.cancel_requested(*second.id));
  CHECK(store.cancel(*second.id) == "cancelling");  // running: its executor stops it
  CHECK(store.cancel_requested(*second.id));
  CHECK(store.get(*second.id)->state == "running");
  CHECK(store.cancel(*first.id) == "failed");  // over already
  CHECK(store.cancel(999).empty());
  // A restart does not run again a job its team cancelled.
  CHECK(store.recover_interrupted() == 1);
  CHECK(store.get(*second.id)->state == "failed");
  CHECK(store.get(*second.id)->error == "cancelled");
}

}  // namespace test_service_units
