// The results database: schema, migration, refusal of foreign and newer files, record and
// read-back, best per team, and eight graders writing at once.
#include <doctest/doctest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <fstream>
#include <iostream>
#include <limits>
#include <set>
#include <sstream>

#include "grader/db/results_db.hpp"
#include "grader/db/sqlite.hpp"
#include "tests/support/test_support.hpp"

namespace test_results_db {

using convlab::test::error_of;
using convlab::test::read_all;
using namespace convlab;
using namespace convlab::grader;
namespace fs = std::filesystem;

namespace {

std::int64_t count(sqlite::Connection& c, const std::string& sql) {
  sqlite::Statement st = c.prepare(sql);
  REQUIRE(st.step());
  return st.int64(0);
}

std::set<std::string> columns(sqlite::Connection& c, const std::string& table) {
  std::set<std::string> out;
  sqlite::Statement st = c.prepare("PRAGMA table_info(" + table + ")");
  while (st.step()) out.insert(st.text(1));
  return out;
}

CheckResult network_check(const std::string& variant, const std::string& model, std::int64_t images,
                          CheckStatus status, std::optional<double> t) {
  CheckResult c;
  c.id = "network/" + variant + "/" + model + "/" + std::to_string(images);
  c.name = variant + ": " + model + ", " + std::to_string(images) + " images";
  c.kind = "network";
  c.status = status;
  c.reason = status == CheckStatus::passed ? "ok" : "wrong_count";
  c.variant = variant;
  c.model = model;
  c.images = images;
  c.op_time_s = t;
  c.milestone = "final";
  return c;
}

// A final-milestone grade of `team` whose ranked time is `t` (nullopt: the ranked check
// failed); variants get times derived from t.
GradeResult grade(const std::string& team, std::optional<double> t,
                  const std::string& milestone = "final") {
  GradeResult g;
  g.team = team;
  g.milestone = milestone;
  g.submission = "/submissions/" + team;
  g.started_at = "2025-05-01T12:00:00Z";
  g.duration_s = 42.5;
  g.seed = 1234;
  g.score = t ? 50 : 20;
  g.max_score = 60;
  g.op_time_s = t;
  g.op_time_median_s = t ? std::optional<double>(*t * 1.01) : std::nullopt;
  g.reference_time_s = 0.00155;
  if (t) g.speedup = 0.00155 / *t;
  g.ranked_variant = "best";
  g.ranked_model = "ece408-high";
  g.ranked_images = 10000;
  g.machine.gpu_name = "NVIDIA H100 80GB HBM3";
  const double base = t.value_or(0.004);
  g.checks.push_back(
      network_check("shared_tiling", "ece408-high", 10000, CheckStatus::passed, base * 4));
  g.checks.push_back(network_check("best", "ece408-high", 10000,
                                   t ? CheckStatus::passed : CheckStatus::failed,
                                   t ? t : std::nullopt));
  return g;
}

}  // namespace

TEST_CASE("a new database has the current schema, WAL, a key and foreign keys") {
  test::TempDir dir;
  const fs::path file = dir.path() / "results.sqlite";
  std::string key;
  {
    ResultsDb db(file);
    CHECK(db.schema_version() == ResultsDb::current_schema_version());
    CHECK(ResultsDb::current_schema_version() >= 2);
    CHECK(db.run_count() == 0);
    CHECK(db.check_count() == 0);
    key = db.anonymize_key();
    CHECK(key.size() == 32);
    CHECK(key.find_first_not_of("0123456789abcdef") == std::string::npos);
  }
  sqlite::Connection c(file, false);
  sqlite::Statement mode = c.prepare("PRAGMA journal_mode");
  REQUIRE(mode.step());
  CHECK(mode.text(0) == "wal");
  CHECK(count(c, "PRAGMA user_version") == ResultsDb::current_schema_version());
  CHECK(count(c,
              "SELECT count(*) FROM meta WHERE key = 'application' AND "
              "value = 'convlab-results'") == 1);
  const std::set<std::string> runs = columns(c, "runs");
  for (const char* col : {"team",
                          "milestone",
                          "submission",
                          "started_at",
                          "duration_s",
                          "seed",
                          "score",
                          "max_score",
                          "op_time_s",
                          "op_time_median_s",
                          "reference_time_s",
                          "speedup",
                          "ranked_variant",
                          "ranked_model",
                          "ranked_images",
                          "flags",
                          "flagged",
                          "gpu_name",
                          "gpu_driver",
                          "cuda_driver",
                          "hostname",
                          "report_json",
                          "cpu_name",
                          "sandbox_json"}) {
    CHECK_MESSAGE(runs.contains(col), col);
  }
  CHECK(columns(c, "checks").contains("run_id"));
  sqlite::Statement fk = c.prepare("PRAGMA foreign_key_list(checks)");
  REQUIRE(fk.step());
  CHECK(fk.text(2) == "runs");

  // The key stays with the file; another file gets another key.
  CHECK(ResultsDb(file).anonymize_key() == key);
  CHECK(ResultsDb(dir.path() / "other.sqlite").anonymize_key() != key);
}

TEST_CASE("a v1 file is upgraded to the current schema and keeps its rows") {
  test::TempDir dir;
  const fs::path file = dir.path() / "old.sqlite";
  std::string key;
  {
    ResultsDbOptions v1;
    v1.migrate_to = 1;
    ResultsDb db(file, v1);
    CHECK(db.schema_version() == 1);
    key = db.anonymize_key();
    // A handle at an old schema must not write rows the current code would misread.
    CHECK(error_of([&] { db.record(grade("x", 0.001), "{}"); }).find("schema v1") !=
          std::string::npos);
  }
  {
    // Rows as the v1 grader wrote them: its columns only.
    sqlite::Connection c(file, false);
    CHECK(!columns(c, "runs").contains("cpu_name"));
    CHECK(count(c, "SELECT count(*) FROM sqlite_schema WHERE name = 'runs_by_team_time'") == 0);
    c.exec(R"sql(
INSERT INTO runs (id, team, milestone, submission, started_at, duration_s, seed, score,
  max_score, op_time_s, op_time_median_s, reference_time_s, speedup, ranked_variant,
  ranked_model, ranked_images, flags, flagged, gpu_name, gpu_driver, cuda_driver, hostname,
  report_json)
VALUES (7, 'old team', 'final', '/s/old', '2024-12-01T10:00:00Z', 30.0, '99', 55, 60, 0.0008,
  0.00081, 0.0015, 1.875, 'best', 'ece408-high', 10000, '["looked at"]', 1, 'A40', '550',
  '12.4', 'gpu01', '{"schema":"convlab-grade-report/1"}');
INSERT INTO checks (run_id, position, check_id, name, kind, status, reason, score, max_score,
  output, hidden, variant, model, images, expected_correct, correct, op_time_s,
  op_time_median_s, op_time_runs_s, reference_time_s, worst_error, wall_s, details_json)
VALUES (7, 0, 'network/best/ece408-high/10000', 'best', 'network', 'passed', 'ok', 10, 10, '',
  0, 'best', 'ece408-high', 10000, 8562, 8562, 0.0008, 0.00081, '[0.0008,0.00082]', 0.0015,
  NULL, 3.5, '{}');
)sql");
  }
  ResultsDb db(file);
  CHECK(db.schema_version() == ResultsDb::current_schema_version());
  CHECK(db.anonymize_key() == key);
  CHECK(db.run_count() == 1);
  CHECK(db.check_count() == 1);
  const auto old = db.load_run(7);
  REQUIRE(old);
  CHECK(old->result.team == "old team");
  CHECK(old->result.seed == 99);
  CHECK(old->result.machine.cpu_name.empty());  // the column v2 added, at its default
  CHECK(old->result.sandbox_json == "{}");
  CHECK(old->result.flags == std::vector<std::string>{"looked at"});
  REQUIRE(old->result.checks.size() == 1);
  CHECK(old->result.checks[0].op_time_runs_s == std::vector<double>{0.0008, 0.00082});
  const auto best = db.best_per_team("final");
  REQUIRE(best.size() == 1);
  CHECK(best[0].run_id == 7);
  CHECK(best[0].flagged);
  // And it records new runs after the upgrade.
  const std::int64_t id = db.record(grade("new team", 0.0007), "{}");
  CHECK(id > 7);
  CHECK(db.best_per_team("final").front().team == "new team");

  sqlite::Connection c(file, false);
  CHECK(columns(c, "runs").contains("cpu_name"));
  CHECK(count(c, "SELECT count(*) FROM sqlite_schema WHERE name = 'runs_by_team_time'") == 1);
  CHECK(count(c, "SELECT count(*) FROM sqlite_schema WHERE name = 'checks_by_run'") == 1);
}

TEST_CASE("a file that is not a convlab database is refused and left alone") {
  test::TempDir dir;
  SUBCASE("a text file") {
    const fs::path file = dir.path() / "notes.txt";
    const std::string text = "these are my notes, not a database\n";
    std::ofstream(file) << text;
    const std::string err = error_of([&] { ResultsDb db(file); });
    CHECK(err.find("notes.txt is not a convlab results database") != std::string::npos);
    CHECK(err.find("not an SQLite file") != std::string::npos);
    CHECK(read_all(file) == text);
  }
  SUBCASE("another program's SQLite database") {
    const fs::path file = dir.path() / "other.db";
    {
      sqlite::Connection c(file, true);
      c.exec("CREATE TABLE customers (name TEXT); INSERT INTO customers VALUES ('x')");
    }
    const std::string err = error_of([&] { ResultsDb db(file); });
    CHECK(err.find("other.db is an SQLite database but not a convlab results database") !=
          std::string::npos);
    sqlite::Connection c(file, false);
    CHECK(count(c, "SELECT count(*) FROM sqlite_schema WHERE name = 'runs'") == 0);
    sqlite::Statement mode = c.prepare("PRAGMA journal_mode");
    REQUIRE(mode.step());
    CHECK(mode.text(0) == "delete");  // not switched to WAL either
  }
  SUBCASE("a missing file when the caller only reads") {
    ResultsDbOptions read_only;
    read_only.create = false;
    const fs::path file = dir.path() / "missing.sqlite";
    const std::string err = error_of([&] { ResultsDb db(file, read_only); });
    CHECK(err.find("no results database at") != std::string::npos);
    CHECK(!fs::exists(file));
  }
  SUBCASE("a directory") {
    CHECK(error_of([&] { ResultsDb db(dir.path()); }).find("is a directory") != std::string::npos);
  }
}

TEST_CASE("a database from a newer convlab is refused") {
  test::TempDir dir;
  const fs::path file = dir.path() / "future.sqlite";
  { ResultsDb db(file); }
  {
    sqlite::Connection c(file, false);
    c.exec("PRAGMA user_version = " + std::to_string(ResultsDb::current_schema_version() + 1));
  }
  const std::string err = error_of([&] { ResultsDb db(file); });
  CHECK(err.find("written by a newer convlab") != std::string::npos);
  std::string newer = "v";  // piecewise: g++ 12 warns, wrongly, with -Wrestrict on "v" + s
  newer += std::to_string(ResultsDb::current_schema_version() + 1);
  CHECK(err.find(newer) != std::string::npos);
}

TEST_CASE("a grade is stored and read back field by field") {
  test::TempDir dir;
  ResultsDb db(dir.path() / "r.sqlite");
  GradeResult g;
  g.team = "Les \"Noyaux\" <b>été</b>";
  g.milestone = "final";
  g.submission = "/tmp/sub/team1";
  g.started_at = "2025-05-02T08:30:00Z";
  g.duration_s = 71.25;
  g.seed = std::numeric_limits<std::uint64_t>::max();  // beyond int64: kept exact
  g.score = 47.5;
  g.max_score = 60;
  g.op_time_s = 0.000696;
  g.op_time_median_s = 0.0007;
  g.reference_time_s = 0.001551;
  g.speedup = 0.001551 / 0.000696;
  g.ranked_variant = "best";
  g.ranked_model = "ece408-high";
  g.ranked_images = 10000;
  g.flags = {"best is 14.2x faster than cuDNN", "second flag"};
  g.machine = {"NVIDIA H100 80GB HBM3", "550.54.15", "12.4", "AMD EPYC 9454", "gpu-07"};
  g.sandbox_json = R"({"seccomp":true,"memory_mb":8192})";
  g.only = {"network/*"};
  g.partial = true;
  g.grader_error = "";
  g.grader_version = "0.1.0";
  g.framework_hash = "fnv1a64:0123456789abcdef";
  CheckResult a = network_check("best", "ece408-high", 10000, CheckStatus::passed, 0.000696);
  a.score = 10;
  a.max_score = 10;
  a.output = "Correctness: 0.8562\nline two";
  a.expected_correct = 8562;
  a.correct = 8562;
  a.op_time_median_s = 0.0007;
  a.op_time_runs_s = {0.000696, 0.0007, 0.000712};
  a.reference_time_s = 0.001551;
  a.wall_s = 3.25;
  a.details_json = R"({"layers":[1]})";
  a.milestone = "final";
  CheckResult b;
  b.id = "elementwise/best/1";
  b.name = "element-wise, odd shapes";
  b.kind = "elementwise";
  b.status = CheckStatus::skipped;
  b.reason = "no_gpu";
  b.hidden = true;
  b.worst_error = 2.5e-6;
  b.details_json = "";  // stored as "{}"
  g.checks = {a, b};

  const std::int64_t id = db.record(g, R"({"schema":"convlab-grade-report/1"})");
  CHECK(db.run_count() == 1);
  CHECK(db.check_count() == 2);
  const auto s = db.load_run(id);
  REQUIRE(s);
  CHECK(!db.load_run(id + 100));
  const GradeResult& r = s->result;
  CHECK(s->report_json == R"({"schema":"convlab-grade-report/1"})");
  CHECK(s->recorded_at.size() == 20);
  CHECK(r.team == g.team);
  CHECK(r.milestone == g.milestone);
  CHECK(r.submission == g.submission);
  CHECK(r.started_at == g.started_at);
  CHECK(r.duration_s == g.duration_s);
  CHECK(r.seed == g.seed);
  CHECK(r.score == g.score);
  CHECK(r.max_score == g.max_score);
  CHECK(r.op_time_s == g.op_time_s);
  CHECK(r.op_time_median_s == g.op_time_median_s);
  CHECK(r.reference_time_s == g.reference_time_s);
  CHECK(r.speedup == g.speedup);
  CHECK(r.ranked_variant == g.ranked_variant);
  CHECK(r.ranked_model == g.ranked_model);
  CHECK(r.ranked_images == g.ranked_images);
  CHECK(r.flags == g.flags);
  CHECK(r.machine.gpu_name == g.machine.gpu_name);
  CHECK(r.machine.gpu_driver == g.machine.gpu_driver);
  CHECK(r.machine.cuda_driver == g.machine.cuda_driver);
  CHECK(r.machine.cpu_name == g.machine.cpu_name);
  CHECK(r.machine.hostname == g.machine.hostname);
  CHECK(r.sandbox_json == g.sandbox_json);
  CHECK(r.only == g.only);
  CHECK(r.partial);
  CHECK(r.grader_error.empty());
  CHECK(r.grader_version == g.grader_version);
  CHECK(r.framework_hash == g.framework_hash);
  REQUIRE(r.checks.size() == 2);
  const CheckResult& ra = r.checks[0];
  CHECK(ra.id == a.id);
  CHECK(ra.name == a.name);
  CHECK(ra.kind == a.kind);
  CHECK(ra.status == CheckStatus::passed);
  CHECK(ra.reason == a.reason);
  CHECK(ra.score == a.score);
  CHECK(ra.max_score == a.max_score);
  CHECK(ra.output == a.output);
  CHECK(!ra.hidden);
  CHECK(ra.variant == a.variant);
  CHECK(ra.model == a.model);
  CHECK(ra.images == a.images);
  CHECK(ra.expected_correct == a.expected_correct);
  CHECK(ra.correct == a.correct);
  CHECK(ra.op_time_s == a.op_time_s);
  CHECK(ra.op_time_median_s == a.op_time_median_s);
  CHECK(ra.op_time_runs_s == a.op_time_runs_s);
  CHECK(ra.reference_time_s == a.reference_time_s);
  CHECK(!ra.worst_error);
  CHECK(ra.wall_s == a.wall_s);
  CHECK(ra.details_json == a.details_json);
  CHECK(ra.milestone == "final");
  const CheckResult& rb = r.checks[1];
  CHECK(rb.status == CheckStatus::skipped);
  CHECK(rb.hidden);
  CHECK(rb.worst_error == b.worst_error);
  CHECK(!rb.op_time_s);
  CHECK(!rb.expected_correct);
  CHECK(rb.op_time_runs_s.empty());
  CHECK(rb.details_json == "{}");

  // A grade without a team cannot be ranked: refused with a message, nothing stored.
  GradeResult anonymous = g;
  anonymous.team.clear();
  CHECK(error_of([&] { db.record(anonymous, "{}"); }).find("needs a team") != std::string::npos);
  CHECK(db.run_count() == 1);
}

TEST_CASE("best_per_team takes each team's fastest correct run") {
  test::TempDir dir;
  ResultsDb db(dir.path() / "r.sqlite");
  db.record(grade("alpha", 0.003), "{}");
  const std::int64_t alpha_best = db.record(grade("alpha", 0.002), "{}");
  db.record(grade("alpha", std::nullopt), "{}");  // a later run that failed: no op time
  db.record(grade("alpha", 0.0025), "{}");
  db.record(grade("beta", std::nullopt), "{}");  // never correct: not on the board
  const std::int64_t gamma = db.record(grade("gamma", 0.001), "{}");
  db.record(grade("alpha", 0.0001, "m3"), "{}");  // another milestone does not count
  GradeResult partial = grade("alpha", 0.0002);   // --only: not a whole grade
  partial.partial = true;
  partial.only = {"network/best/*"};
  db.record(partial, "{}");
  GradeResult broken = grade("beta", 0.0003);  // the grader failed: not the team's time
  broken.grader_error = "the pristine framework did not build";
  db.record(broken, "{}");

  // delta's best run: variants with a failed check, another model, a repeated variant.
  GradeResult d = grade("delta", 0.0015);
  d.checks.push_back(network_check("unroll", "ece408-high", 10000, CheckStatus::passed, 0.005));
  d.checks.push_back(network_check("unroll", "ece408-high", 10000, CheckStatus::passed, 0.0045));
  d.checks.push_back(
      network_check("threads_1024", "ece408-high", 10000, CheckStatus::failed, 0.003));
  d.checks.push_back(
      network_check("constant_memory", "ece408-low", 10000, CheckStatus::passed, 0.004));
  d.checks.push_back(
      network_check("constant_memory", "ece408-high", 2000, CheckStatus::passed, 0.001));
  CheckResult other = network_check("unroll", "ece408-high", 10000, CheckStatus::passed, 0.0002);
  other.milestone = "m3";  // a check of another milestone in the same run
  d.checks.push_back(other);
  CheckResult timing = network_check("best", "ece408-high", 10000, CheckStatus::passed, 0.0001);
  timing.kind = "time";
  d.checks.push_back(timing);
  d.flags = {"best is 14.2x faster than cuDNN"};
  const std::int64_t delta = db.record(d, "{}");

  const std::vector<TeamBest> best = db.best_per_team("final");
  REQUIRE(best.size() == 3);
  CHECK(best[0].team == "gamma");
  CHECK(best[0].run_id == gamma);
  CHECK(best[0].op_time_s == doctest::Approx(0.001));
  CHECK(best[1].team == "delta");
  CHECK(best[1].run_id == delta);
  CHECK(best[1].flagged);
  CHECK(best[1].flags == d.flags);
  CHECK(best[2].team == "alpha");
  CHECK(best[2].run_id == alpha_best);
  CHECK(best[2].op_time_s == doctest::Approx(0.002));
  CHECK(best[2].op_time_median_s == doctest::Approx(0.00202));
  CHECK(best[2].reference_time_s == doctest::Approx(0.00155));
  CHECK(best[2].gpu_name == "NVIDIA H100 80GB HBM3");
  CHECK(best[2].ranked_variant == "best");
  CHECK(best[2].ranked_model == "ece408-high");
  CHECK(best[2].ranked_images == 10000);
  CHECK(!best[2].flagged);

  // Only passed network checks on the ranked model and N, fastest of each, in check order.
  const auto& v = best[1].variants;
  REQUIRE(v.size() == 3);
  CHECK(v[0].first == "shared_tiling");
  CHECK(v[0].second == doctest::Approx(0.006));
  CHECK(v[1].first == "best");
  CHECK(v[1].second == doctest::Approx(0.0015));
  CHECK(v[2].first == "unroll");
  CHECK(v[2].second == doctest::Approx(0.0045));

  CHECK(db.best_per_team("m3").size() == 1);
  CHECK(db.best_per_team("m2").empty());
}

TEST_CASE("a team that grades through the service is ranked by its last submitted grade") {
  test::TempDir dir;
  const fs::path file = dir.path() / "r.sqlite";
  ResultsDb db(file);
  const std::int64_t fast = db.record(grade("alpha", 0.001), "{}");
  const std::int64_t last = db.record(grade("alpha", 0.004), "{}");
  const std::int64_t failed = db.record(grade("beta", std::nullopt), "{}");
  db.record(grade("beta", 0.002), "{}");  // recorded outside the service: beta's last job rules
  db.record(grade("gamma", 0.003), "{}");
  db.record(grade("gamma", 0.005), "{}");
  sqlite::Connection c(file, false);
  const auto job = [&](const std::string& team, const std::string& command, std::int64_t run) {
    c.exec(
        "INSERT INTO jobs (team, command, milestone, args_json, files_json, device, state, "
        "run_id) VALUES ('" +
        team + "', '" + command +
        "', 'final', '{}', '{}', 'gpu', "
        "'done', " +
        std::to_string(run) + ")");
  };
  job("alpha", "grade", fast);
  job("alpha", "grade", last);
  job("alpha", "check", fast);  // not a grade: never counts
  job("beta", "grade", failed);

  const std::vector<TeamBest> best = db.best_per_team("final");
  REQUIRE(best.size() == 2);  // beta's last grade failed: beta is not ranked
  CHECK(best[0].team == "gamma");
  CHECK(best[0].op_time_s == doctest::Approx(0.003));  // no submission: its fastest run
  CHECK_FALSE(best[0].submitted);
  CHECK(best[1].team == "alpha");
  CHECK(best[1].run_id == last);
  CHECK(best[1].submitted);
}

TEST_CASE("eight graders writing to one new database at once lose no row") {
  constexpr int kGraders = 8, kRunsEach = 50, kChecksEach = 6;
  test::TempDir dir;
  const fs::path file = dir.path() / "class.sqlite";  // created by whichever grader wins
  int go[2];
  REQUIRE(pipe(go) == 0);
  std::vector<pid_t> pids;
  for (int g = 0; g < kGraders; ++g) {
    const pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      close(go[1]);
      char c;
      // Every grader starts together: they all race to create, migrate and write.
      if (read(go[0], &c, 1) < 0) _exit(3);
      int rc = 0;
      try {
        ResultsDb db(file);
        for (int i = 0; i < kRunsEach; ++i) {
          GradeResult r = grade(std::string("team") + std::to_string(g), 0.001 + 1e-6 * i);
          r.submission = std::string("/s/") + std::to_string(g) + "/" + std::to_string(i);
          r.checks.clear();
          for (int k = 0; k < kChecksEach; ++k) {
            r.checks.push_back(network_check(std::string("v") + std::to_string(k), "ece408-high",
                                             10000, CheckStatus::passed, 0.001 * (k + 1)));
          }
          db.record(r, "{}");
        }
      } catch (const std::exception& e) {
        std::cerr << "grader " << g << ": " << e.what() << std::endl;
        rc = 1;
      }
      _exit(rc);
    }
    pids.push_back(pid);
  }
  close(go[0]);
  close(go[1]);  // releases every grader at once
  for (pid_t pid : pids) {
    int status = 0;
    REQUIRE(waitpid(pid, &status, 0) == pid);
    CHECK(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 0);
  }

