// Without a cluster: what grade-all --slurm reads from Slurm (sbatch, squeue, scontrol), which
// ends are the cluster's fault, the script it writes (--dry-run), bad options; and `convlab
// ingest`: one row per report however often it runs, the team is the folder's name, and a
// report that is not a grade report, a link, or one naming another team is refused.
#include <doctest/doctest.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "grader/class/ingest.hpp"
#include "grader/class/report_reader.hpp"
#include "grader/class/slurm.hpp"
#include "grader/db/results_db.hpp"
#include "grader/grade/report.hpp"
#include "reference/core/error.hpp"
#include "tests/grader/class/class_test_support.hpp"
#include "tests/support/test_support.hpp"

namespace test_ingest_slurm_units {

using convlab::test::error_of;
namespace fs = std::filesystem;
using namespace convlab::grader;
using convlab::test::dump_db;
using convlab::test::read_text;
using convlab::test::run_command;
using convlab::test::write_text;

namespace {

GradeResult sample(const std::string& team) {
  GradeResult r;
  r.team = team;
  r.milestone = "final";
  r.submission = "/s/" + team;
  r.started_at = "2026-03-01T10:00:00Z";
  r.duration_s = 54.2;
  r.seed = 18446744073709551615ull;  // the largest seed survives the round trip
  r.score = 40;
  r.max_score = 50;
  r.op_time_s = 0.00031;
  r.op_time_median_s = 0.00032;
  r.reference_time_s = 0.0007;
  r.speedup = 0.0007 / 0.00031;
  r.ranked_variant = "best";
  r.ranked_model = "ece408-high";
  r.ranked_images = 10000;
  r.flags = {"look"};
  r.machine.gpu_name = "NVIDIA H100 80GB HBM3";
  r.machine.hostname = "gpu07";
  r.sandbox_json = R"({"features":{"pid_namespace":true}})";
  r.grader_version = "1.0";
  r.framework_hash = "fnv1a64:0011223344556677";
  CheckResult c;
  c.id = "network/best/ece408-high/10000";
  c.name = "best: ece408-high, 10000 images";
  c.kind = "network";
  c.milestone = "final";
  c.status = CheckStatus::passed;
  c.score = c.max_score = 10;
  c.variant = "best";
  c.model = "ece408-high";
  c.images = 10000;
  c.expected_correct = 8562;
  c.correct = 8562;
  c.op_time_s = 0.00031;
  c.op_time_runs_s = {0.00031, 0.00033};
  c.wall_s = 3.5;
  c.details_json = R"({"runs":2})";
  r.checks.push_back(c);
  c.id = "elementwise/best";
  c.kind = "elementwise";
  c.status = CheckStatus::failed;
  c.reason = "mismatch";
  c.score = 0;
  c.expected_correct.reset();
  c.correct.reset();
  c.op_time_s.reset();
  c.op_time_runs_s.clear();
  c.worst_error = 0.5;
  c.details_json = "{}";
  r.checks.push_back(c);
  return r;
}

}  // namespace

TEST_CASE("what Slurm prints is read right") {
  CHECK(parse_sbatch_job("4242\n") == "4242");
  CHECK(parse_sbatch_job("4242;cluster-a\n") == "4242");
  CHECK(parse_sbatch_job("sbatch: error: Batch job submission failed\n").empty());

  const auto q = parse_squeue(
      "12 0 RUNNING node7\n12 3 PENDING \n13 N/A RUNNING node2\n14 [1-3] PENDING\nnonsense\n");
  REQUIRE(q.size() == 3);
  CHECK(q[0].job == "12");
  CHECK(q[0].task == 0);
  CHECK(q[0].state == "RUNNING");
  CHECK(q[0].node == "node7");
  CHECK(q[1].task == 3);
  CHECK(q[1].state == "PENDING");
  CHECK(q[1].node.empty());
  // A job that is not an array (the service's jobs).
  CHECK(q[2].job == "13");
  CHECK(q[2].task == -1);
  CHECK(slurm_task_id(q[2].job, q[2].task) == "13");
  CHECK(slurm_task_id(q[0].job, q[0].task) == "12_0");

  const auto s = parse_scontrol(
      "JobId=12 ArrayJobId=12 ArrayTaskId=2-3%2 JobState=PENDING Reason=JobArrayTaskLimit "
      "ExitCode=0:0\n"
      "JobId=15 ArrayJobId=12 ArrayTaskId=1 JobName=convlab-m2 JobState=CANCELLED Reason=None "
      "ExitCode=0:15 NodeList=n1\n"
      "JobId=14 ArrayJobId=12 ArrayTaskId=0 JobState=COMPLETED Reason=None ExitCode=0:0\n");
  REQUIRE(s.size() == 2);  // the pending range is not one task
  CHECK(s[0].task == 1);
  CHECK(s[0].state == "CANCELLED");
  CHECK(s[0].exit_code == "0:15");
  CHECK(s[1].task == 0);
  CHECK(s[1].state == "COMPLETED");
  const auto plain = parse_scontrol(
      "JobId=31 JobName=convlab-job-4 UserId=root(0) JobState=NODE_FAIL Reason=NodeDown "
      "ExitCode=0:0 NodeList=gpu03\n");
  REQUIRE(plain.size() == 1);
  CHECK(plain[0].job == "31");
  CHECK(plain[0].task == -1);
  CHECK(plain[0].state == "NODE_FAIL");
  CHECK(plain[0].node == "gpu03");

  const auto acct = parse_sacct(
      "40|CANCELLED by 0|0:15|gpu01\n41_2|COMPLETED|0:0|n1\n"
      "42|PENDING|0:0|None assigned\n40.batch|CANCELLED|0:15|gpu01\n");
  REQUIRE(acct.size() == 3);
  CHECK(acct[0].job == "40");
  CHECK(acct[0].task == -1);
  CHECK(acct[0].state == "CANCELLED");
  CHECK(acct[0].exit_code == "0:15");
  CHECK(acct[1].job == "41");
  CHECK(acct[1].task == 2);
  CHECK(acct[2].node.empty());
  CHECK(is_between_states("COMPLETING"));
  CHECK_FALSE(is_between_states("CANCELLED"));
  CHECK(shell_quote("it's") == "'it'\\''s'");
  CHECK(shell_quote("/plain/path-1") == "/plain/path-1");

  for (const char* lost : {"NODE_FAIL", "PREEMPTED", "CANCELLED", "BOOT_FAIL"}) {
    CHECK_MESSAGE(is_cluster_failure(lost), lost);
  }
  // A grade that failed, ran out of time or memory is the grade's: not tried again.
  for (const char* own : {"COMPLETED", "FAILED", "TIMEOUT", "OUT_OF_MEMORY"}) {
    CHECK_MESSAGE(!is_cluster_failure(own), own);
  }
}

TEST_CASE("--dry-run prints the job array script and writes nothing") {
  convlab::test::TempDir tmp;
  for (const char* t : {"t1", "t2", "t3"}) fs::create_directories(tmp.path() / "subs" / t);
  const std::string base = "'" + convlab::test::convlab_binary().string() + "' grade-all '" +
                           (tmp.path() / "subs").string() + "' --out '" +
                           (tmp.path() / "out").string() + "' --slurm --dry-run";
  std::string out;
  REQUIRE_MESSAGE(run_command(base + " --milestone final --partition gpu --account ece408 --time "
                                     "90 --max-parallel 8 --models /hidden --seed 5 "
                                     "--sbatch-option=--qos=course",
                              &out) == 0,
                  out);
  CHECK(out.starts_with("#!/bin/bash\n"));
  for (const char* line :
       {"#SBATCH --job-name=convlab-final\n", "#SBATCH --array=0-2%8\n", "#SBATCH --no-requeue\n",
        "#SBATCH --partition=gpu\n", "#SBATCH --account=ece408\n", "#SBATCH --time=90\n",
        "#SBATCH --gres=gpu:1\n", "#SBATCH --qos=course\n", "--slurm-task \"$SLURM_ARRAY_TASK_ID\"",
        " --models /hidden --seed 5 "}) {
    CHECK_MESSAGE(out.find(line) != std::string::npos, line);
  }
  CHECK(out.find("--db") == std::string::npos);  // tasks never write the database
  CHECK_FALSE(fs::exists(tmp.path() / "out"));

  // A CPU milestone asks for no GPU, and refuses one.
  REQUIRE(run_command(base + " --milestone m2", &out) == 0);
  CHECK(out.find("--gres") == std::string::npos);
  CHECK(out.find("#SBATCH --array=0-2\n") != std::string::npos);
  CHECK(run_command(base + " --milestone m2 --gres gpu:1", &out) == 1);
  CHECK(out.find("runs on the CPU") != std::string::npos);
  // Slurm's options without --slurm, local ones with it.
  const std::string local = "'" + convlab::test::convlab_binary().string() + "' grade-all '" +
                            (tmp.path() / "subs").string() + "' --milestone m2 --out '" +
                            (tmp.path() / "out").string() + "'";
  CHECK(run_command(local + " --partition gpu", &out) == 1);
  CHECK(out.find("--partition belongs to --slurm") != std::string::npos);
  CHECK(run_command(local + " --slurm --jobs 4 --dry-run", &out) == 1);
  CHECK(out.find("--max-parallel") != std::string::npos);
}

TEST_CASE("a report reads back into the grade it was written from") {
  const GradeResult r = sample("team-01");
  const GradeResult back = parse_report(report_json(r));
  CHECK(back.team == r.team);
  CHECK(back.seed == r.seed);
  CHECK(back.op_time_s == r.op_time_s);
  CHECK(back.flags == r.flags);
  CHECK(back.machine.hostname == "gpu07");
  CHECK(back.sandbox_json == R"({"features":{"pid_namespace":true}})");
  REQUIRE(back.checks.size() == 2);
  CHECK(back.checks[0].correct == 8562);
  CHECK(back.checks[0].op_time_runs_s == r.checks[0].op_time_runs_s);
  CHECK(back.checks[0].details_json == R"({"runs":2})");
  CHECK(back.checks[1].status == CheckStatus::failed);
  CHECK(back.checks[1].worst_error == 0.5);
  CHECK_FALSE(back.checks[1].correct);
  // The same document: the same report id.
  CHECK(report_id(report_json(back)) == report_id(report_json(r)));

  CHECK(error_of([] { parse_report("{"); }).find("not valid JSON") != std::string::npos);
  CHECK(error_of([] { parse_report(R"({"schema":"other"})"); }).find("schema") !=
        std::string::npos);
  nlohmann::json j = nlohmann::json::parse(report_json(r));
  j["score"] = "40";
  CHECK(error_of([&] { parse_report(j.dump()); }) == "field score is not a number");
  j = nlohmann::json::parse(report_json(r));
  j["checks"][1]["status"] = "fine";
  const std::string text = j.dump();
  CHECK(error_of([&] { parse_report(text); }).find("checks[1].status") != std::string::npos);
}

TEST_CASE("ingest: one row per report, the folder names the team, bad reports refused") {
  convlab::test::TempDir tmp;
  const fs::path out = tmp.path() / "out", db = tmp.path() / "class.db";
  write_text(out / "alpha/report.json", report_json(sample("alpha")) + "\n");
  write_text(out / "bravo/report.json", report_json(sample("bravo")) + "\n");
  fs::create_directories(out / "charlie");  // its grade wrote nothing
  // A report naming another team (written, say, by a task that was not bravo's).
  write_text(out / "delta/report.json", report_json(sample("bravo")));
  write_text(out / "echo/report.json", "{\"schema\": \"convlab-grade-report/1\"}");
  fs::create_directories(out / "foxtrot");
  fs::create_symlink(out / "alpha/report.json", out / "foxtrot/report.json");
  write_text(out / ".slurm/teams.txt", "alpha\n");

  IngestSummary s = ingest_reports(out, db);
  REQUIRE(s.folders.size() == 6);  // .slurm is not a team
  CHECK(s.count(IngestOutcome::added) == 2);
  CHECK(s.count(IngestOutcome::no_report) == 1);
  CHECK(s.count(IngestOutcome::rejected) == 3);
  CHECK(s.folders[3].team == "delta");
  CHECK(describe(s.folders[3]).find("names team 'bravo', not the folder's 'delta'") !=
        std::string::npos);
  CHECK(describe(s.folders[4]).find("field grader_version is missing") != std::string::npos);
  CHECK(describe(s.folders[5]).find("not a regular file") != std::string::npos);
  const std::string once = dump_db(db);

  // Again: nothing added, the same database, the same run ids.
  s = ingest_reports(out, db);
  CHECK(s.count(IngestOutcome::added) == 0);
  CHECK(s.count(IngestOutcome::already) == 2);
  CHECK(s.folders[0].run_id == 1);
  CHECK(dump_db(db) == once);
  {
    ResultsDb results(db);
    CHECK(results.run_count() == 2);
    const auto alpha = results.load_run(1);
    REQUIRE(alpha);
    CHECK(alpha->result.team == "alpha");
    CHECK(alpha->result.seed == 18446744073709551615ull);
    CHECK(alpha->report_id == report_id(report_json(sample("alpha"))).value());
    CHECK(results.find_report(alpha->report_id) == 1);
    // What `convlab grade --db` recorded is the same report: not recorded twice.
    const Recorded again = results.record_once(sample("bravo"), report_json(sample("bravo")));
    CHECK_FALSE(again.inserted);
    CHECK(again.id == 2);
  }
  // Only some teams; a team without a folder is bad input.
  CHECK(ingest_reports(out, db, {"bravo"}).folders.size() == 1);
  CHECK(error_of([&] { ingest_reports(out, db, {"zulu"}); }).find("no folder for team 'zulu'") !=
        std::string::npos);
  CHECK(error_of([&] { ingest_reports(tmp.path() / "none", db); }).find("no such folder") !=
        std::string::npos);

  // The command: a line per folder, exit 4 when some report was refused.
  std::string text;
  CHECK(run_command("'" + convlab::test::convlab_binary().string() + "' ingest '" + out.string() +
                        "' --db '" + db.string() + "'",
                    &text) == 4);
  CHECK(text.find("alpha: already there (run 1)") != std::string::npos);
  CHECK(text.find("0 added, 2 already there, 3 rejected, 1 without a report") != std::string::npos);
  CHECK(dump_db(db) == once);
}

}  // namespace test_ingest_slurm_units
