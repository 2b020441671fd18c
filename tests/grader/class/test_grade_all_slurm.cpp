// `convlab grade-all --slurm` on a real one-node Slurm cluster started for the test: a small m2
// class (correct, wrong, stub, crash) graded for real through a job array gives the database
// and the summary a local grade-all of the same class gives; ingesting the tasks' reports
// again changes nothing. Skipped, with the reason, where the cluster cannot start, or where the
// data set or the staff solutions (the correct submission) are missing.
#include <doctest/doctest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>
#include <string>

#include "grader/db/sqlite.hpp"
#include "reference/core/stopwatch.hpp"
#include "tests/grader/class/class_test_support.hpp"
#include "tests/grader/class/slurm_cluster.hpp"
#include "tests/support/test_support.hpp"

namespace test_grade_all_slurm {

namespace fs = std::filesystem;
using convlab::test::dump_db;
using convlab::test::read_text;
using convlab::test::run_command;
using convlab::test::write_text;
using nlohmann::json;

using convlab::test::quoted;
using convlab::test::team_of;

namespace {

// What must be equal between two databases of the same class: per team, its run (score,
// ranked time present or not, grader error) and every check's outcome, in order.
std::map<std::string, std::string> grades_in(const fs::path& db) {
  convlab::grader::sqlite::Connection c(db, false);
  std::map<std::string, std::string> out;
  convlab::grader::sqlite::Statement runs = c.prepare(
      "SELECT id, team, milestone, score, max_score, op_time_s IS NULL, partial, grader_error, "
      "report_id IS NOT NULL FROM runs ORDER BY team, id");
  while (runs.step()) {
    std::ostringstream row;
    row << runs.text(2) << " " << runs.real(3) << "/" << runs.real(4)
        << " no_time=" << runs.int64(5) << " partial=" << runs.int64(6) << " error='"
        << runs.text(7) << "' has_id=" << runs.int64(8);
    convlab::grader::sqlite::Statement checks = c.prepare(
        "SELECT check_id, status, reason, score FROM checks WHERE run_id = ?1 ORDER BY position");
    checks.bind(1, runs.int64(0));
    while (checks.step()) {
      row << "\n  " << checks.text(0) << " " << checks.text(1) << " " << checks.text(2) << " "
          << checks.real(3);
    }
    out[runs.text(1)] += row.str() + "\n";
  }
  return out;
}

}  // namespace

TEST_CASE("an m2 class graded through --slurm gives the database and summary of a local grade") {
  std::string why;
  const auto data = convlab::test::real_data_dir(&why);
  if (!data) convlab::test::skip(why);
  const fs::path src = convlab::test::source_dir();
  const fs::path solution = src / "reference/solutions/m2/conv_cpu.cpp";
  if (!fs::exists(solution)) {
    // The correct submission is the staff solution, taken at test time: the student kit has
    // no working convolution, so there this test cannot run.
    convlab::test::skip("staff solutions (reference/solutions/) are not part of this tree");
  }
  convlab::test::TempDir tmp;
  const convlab::test::SlurmCluster cluster(tmp.path());
  if (!cluster.ok()) convlab::test::skip("no test Slurm cluster: " + cluster.why());

  const fs::path subs = tmp.path() / "subs";
  const std::string correct =
      std::regex_replace(read_text(solution), std::regex("convlab::solution"), "convlab::student");
  write_text(subs / "correct/student/m2/conv_cpu.cpp", correct);
  // The kernel read transposed: it compiles and runs, and gives wrong outputs.
  const std::string wrong =
      std::regex_replace(correct, std::regex(R"(kc\[p \* s\.K \+ q\])"), "kc[q * s.K + p]");
  REQUIRE(wrong != correct);
  write_text(subs / "wrong/student/m2/conv_cpu.cpp", wrong);
  write_text(subs / "stub/student/m2/conv_cpu.cpp", read_text(src / "student/m2/conv_cpu.cpp"));
  const std::string crash =
      std::regex_replace(correct, std::regex(R"(const int ho = s\.H_out\(\))"),
                         "if (s.B > 0) __builtin_trap();\n  const int ho = s.H_out()");
  REQUIRE(crash != correct);
  write_text(subs / "crash/student/m2/conv_cpu.cpp", crash);

  // A partial grade (two quick checks; files, build and symbols always run) keeps the test
  // short; it is the same for both runs.
  std::string common =
      " --milestone m2 --seed 7 --only 'network/cpu/ece408-high/100' --only "
      "'elementwise/cpu' --cache '" CONVLAB_TEST_CACHE "' --data" +
      quoted(*data);
  const std::string convlab = quoted(convlab::test::convlab_binary());
  const fs::path local = tmp.path() / "local", on_slurm = tmp.path() / "graded-on-slurm";
  const fs::path local_db = tmp.path() / "local.db", slurm_db = tmp.path() / "slurm.db";

  std::string out_local, out_slurm;
  auto t0 = std::chrono::steady_clock::now();
  int rc = run_command(convlab + " grade-all" + quoted(subs) + " --out" + quoted(local) + " --db" +
                           quoted(local_db) + " --jobs 2" + common,
                       &out_local);
  const double local_s = convlab::seconds_since(t0);
  INFO("local grade-all:\n" << out_local);
  REQUIRE(rc == 0);

  t0 = std::chrono::steady_clock::now();
  rc = cluster.run(convlab + " grade-all" + quoted(subs) + " --out" + quoted(on_slurm) + " --db" +
                       quoted(slurm_db) + " --slurm --max-parallel 2 --slurm-poll 0.5" + common,
                   &out_slurm);
  const double slurm_s = convlab::seconds_since(t0);
  INFO("grade-all --slurm:\n" << out_slurm);
  INFO("cluster logs:\n" << cluster.logs());
  REQUIRE(rc == 0);
  MESSAGE("grade-all --slurm (" << slurm_s << " s; the same class graded here: " << local_s
                                << " s):\n"
                                << out_slurm);

  // The summary: the same statuses, scores and checks for every team.
  const json a = json::parse(read_text(local / "summary.json"));
  const json b = json::parse(read_text(on_slurm / "summary.json"));
  CHECK(b["graded"] == 4);
  CHECK(b["slurm_jobs"].size() == 1);
  REQUIRE(a["teams"].size() == b["teams"].size());
  for (const char* team : {"correct", "wrong", "stub", "crash"}) {
    CAPTURE(team);
    const json& x = team_of(a, team);
    const json& y = team_of(b, team);
    for (const char* key : {"status", "graded", "score", "max_score", "checks_passed",
                            "checks_total", "flags", "error", "op_time_s"}) {
      CAPTURE(key);
      CHECK(x[key] == y[key]);
    }
    CHECK(y["slurm_task"].get<std::string>().starts_with(b["slurm_jobs"][0].get<std::string>()));
    CHECK(y["resubmitted"] == false);
    // Times within noise: the same grade, on the same two cores.
    CHECK(y["wall_s"].get<double>() < 5 * x["wall_s"].get<double>() + 20);
    CHECK(fs::exists(on_slurm / team / "report.json"));
    CHECK(fs::exists(on_slurm / team / "task.json"));
  }
  CHECK(team_of(b, "correct")["score"] == team_of(b, "correct")["max_score"]);
  CHECK(team_of(b, "correct")["score"].get<double>() > 0);
  CHECK(team_of(b, "wrong")["score"] == 0);
  CHECK(team_of(b, "stub")["score"] == 0);
  CHECK(team_of(b, "crash")["score"] == 0);
  CHECK(read_text(on_slurm / "crash/report.json").find("\"reason\": \"crash\"") !=
        std::string::npos);
  CHECK(read_text(on_slurm / "stub/report.json").find("not_implemented") != std::string::npos);

  // The database: one run per team, with the same grade and checks, written by one writer.
  const auto grades_local = grades_in(local_db), grades_slurm = grades_in(slurm_db);
  CHECK(grades_slurm.size() == 4);
  CHECK(grades_local == grades_slurm);
  CHECK(out_slurm.find("ingested into " + slurm_db.string() +
                       ": 4 added, 0 already there, 0 rejected") != std::string::npos);

  // Ingesting the same folders again changes nothing; nor does ingesting a local class run
  // (the grades recorded there carry the same report ids).
  const std::string before = dump_db(slurm_db);
  std::string out;
  REQUIRE_MESSAGE(
      run_command(convlab + " ingest" + quoted(on_slurm) + " --db" + quoted(slurm_db), &out) == 0,
      out);
  CHECK(out.find("0 added, 4 already there, 0 rejected, 0 without a report") != std::string::npos);
  CHECK(dump_db(slurm_db) == before);
  const std::string local_before = dump_db(local_db);
  REQUIRE_MESSAGE(
      run_command(convlab + " ingest" + quoted(local) + " --db" + quoted(local_db), &out) == 0,
      out);
  CHECK(out.find("0 added, 4 already there") != std::string::npos);
  CHECK(dump_db(local_db) == local_before);
}

}  // namespace test_grade_all_slurm
