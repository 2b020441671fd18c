// Deadlines per milestone, for real: a `convlab serve` on loopback with --deadline options and
// `convlab submit` clients. Its jobs run the stand-in grader (fake_grade.cpp), which records a
// run with the Op Time the team's file names, in a fraction of a second.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "grader/db/results_db.hpp"
#include "grader/service/deadlines.hpp"
#include "tests/grader/service/fake_class.hpp"

namespace test_service_deadlines {

namespace fs = std::filesystem;
using namespace convlab::test;
using convlab::service::iso_utc;
using convlab::service::unix_now;
using convlab::service::utc_text;
using nlohmann::json;

namespace {

std::string has(const std::string& text, const std::string& what) {
  return text.find(what) != std::string::npos ? "yes" : "no: " + text;
}

json post_extension(const ServeProcess& server, const std::string& token, const json& body,
                    int* status) {
  httplib::Client http(server.url());
  const auto res = http.Post("/api/v1/extensions", bearer(token), body.dump(), "application/json");
  REQUIRE(res);
  *status = res->status;
  return json::parse(res->body, nullptr, false);
}

}  // namespace

TEST_CASE("a grade after the deadline is refused with the deadline in UTC; staff extend it") {
  FakeClass c;
  const auto now = unix_now();
  const auto closed = now - 3600, open = now + 86400, extended = now + 3600;
  ServeProcess server(c.dir,
                      c.options({"--cpu-jobs", "0", "--max-in-flight", "4", "--deadline",
                                 "m2=" + iso_utc(closed), "--deadline", "final=" + iso_utc(open)}));
  CHECK(has(server.log(), "grade jobs for m2 close at " + utc_text(closed)) == "yes");
  c.login(server, "alpha");
  c.login(server, "beta");

  std::string out;
  CHECK(c.client("alpha", "grade m2", &out) == 1);
  CHECK(has(out, "HTTP 403") == "yes");
  CHECK(has(out, "the deadline of milestone m2 was " + utc_text(closed)) == "yes");
  CHECK(has(out, "ask your course staff for an extension") == "yes");
  CHECK(has(out, "no grade of m2 recorded") == "yes");
  // Debugging runs go on after the deadline.
  CHECK(c.client("alpha", "check m2 --no-wait", &out) == 0);

  // The admin command, beside the running server: alpha gets an hour more.
  const std::string admin = shell_quote(convlab_binary().string()) + " serve extend --roster " +
                            shell_quote((c.dir / "roster.csv").string()) + " --db " +
                            shell_quote((c.dir / "results.sqlite").string());
  REQUIRE(run_command(admin + " --team alpha --milestone m2 --until " + iso_utc(extended), &out) ==
          0);
  CHECK(has(out, "team alpha may submit grade jobs for m2 until " + utc_text(extended)) == "yes");
  CHECK(c.client("alpha", "grade m2 --no-wait", &out) == 0);
  CHECK(has(out, "submitted before " + utc_text(extended) +
                     " (your extension) is the one that "
                     "counts") == "yes");
  CHECK(c.client("beta", "grade m2", &out) == 1);  // beta has no extension
  CHECK(has(out, "HTTP 403") == "yes");
  // Bad input to the admin command: one clear error each.
  CHECK(run_command(admin + " --team mallory --milestone m2 --until " + iso_utc(extended), &out) ==
        1);
  CHECK(has(out, "'mallory' is not in the roster") == "yes");
  CHECK(run_command(admin + " --team beta --milestone m2 --until tomorrow", &out) == 1);
  CHECK(has(out, "'tomorrow' is not a time") == "yes");
  CHECK(run_command(admin + " --team beta --milestone m9 --until " + iso_utc(extended), &out) == 1);
  CHECK(has(out, "unknown milestone 'm9'") == "yes");

  // The API: staff only.
  int status = 0;
  json reply = post_extension(server, c.token("alpha"),
                              {{"team", "beta"}, {"milestone", "m2"}, {"until", iso_utc(extended)}},
                              &status);
  CHECK(status == 403);
  CHECK(has(reply.value("error", ""), "only course staff") == "yes");
  reply = post_extension(server, c.token("prof"),
                         {{"team", "beta"}, {"milestone", "m2"}, {"until", "soon"}}, &status);
  CHECK(status == 422);
  reply = post_extension(server, c.token("prof"),
                         {{"team", "beta"}, {"milestone", "m2"}, {"until", iso_utc(extended)}},
                         &status);
  CHECK(status == 200);
  CHECK(reply["deadline"] == utc_text(extended));
  CHECK(reply["extended"] == true);
  CHECK(c.client("beta", "grade m2 --no-wait", &out) == 0);

  // Each team sees its own deadlines.
  REQUIRE(c.client("alpha", "status", &out) == 0);
  CHECK(has(out, "milestone m2: grades close " + utc_text(extended) +
                     " (extended for your team)") == "yes");
  CHECK(has(out, "milestone final: grades close " + utc_text(open)) == "yes");

  // A deadline the server cannot read stops it at startup.
  const std::string serve = shell_quote(convlab_binary().string()) + " serve --roster " +
                            shell_quote((c.dir / "roster.csv").string()) + " --db " +
                            shell_quote((c.tmp.path() / "other.sqlite").string()) + " --port 0";
  CHECK(run_command(serve + " --deadline m2=2026-02-30T12:00Z", &out) == 1);
  CHECK(has(out, "no such day") == "yes");
  CHECK(run_command(serve + " --deadline m2=2026-03-01T12:00", &out) == 1);
  CHECK(has(out, "a date, a time and a zone are needed") == "yes");
  CHECK(run_command(serve + " --deadline 2026-03-01T12:00Z", &out) == 1);
  CHECK(has(out, "give it as MILESTONE=TIME") == "yes");
}

TEST_CASE("the last grade before the deadline counts, and the leaderboard ranks it") {
  FakeClass c;
  // Teams graded outside the service keep their fastest run.
  {
    convlab::grader::ResultsDb db(c.dir / "results.sqlite");
    for (const double ms : {4.0, 1.5}) {
      convlab::grader::GradeResult g;
      g.team = "charlie";
      g.milestone = "m2";
      g.started_at = "2026-01-01T00:00:00Z";
      g.op_time_s = ms * 1e-3;
      g.ranked_variant = "cpu";
      g.ranked_model = "ece408-high";
      g.ranked_images = 10000;
      db.record(g, "{}");
    }
  }
  std::string out;
  // Job 1 runs on a server without a deadline, so a slow machine cannot make it late; the
  // server with the deadline then starts on the same database.
  {
    ServeProcess before(c.dir, c.options({"--cpu-jobs", "2", "--max-in-flight", "4"}));
    c.login(before, "alpha");
    c.code("alpha", "op_ms=2");
    REQUIRE(c.client("alpha", "grade m2", &out) == 0);  // job 1, followed to its end
    INFO(out);
    CHECK(has(out, "recorded as run") == "yes");
  }
  const auto deadline = unix_now() + 6;
  ServeProcess server(c.dir, c.options({"--cpu-jobs", "2", "--max-in-flight", "4", "--deadline",
                                        "m2=" + iso_utc(deadline)}));
  c.login(server, "alpha");
  c.login(server, "beta");
  // Job 2 is slower, and still running when the deadline passes: it is the one that counts.
  const auto left_ms = (deadline + 1 - unix_now()) * 1000;
  c.code("alpha", "op_ms=5 delay_ms=" + std::to_string(left_ms));
  REQUIRE(c.client("alpha", "grade m2 --no-wait", &out) == 0);
  c.code("beta", "op_ms=3");
  REQUIRE(c.client("beta", "grade m2 --no-wait", &out) == 0);
  const bool submitted_in_time = unix_now() <= deadline;
  REQUIRE_MESSAGE(submitted_in_time, "the machine was too slow to submit before the deadline");

  while (unix_now() <= deadline) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  CHECK(wait_job(server, c.token("alpha"), 2)["state"] == "done");
  CHECK(wait_job(server, c.token("beta"), 3)["state"] == "done");
  c.code("alpha", "op_ms=1");  // faster, but late
  CHECK(c.client("alpha", "grade m2", &out) == 1);
  CHECK(has(out, "the deadline of milestone m2 was " + utc_text(deadline)) == "yes");
  CHECK(has(out, "Your grade that counts is job 2") == "yes");

  // The API marks the one that counts.
  httplib::Client http(server.url());
  const json jobs = json::parse(http.Get("/api/v1/jobs", bearer(c.token("alpha")))->body)["jobs"];
  REQUIRE(jobs.size() == 2);
  CHECK(jobs[0]["id"] == 2);
  CHECK(jobs[0]["counts"] == true);
  CHECK(jobs[1]["counts"] == false);
  REQUIRE(c.client("alpha", "status", &out) == 0);
  CHECK(has(out, "the grade that counts: job 2") == "yes");

  // The leaderboard ranks alpha's job 2 (5 ms), not its fastest run (2 ms).
  const std::string board_cmd = shell_quote(convlab_binary().string()) + " leaderboard --db " +
                                shell_quote((c.dir / "results.sqlite").string()) +
                                " --milestone m2 --csv " +
                                shell_quote((c.tmp.path() / "board.csv").string());
  REQUIRE(run_command(board_cmd, &out) == 0);
  const std::string csv = read_file(c.tmp.path() / "board.csv");
  INFO(csv);
  CHECK(has(csv, "1,charlie,1.5000,") == "yes");
  CHECK(has(csv, "2,beta,3.0000,") == "yes");
  CHECK(has(csv, "3,alpha,5.0000,") == "yes");
  CHECK(csv.find("2.0000") == std::string::npos);
}

}  // namespace test_service_deadlines