  ResultsDb db(file);
  CHECK(db.run_count() == kGraders * kRunsEach);
  CHECK(db.check_count() == kGraders * kRunsEach * kChecksEach);
  sqlite::Connection c(file, false);
  CHECK(count(c, "SELECT count(DISTINCT submission) FROM runs") == kGraders * kRunsEach);
  CHECK(count(c,
              "SELECT count(*) FROM runs r WHERE (SELECT count(*) FROM checks k "
              "WHERE k.run_id = r.id) != " +
                  std::to_string(kChecksEach)) == 0);
  CHECK(count(c, "SELECT count(*) FROM meta WHERE key = 'anonymize_key'") == 1);
  sqlite::Statement integrity = c.prepare("PRAGMA integrity_check");
  REQUIRE(integrity.step());
  CHECK(integrity.text(0) == "ok");
  CHECK(db.best_per_team("final").size() == kGraders);
}

TEST_CASE("a report has one row: the same report recorded again is the run already there") {
  test::TempDir dir;
  ResultsDb db(dir.path() / "r.sqlite");
  const std::string report = R"({"schema": "convlab-grade-report/1", "team": "a", "seed": 3})";
  const Recorded first = db.record_once(grade("a", 0.001), report);
  CHECK(first.inserted);
  // Another layout of the same document has the same id.
  const Recorded again = db.record_once(
      grade("a", 0.001), R"({"seed":3,"team":"a","schema":"convlab-grade-report/1"})");
  CHECK_FALSE(again.inserted);
  CHECK(again.id == first.id);
  CHECK(db.record(grade("a", 0.001), report) == first.id);
  CHECK(db.run_count() == 1);
  const auto id = report_id(report);
  REQUIRE(id);
  CHECK(id->starts_with("fnv1a64:"));
  CHECK(db.find_report(*id) == first.id);
  CHECK(db.load_run(first.id)->report_id == *id);
  // Placeholders (not a report) get no id and are never merged.
  CHECK_FALSE(report_id("{}"));
  CHECK_FALSE(report_id("not json"));
  db.record(grade("b", 0.002), "{}");
  db.record(grade("b", 0.002), "{}");
  CHECK(db.run_count() == 3);
  CHECK(db.load_run(3)->report_id.empty());
}

