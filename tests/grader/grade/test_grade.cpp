// `convlab grade` end to end on the CPU (m2): the staff solution gets full marks, the pristine
// stub gets zero with a message per check saying what to do, a wrong convolution is named by
// its coordinates, hidden models, --only, the reports parsed back, the results database, and the
// command line. Needs the Fashion-MNIST test set (skipped, with the reason, without it).
#include <doctest/doctest.h>
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <nlohmann/json.hpp>

#include "grader/grade/report.hpp"
#include "grader/sandbox/sandbox.hpp"
#include "reference/conv/variant_table.hpp"
#include "reference/core/error.hpp"
#include "reference/model/model.hpp"
#include "tests/grader/grade/grade_test_support.hpp"

#ifdef CONVLAB_HAVE_SQLITE
#include "grader/db/results_db.hpp"
#endif

namespace test_grade {

using namespace convlab;
using namespace convlab::grader;
using nlohmann::json;
namespace fs = std::filesystem;

namespace {

const std::string kM2File = "student/m2/conv_cpu.cpp";

json read_json(const fs::path& file) {
  std::ifstream in(file);
  REQUIRE_MESSAGE(in, "cannot read " << file);
  return json::parse(in);
}

}  // namespace

TEST_CASE("m2: the staff solution gets full marks, every check, and a ranked time") {
  test::require_data();
  test::Submission s("staff-m2");
  s.add_solutions({kM2File});
  // One timed run: the full grade runs 10000 images through the network four times already.
  GradeOptions o = s.options("m2");
  o.runs = 1;
  o.check_jobs = 3;  // the untimed checks side by side, as on a large machine
  const GradeResult r = test::grade(o);
  INFO(test::describe(r));
  CHECK(r.grader_error.empty());
  CHECK_FALSE(r.partial);
  CHECK(r.max_score == 30);  // 10 + 10 + 5 (networks) + 5 (element-wise)
  CHECK(r.score == r.max_score);
  for (const CheckResult& c : r.checks) {
    CAPTURE(c.id);
    CHECK(c.status == CheckStatus::passed);
    CHECK(c.reason == "ok");
  }
  // The report keeps the plan's order, whatever order the checks ran in.
  std::vector<std::string> ids;
  for (const CheckResult& c : r.checks) ids.push_back(c.id);
  CHECK(ids ==
        std::vector<std::string>{"files", "build", "symbols", "network/cpu/ece408-high/10000",
                                 "network/cpu/ece408-high/2000", "network/cpu/ece408-high/1000",
                                 "network/cpu/ece408-high/100", "network/cpu/ece408-low/10000",
                                 "network/cpu/ece408-low/2000", "network/cpu/ece408-low/1000",
                                 "network/cpu/ece408-low/100", "network/cpu/two-conv/10000",
                                 "elementwise/cpu", "time/cpu/ece408-high/10000"});
  const CheckResult& high = test::check_of(r, "network/cpu/ece408-high/10000");
  CHECK(high.correct == 8562);
  CHECK(high.expected_correct == 8562);
  CHECK(test::check_of(r, "network/cpu/two-conv/10000").correct == 8877);
  const CheckResult& ew = test::check_of(r, "elementwise/cpu");
  REQUIRE(ew.worst_error.has_value());
  CHECK(*ew.worst_error < 1e-4);
  const CheckResult& time = test::check_of(r, "time/cpu/ece408-high/10000");
  REQUIRE(time.op_time_s.has_value());
  CHECK(time.op_time_runs_s.size() == 1);  // --runs
  CHECK(*time.op_time_s <= time.op_time_median_s.value());
  REQUIRE(time.reference_time_s.has_value());
  // The ranked time is the time check's, with the library convolution's from the same run.
  REQUIRE(r.op_time_s.has_value());
  CHECK(*r.op_time_s == *time.op_time_s);
  REQUIRE(r.speedup.has_value());
  CHECK(*r.speedup == doctest::Approx(*time.reference_time_s / *time.op_time_s));
  CHECK(r.ranked_variant == "cpu");
  CHECK(r.ranked_model == "ece408-high");
  CHECK(r.ranked_images == 10000);
  CHECK(r.team == "staff-m2");
  CHECK(r.seed == 20240601);
  CHECK(r.framework_hash.rfind("fnv1a64:", 0) == 0);

  // The reports on disk say the same.
  const json report = read_json(s.out() / "report.json");
  CHECK(report.at("schema") == "convlab-grade-report/1");
  CHECK(report.at("score").get<double>() == 30);
  CHECK(report.at("checks").size() == r.checks.size());
  CHECK(report.at("sandbox").at("limits").at("wall_s").get<double>() == 600);
  const json results = read_json(s.out() / "results.json");
  double sum = 0;
  for (const json& t : results.at("tests")) sum += t.at("score").get<double>();
  CHECK(sum == 30);
  CHECK(results.at("score").get<double>() == 30);
  CHECK(results.at("leaderboard").at(0).at("name") == "Op Time (ms)");
  CHECK(results.at("leaderboard").at(0).at("value").get<double>() ==
        doctest::Approx(*r.op_time_s * 1e3));
  CHECK(fs::exists(s.out() / "logs" / "build.log"));
}

TEST_CASE("m2: the pristine stub gets zero, each check saying which file to write") {
  test::require_data();
  test::Submission s("stub-m2");  // hands in nothing: the pristine stub is graded
  const GradeResult r =
      test::grade(s.options("m2", {"network/cpu/ece408-high/100", "elementwise/*", "time/*"}));
  INFO(test::describe(r));
  CHECK(r.grader_error.empty());
  CHECK(r.partial);
  CHECK(r.score == 0);
  CHECK(r.max_score == 5);  // the element-wise check; N = 100 and the time score nothing
  CHECK_FALSE(r.op_time_s.has_value());
  CHECK(test::check_of(r, "files").output.find(kM2File) != std::string::npos);
  for (const char* id :
       {"network/cpu/ece408-high/100", "elementwise/cpu", "time/cpu/ece408-high/10000"}) {
    CAPTURE(id);
    const CheckResult& c = test::check_of(r, id);
    CHECK(c.status == CheckStatus::failed);
    CHECK(c.reason == "not_implemented");
    CHECK(c.score == 0);
    CHECK(c.output.find(kM2File) != std::string::npos);
    CHECK(c.output.find("milestones/m2/README.md") != std::string::npos);
  }
}

TEST_CASE("m2: a wrong convolution fails with the wrong count and the first wrong outputs") {
  test::require_data();
  test::Submission s("off-by-one");
  // The staff loops with the last filter column left out.
  std::string code = test::solution_as_student(kM2File);
  const std::string loop = "q < s.K";
  const std::size_t at = code.find(loop);
  REQUIRE_MESSAGE(at != std::string::npos, "the staff m2 solution has no '" << loop << "' loop");
  code.replace(at, loop.size(), "q < s.K - 1");
  test::put_file(s.dir(), kM2File, code);
  const GradeResult r =
      test::grade(s.options("m2", {"network/cpu/ece408-high/1000", "elementwise/cpu"}));
  INFO(test::describe(r));
  const CheckResult& net = test::check_of(r, "network/cpu/ece408-high/1000");
  CHECK(net.status == CheckStatus::failed);
  CHECK(net.reason == "wrong_count");
  REQUIRE(net.correct.has_value());
  CHECK(*net.correct != 864);
  CHECK(net.output.find("convlab run m2 ece408-high 1000") != std::string::npos);
  const CheckResult& ew = test::check_of(r, "elementwise/cpu");
  CHECK(ew.status == CheckStatus::failed);
  CHECK(ew.reason == "mismatch");
  CHECK(ew.output.find("y[0][0][0][0] = ") != std::string::npos);  // the first mismatch
  CHECK(ew.output.find("worst: y[") != std::string::npos);
  CHECK(ew.output.find("B=3 M=50 C=1 H=28 W=28 K=5") != std::string::npos);
  CHECK(ew.output.find("seed 20240601") != std::string::npos);
  const json details = json::parse(ew.details_json);
  REQUIRE(details.at("shapes").size() == 6);
  CHECK(details.at("shapes")[0].at("first").size() == 10);
  CHECK(details.at("shapes")[0].at("mismatches").get<int>() > 0);
}

TEST_CASE("m2: hidden models are graded under a number, never their name") {
  test::require_data();
  test::Submission s("staff-hidden");
  s.add_solutions({kM2File});
  test::TempDir models;
  Model m = load_model(test::source_dir() / "datasets" / "models" / "two-conv.safetensors");
  m.expected_correct = {{100, 82}};
  save_model(models.path() / "secret-two.safetensors", m);
  m.expected_correct = {{100, 81}};  // deliberately wrong: this check must fail
  save_model(models.path() / "secret-wrong.safetensors", m);
  GradeOptions o = s.options("m2", {"hidden/*"});
  o.model_dirs = {models.path()};
  const GradeResult r = test::grade(o);
  INFO(test::describe(r));
  const CheckResult& good = test::check_of(r, "hidden/cpu/secret-two/100");
  CHECK(good.status == CheckStatus::passed);
  CHECK(good.hidden);
  CHECK(good.max_score == 5);
  CHECK(good.name.find("hidden model 1") != std::string::npos);
  const CheckResult& bad = test::check_of(r, "hidden/cpu/secret-wrong/100");
  CHECK(bad.status == CheckStatus::failed);
  CHECK(bad.reason == "wrong_count");
  CHECK(bad.name.find("hidden model 2") != std::string::npos);
  for (const CheckResult* c : {&good, &bad}) {
    CHECK(c->name.find("secret") == std::string::npos);
    CHECK(c->output.find("secret") == std::string::npos);
  }
  const json results = read_json(s.out() / "results.json");
  for (const json& t : results.at("tests")) {
    if (t.at("name").get<std::string>().find("hidden model") != std::string::npos) {
      CHECK(t.at("visibility") == "after_published");
    }
  }
}

TEST_CASE("--only: the selected checks and files, build and symbols; bad globs are refused") {
  test::require_data();
  test::Submission s("only");
  s.add_solutions({kM2File});
  const GradeResult r = test::grade(s.options("m2", {"network/*/100"}));
  INFO(test::describe(r));
  std::vector<std::string> ids;
  for (const CheckResult& c : r.checks) ids.push_back(c.id);
  CHECK(ids == std::vector<std::string>{"files", "build", "symbols", "network/cpu/ece408-high/100",
                                        "network/cpu/ece408-low/100"});
  CHECK(r.partial);
  CHECK(r.only == std::vector<std::string>{"network/*/100"});
  CHECK(r.score == r.max_score);
  CHECK(read_json(s.out() / "report.json").at("partial") == true);
  CHECK_THROWS_WITH_AS(test::grade(s.options("m2", {"network/gpu/*"})),
                       doctest::Contains("matches no check"), Error);
}

TEST_CASE("a GPU milestone without a usable GPU is skipped with no_gpu, never passed") {
  test::require_data();
  test::Submission s("stub-m3");
  const GradeResult r = test::grade(s.options("m3", {"network/baseline/ece408-high/100"}));
  INFO(test::describe(r));
  const CheckResult& c = test::check_of(r, "network/baseline/ece408-high/100");
  CHECK(c.score == 0);
#ifndef CONVLAB_HAVE_CUDA
  // A grader without CUDA compiles no .cu file: the build and symbols checks say so, never pass.
  for (const char* id : {"build", "symbols"}) {
    CAPTURE(id);
    CHECK(test::check_of(r, id).status == CheckStatus::skipped);
    CHECK(test::check_of(r, id).reason == "no_cuda");
  }
  CHECK(r.incomplete);
#endif
  if (c.reason == "no_gpu") {
    CHECK(c.status == CheckStatus::skipped);
    CHECK(c.output.find("no usable GPU") != std::string::npos);
    CHECK(r.machine.gpu_name.empty());
    const json results = read_json(s.out() / "results.json");
    CHECK(results.at("tests").back().at("status") == "failed");
  } else {
    // A GPU is here: the stub is graded as what it is.
    CHECK(c.reason == "not_implemented");
    CHECK(c.output.find(find_variant(variant_ids("m3").front()).student_file) != std::string::npos);
  }
}

TEST_CASE("bad input to the grader is an Error, never a grade") {
  test::require_data();
  test::Submission s("bad");
  GradeOptions o = s.options("m2");
  o.submission = s.root.path() / "no-such-team";
  CHECK_THROWS_AS(test::grade(o), Error);
  o = s.options("m1");
  CHECK_THROWS_WITH_AS(test::grade(o), doctest::Contains("m1"), Error);
  o = s.options("m2");
  o.runs = 0;
  CHECK_THROWS_AS(test::grade(o), Error);
  o = s.options("m2");
  o.model_dirs = {s.root.path() / "no-models"};
  CHECK_THROWS_AS(test::grade(o), Error);
  o = s.options("m2");
  o.build_memory_mib = 100;
  CHECK_THROWS_WITH_AS(test::grade(o), doctest::Contains("--build-memory"), Error);
}

#ifdef CONVLAB_HAVE_SQLITE
TEST_CASE("--db records the run and its checks") {
  test::require_data();
  test::Submission s("db-team");
  s.add_solutions({kM2File});
  GradeOptions o = s.options("m2", {"network/cpu/ece408-high/100"});
  o.db = s.root.path() / "results.db";
  const GradeResult r = test::grade(o);
  ResultsDb db(*o.db);
  CHECK(db.run_count() == 1);
  CHECK(db.check_count() == static_cast<std::int64_t>(r.checks.size()));
}
#endif

TEST_CASE("convlab grade: progress, a summary table, exit 0 whatever the score, 1 on bad input") {
  test::require_data();
  REQUIRE_MESSAGE(fs::exists(test::convlab_binary()), "convlab is not built");
  test::Submission s("cli-team");
  const std::string base = test::convlab_binary().string() + " grade " + s.dir().string() +
                           " --milestone m2 --seed 7 --cache " + test::grade_cache_dir().string() +
                           " --out " + s.out().string() + " --allow-degraded";
  std::string out;
  int code = test::run_command(base + " --only 'network/cpu/ece408-high/100'", &out);
  INFO(out);
  CHECK(code == 0);  // the stub scores zero, and the grade is complete
  CHECK(out.find("[1/1] network/cpu/ece408-high/100: failed 0/0 (not_implemented)") !=
        std::string::npos);
  CHECK(out.find("check") != std::string::npos);
  CHECK(out.find("Total: 0 / 0 points (partial: --only)") != std::string::npos);
  const fs::path printed = s.root.path() / "printed.json";
  code = test::run_command(
      base + " --only 'network/cpu/ece408-high/100' --json " + printed.string(), &out);
  CHECK(code == 0);
  const json doc = read_json(printed);
  CHECK(doc.at("schema") == "convlab-grade-report/1");
  CHECK(doc.at("team") == "cli-team");
  code = test::run_command(base + " --only 'nothing/*'", &out);
  CHECK(code == 1);
  CHECK(out.find("matches no check") != std::string::npos);
  code = test::run_command(test::convlab_binary().string() +
                               " grade /no/such/folder "
                               "--milestone m2",
                           &out);
  CHECK(code == 1);
  CHECK(out.find("is not a folder") != std::string::npos);
  code = test::run_command(
      test::convlab_binary().string() + " grade " + s.dir().string() + " --milestone m9", &out);
  CHECK(code == 1);  // a bad argument exits 1, as documented
}

TEST_CASE("grade --as-run prints a run as `convlab run` does, timed by the referee") {
  test::require_data();
  test::Submission s("run-team");
  s.add_solutions({kM2File});
  std::string local, graded;
  REQUIRE(
      test::run_command(test::convlab_binary().string() + " run m2 ece408-high 100 --impl solution",
                        &local) == 0);
  const int code = test::run_command(
      test::convlab_binary().string() + " grade " + s.dir().string() + " --milestone m2 --cache " +
          test::grade_cache_dir().string() + " --out " + s.out().string() +
          " --allow-degraded --runs 1 --only 'network/cpu/ece408-high/100'" + " --as-run",
      &graded);
  INFO("local:\n" << local << "\ngraded:\n" << graded);
  CHECK(code == 0);
  // The same count, in the same words, and an Op Time; no table.
  const auto line = [](const std::string& text, const std::string& start) {
    const auto at = text.find("\n" + start);
    return at == std::string::npos ? std::string("(none)")
                                   : text.substr(at + 1, text.find('\n', at + 1) - at - 1);
  };
  CHECK(line(graded, "Correctness: ") == line(local, "Correctness: "));
  CHECK(line(local, "Correctness: ") != "(none)");
  CHECK(line(graded, "Op Time: ") != "(none)");
  CHECK(graded.find("Total:") == std::string::npos);
  const json report = read_json(s.out() / "report.json");
  const json& check = report.at("checks").back();
  CHECK(check.at("id") == "network/cpu/ece408-high/100");
  CHECK(check.at("op_time_s").get<double>() > 0.0);
}

TEST_CASE("a machine without an isolation feature refuses to grade, unless --allow-degraded") {
  test::require_data();
  REQUIRE_MESSAGE(fs::exists(test::convlab_binary()), "convlab is not built");
  test::Submission s("degraded-team");
  // What this machine gives: a grade here either runs (nothing missing) or needs the flag.
  const std::vector<std::string> missing = isolation_problems(probe_sandbox_features()).empty()
                                               ? std::vector<std::string>{}
                                               : std::vector<std::string>{"(some)"};
  const std::string base = test::convlab_binary().string() + " grade " + s.dir().string() +
                           " --milestone m2 --seed 7 --cache " + test::grade_cache_dir().string() +
                           " --out " + s.out().string() + " --only 'network/cpu/ece408-high/100'";
  // The operator's switch makes the IPC namespace missing, as on a kernel that refuses it.
  std::string out;
  int code = test::run_command("CONVLAB_SANDBOX_DISABLE=ipc_namespace " + base, &out);
  INFO(out);
  CHECK(code == 1);
  CHECK(out.find("refusing to grade") != std::string::npos);
  CHECK(out.find("ipc_namespace: ") != std::string::npos);
  CHECK(out.find("To get it: ") != std::string::npos);
  CHECK(out.find("--allow-degraded") != std::string::npos);
  CHECK_FALSE(fs::exists(s.out() / "report.json"));

  code = test::run_command("CONVLAB_SANDBOX_DISABLE=ipc_namespace " + base + " --allow-degraded",
                           &out);
  CHECK(code == 0);
  const json report = read_json(s.out() / "report.json");
  CHECK(report.at("allow_degraded") == true);
  const auto degraded = report.at("degraded_features").get<std::vector<std::string>>();
  CHECK(std::find(degraded.begin(), degraded.end(), "ipc_namespace") != degraded.end());
  CHECK(report.at("sandbox").at("features").at("ipc_namespace") == false);

  if (missing.empty()) {
    // Nothing missing: no flag needed, and the report says the grade was not degraded.
    code = test::run_command(base, &out);
    CHECK(code == 0);
    const json full = read_json(s.out() / "report.json");
    CHECK(full.at("allow_degraded") == false);
    CHECK(full.at("degraded_features").empty());
  }
}

TEST_CASE("a grader killed with SIGKILL leaves folders that the next grade sweeps") {
  test::require_data();
  REQUIRE_MESSAGE(fs::exists(test::convlab_binary()), "convlab is not built");
  test::Submission s("killed-team");
  s.add_solutions({kM2File});
  test::TempDir tmp;  // the graders' TMPDIR: what they leave is ours to see
  const std::string grade =
      "exec env TMPDIR=" + tmp.path().string() + " " + test::convlab_binary().string() + " grade " +
      s.dir().string() + " --milestone m2 --seed 7 --cache " + test::grade_cache_dir().string() +
      " --out " + s.out().string() + " --allow-degraded --only 'network/cpu/ece408-high/10000'";
  const pid_t grader = fork();
  REQUIRE(grader >= 0);
  if (grader == 0) {
    const int null = ::open("/dev/null", O_WRONLY);
    dup2(null, 1);
    dup2(null, 2);
    execl("/bin/sh", "sh", "-c", grade.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  // Killed while a check runs: its work folder and the check's private folder both exist.
  const auto count = [&](const std::string& prefix) {
    int n = 0;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(tmp.path(), ec)) {
      n += e.path().filename().string().rfind(prefix, 0) == 0 ? 1 : 0;
    }
    return n;
  };
  for (int i = 0; i < 6000 && count("convlab-run-") == 0; ++i) usleep(20000);
  usleep(300000);
  ::kill(grader, SIGKILL);
  int status = 0;
  waitpid(grader, &status, 0);
  REQUIRE(count("convlab-grade-") == 1);
  REQUIRE(count("convlab-run-") >= 1);

  // The next grade sweeps them (and leaves its own folders to no one: it removes them).
  std::string out;
  const std::string next = "env TMPDIR=" + tmp.path().string() + " " +
                           test::convlab_binary().string() + " grade " + s.dir().string() +
                           " --milestone m2 --seed 7 --cache " + test::grade_cache_dir().string() +
                           " --out " + (s.root.path() / "out2").string() +
                           " --allow-degraded --only 'network/cpu/ece408-high/100'";
  CHECK(test::run_command(next, &out) == 0);
  INFO(out);
  CHECK(count("convlab-grade-") == 0);
  CHECK(count("convlab-run-") == 0);
}

}  // namespace test_grade
