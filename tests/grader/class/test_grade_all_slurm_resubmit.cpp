// `convlab grade-all --slurm` on a real one-node Slurm cluster, with a stand-in grader (quick):
// a task cancelled mid-grade (scancel) is resubmitted once and the class completes; a task
// whose grade failed is never resubmitted; ingesting the reports again gives the same
// database. Skipped, with the reason, where the cluster cannot start.
#include <doctest/doctest.h>

#include <chrono>
#include <filesystem>
#include <future>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

#include "grader/grade/report.hpp"
#include "tests/grader/class/class_test_support.hpp"
#include "tests/grader/class/slurm_cluster.hpp"
#include "tests/support/test_support.hpp"

namespace test_grade_all_slurm_resubmit {

namespace fs = std::filesystem;
using convlab::test::dump_db;
using convlab::test::read_text;
using convlab::test::run_command;
using convlab::test::write_text;
using nlohmann::json;

using convlab::test::quoted;
using convlab::test::team_of;

namespace {

// Logs each of its runs as <submission>/attempt-N (holding the Slurm task that ran it), then
// behaves as <submission>/behaviour says: "slow_once" sleeps its first time (long enough to be
// cancelled), "fail" exits 1 without a report; otherwise it writes $TEMPLATE's report for the
// team.
constexpr const char* kFakeGrader = R"SH(#!/bin/sh
sub=$2; shift 2
while [ $# -gt 0 ]; do
  case $1 in
    --team) team=$2; shift 2;;
    --out) out=$2; shift 2;;
    *) shift;;
  esac
done
n=1
while [ -e "$sub/attempt-$n" ]; do n=$((n + 1)); done
echo "${SLURM_ARRAY_JOB_ID}_${SLURM_ARRAY_TASK_ID}" > "$sub/attempt-$n"
case $(cat "$sub/behaviour") in
  slow_once) [ "$n" -eq 1 ] && sleep 120;;
  fail) echo "fake grader: cannot read the submission" >&2; exit 1;;
esac
sed "s/@TEAM@/$team/g" "$TEMPLATE" > "$out/report.json"
)SH";

// A whole grade report, as `convlab grade` writes it, for team "@TEAM@".
std::string report_template() {
  convlab::grader::GradeResult r;
  r.team = "@TEAM@";
  r.milestone = "m2";
  r.submission = "/submissions/@TEAM@";
  r.started_at = "2026-01-01T00:00:00Z";
  r.seed = 7;
  r.score = 5;
  r.max_score = 30;
  r.ranked_variant = "cpu";
  r.ranked_model = "ece408-high";
  r.ranked_images = 10000;
  convlab::grader::CheckResult c;
  c.id = "elementwise/cpu";
  c.name = "element-wise";
  c.kind = "elementwise";
  c.milestone = "m2";
  c.status = convlab::grader::CheckStatus::passed;
  c.score = c.max_score = 5;
  r.checks.push_back(c);
  return convlab::grader::report_json(r) + "\n";
}

}  // namespace