TEST_CASE("allow_degraded and degraded_features are stored per grade, NULL when absent") {
  test::TempDir dir;
  const fs::path file = dir.path() / "r.sqlite";
  ResultsDb db(file);
  const std::int64_t with =
      db.record(grade("a", 0.001), R"({"schema":"convlab-grade-report/1","allow_degraded":true,)"
                                   R"("degraded_features":["pid_namespace","read_only_root"]})");
  const std::int64_t without =
      db.record(grade("b", 0.001), R"({"schema":"convlab-grade-report/1"})");
  const std::int64_t strict = db.record(
      grade("c", 0.001),
      R"({"schema":"convlab-grade-report/1","allow_degraded":false,"degraded_features":[]})");
  const auto a = db.load_run(with), b = db.load_run(without), c = db.load_run(strict);
  CHECK(a->allow_degraded == true);
  CHECK(a->degraded_features == std::vector<std::string>{"pid_namespace", "read_only_root"});
  CHECK_FALSE(b->allow_degraded);
  CHECK(b->degraded_features.empty());
  CHECK(c->allow_degraded == false);
  sqlite::Connection conn(file, false);
  CHECK(count(conn,
              "SELECT count(*) FROM runs WHERE allow_degraded IS NULL AND "
              "degraded_features IS NULL") == 1);
  CHECK(count(conn, "SELECT count(*) FROM runs WHERE degraded_features = '[]'") == 1);
}