TEST_CASE("a cancelled task is resubmitted once, a failed grade never; ingest is idempotent") {
  convlab::test::TempDir tmp;
  const convlab::test::SlurmCluster cluster(tmp.path());
  if (!cluster.ok()) convlab::test::skip("no test Slurm cluster: " + cluster.why());

  const fs::path subs = tmp.path() / "subs", out = tmp.path() / "out";
  const fs::path db = tmp.path() / "class.db", grader = tmp.path() / "fake-convlab";
  const fs::path templ = tmp.path() / "report-template.json";
  write_text(grader, kFakeGrader);
  fs::permissions(grader, fs::perms::owner_all);
  write_text(templ, report_template());
  for (const auto& [team, behaviour] :
       {std::pair{"alpha", "ok"}, std::pair{"bravo", "slow_once"}, std::pair{"charlie", "fail"}}) {
    write_text(subs / team / "student/m2/conv_cpu.cpp", "// " + std::string(team) + "\n");
    write_text(subs / team / "behaviour", std::string(behaviour) + "\n");
  }

  std::string output;
  const std::string command = "TEMPLATE='" + templ.string() + "' " + cluster.env() +
                              quoted(convlab::test::convlab_binary()) + " grade-all" +
                              quoted(subs) + " --milestone m2 --out" + quoted(out) + " --db" +
                              quoted(db) + " --grader" + quoted(grader) +
                              " --slurm --slurm-poll 0.5";
  auto run = std::async(std::launch::async, [&] { return run_command(command, &output); });

  // Cancel bravo's task while it grades: once its first run has written its task's id (the
  // file can exist for a moment before its line does).
  const fs::path first = subs / "bravo/attempt-1";
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(90);
  std::string task;
  while (!(task = read_text(first)).ends_with("\n") && std::chrono::steady_clock::now() < end) {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  REQUIRE_MESSAGE(task.ends_with("\n"), "bravo's task never started\n" << cluster.logs());
  task.erase(task.find_last_not_of("\n") + 1);
  std::string scancel;
  CHECK_MESSAGE(cluster.run("scancel " + task + " 2>&1", &scancel) == 0, scancel);

  const int rc = run.get();
  INFO("grade-all --slurm:\n" << output);
  INFO("cluster logs:\n" << cluster.logs());
  MESSAGE("grade-all --slurm with " << task << " cancelled:\n" << output);
  CHECK(rc == 4);  // charlie could not be graded

  const json s = json::parse(read_text(out / "summary.json"));
  REQUIRE(s["slurm_jobs"].size() == 2);
  const std::string job1 = s["slurm_jobs"][0], job2 = s["slurm_jobs"][1];
  CHECK(task == job1 + "_1");
  CHECK(output.find("resubmitted 1 task lost to the cluster (" + task + " CANCELLED) as job " +
                    job2) != std::string::npos);
  // bravo: graded by a second task, and only two attempts in all.
  const json& bravo = team_of(s, "bravo");
  CHECK(bravo["status"] == "graded");
  CHECK(bravo["resubmitted"] == true);
  CHECK(bravo["slurm_task"] == job2 + "_1");
  CHECK(read_text(subs / "bravo/attempt-2") == job2 + "_1\n");
  CHECK_FALSE(fs::exists(subs / "bravo/attempt-3"));
  // charlie's grade failed: never resubmitted.
  const json& charlie = team_of(s, "charlie");
  CHECK(charlie["status"] == "grader error");
  CHECK(charlie["resubmitted"] == false);
  CHECK(charlie["error"].get<std::string>().find("exited with code 1") != std::string::npos);
  CHECK_FALSE(fs::exists(subs / "charlie/attempt-2"));
  const json& alpha = team_of(s, "alpha");
  CHECK(alpha["status"] == "graded");
  CHECK(alpha["score"] == 5);
  CHECK(alpha["slurm_task"] == job1 + "_0");
  CHECK_FALSE(fs::exists(subs / "alpha/attempt-2"));
  CHECK(output.find("ingested into " + db.string() + ": 2 added, 0 already there, 0 rejected") !=
        std::string::npos);
  CHECK(output.find("of 3 (1 resubmitted)") != std::string::npos);  // the progress line

  // Ingest run again, twice: the same database.
  const std::string before = dump_db(db);
  CHECK(before.find("'bravo'") != std::string::npos);
  for (int i = 0; i < 2; ++i) {
    std::string again;
    REQUIRE_MESSAGE(run_command(quoted(convlab::test::convlab_binary()) + " ingest" + quoted(out) +
                                    " --db" + quoted(db),
                                &again) == 0,
                    again);
    CHECK(again.find("0 added, 2 already there, 0 rejected, 1 without a report") !=
          std::string::npos);
    CHECK(dump_db(db) == before);
  }
}

}  // namespace test_grade_all_slurm_resubmit