TEST_CASE("a v2 file is upgraded to v3: its rows get their report ids, then they are unique") {
  test::TempDir dir;
  const fs::path file = dir.path() / "v2.sqlite";
  const std::string report = R"({"schema":"convlab-grade-report/1","team":"old"})";
  {
    ResultsDbOptions v2;
    v2.migrate_to = 2;
    ResultsDb db(file, v2);
    CHECK(db.schema_version() == 2);
  }
  {
    sqlite::Connection c(file, false);
    CHECK(!columns(c, "runs").contains("report_id"));
    // Built piecewise: g++ 12 warns, wrongly, with -Wrestrict on literal + string + literal.
    std::string sql = R"sql(
INSERT INTO runs (id, team, milestone, submission, started_at, duration_s, seed, score,
  max_score, ranked_variant, ranked_model, ranked_images, flags, flagged, gpu_name, gpu_driver,
  cuda_driver, hostname, report_json)
VALUES (4, 'old', 'm2', '/s', '2025-01-01T00:00:00Z', 1, '1', 3, 5, 'cpu', 'ece408-high', 100,
  '[]', 0, '', '', '', 'h', ')sql";
    sql += report;
    sql += R"sql('),
  (5, 'placeholder', 'm2', '/s', '2025-01-01T00:00:00Z', 1, '1', 3, 5, 'cpu', 'ece408-high',
  100, '[]', 0, '', '', '', 'h', '{}');
)sql";
    c.exec(sql);
  }
  ResultsDb db(file);
  CHECK(db.schema_version() == ResultsDb::current_schema_version());
  CHECK(db.load_run(4)->report_id == report_id(report).value());
  CHECK(db.load_run(5)->report_id.empty());
  CHECK_FALSE(db.load_run(4)->allow_degraded);
  // Ingesting the report the old grader recorded adds nothing.
  CHECK(db.record_once(grade("old", 0.001), report).id == 4);
  CHECK(db.run_count() == 2);
  sqlite::Connection c(file, false);
  CHECK(count(c, "SELECT count(*) FROM sqlite_schema WHERE name = 'runs_by_report'") == 1);
  CHECK_THROWS(
      c.exec("UPDATE runs SET report_id = (SELECT report_id FROM runs WHERE id = 4) "
             "WHERE id = 5"));
}

TEST_CASE("v4 adds the submission service's tables; a v3 file keeps its runs") {
  test::TempDir dir;
  const fs::path file = dir.path() / "v3.sqlite";
  {
    ResultsDbOptions v3;
    v3.migrate_to = 3;
    ResultsDb db(file, v3);
  }
  {
    sqlite::Connection c(file, false);
    CHECK(count(c, "SELECT count(*) FROM sqlite_schema WHERE name = 'jobs'") == 0);
  }
  ResultsDb db(file);
  CHECK(db.schema_version() >= 4);
  sqlite::Connection c(file, false);
  for (const char* table : {"service_tokens", "jobs", "job_output"}) {
    CAPTURE(table);
    CHECK(count(c, std::string("SELECT count(*) FROM sqlite_schema WHERE name = '") + table +
                       "'") == 1);
  }
  c.exec("INSERT INTO jobs (team, command, milestone, args_json, files_json, device, state) "
         "VALUES ('a', 'check', 'm2', '{}', '{}', 'cpu', 'queued')");
  // Only the four states and the three commands exist.
  CHECK_THROWS(c.exec("UPDATE jobs SET state = 'lost'"));
  CHECK_THROWS(c.exec("UPDATE jobs SET command = 'shell'"));
  // A token's digest belongs to one account.
  c.exec("INSERT INTO service_tokens (team, sha256) VALUES ('a', 'x')");
  CHECK_THROWS(c.exec("INSERT INTO service_tokens (team, sha256) VALUES ('b', 'x')"));
}

TEST_CASE("sqlite: a row inserted column by column reads back by name; a wrong name is an error") {
  convlab::test::TempDir dir;
  namespace sq = convlab::grader::sqlite;
  sq::Connection conn(dir.path() / "t.sqlite", true);
  conn.exec("CREATE TABLE t (a INTEGER, b TEXT, c REAL, d INTEGER)");
  const std::int64_t id = sq::Insert("t")
                              .set("b", std::string("two"))
                              .set("a", std::int64_t{1})
                              .set("d", std::optional<std::int64_t>{})
                              .set("c", 3.5)
                              .run(conn);
  CHECK(id == 1);
  sq::Statement st = conn.prepare("SELECT d, c, b, a FROM t");
  REQUIRE(st.step());
  CHECK(st.int64("a") == 1);
  CHECK(st.text("b") == "two");
  CHECK(st.real("c") == 3.5);
  CHECK(st.is_null("d"));
  CHECK_FALSE(st.optional_int64("d").has_value());
  CHECK_THROWS_WITH_AS(st.text("e"), "the statement has no column 'e'", convlab::Error);
  CHECK_THROWS_AS(sq::Insert("t").set("nope", 1).run(conn), sq::SqliteError);
}

}  // namespace test_results_db
