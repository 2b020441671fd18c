// Hostile submissions graded end to end through `convlab grade`: each folder here attacks the
// grader one way (its README.md says how; the team's files are in its submission/ folder); each
// is graded as what it is, with the specific reason and a readable output, and the grade always
// completes. One ctest entry per case (test_hostile -tc=CASE); GPU cases skip, with the reason,
// where no GPU is usable.
#include <doctest/doctest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "tests/grader/grade/grade_test_support.hpp"
#include "tests/support/test_support.hpp"

namespace test_hostile {

using convlab::test::read_all;
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// One `convlab grade` run and what it left.
struct Grade {
  int exit_code = -1;
  std::string output;  // what convlab printed
  json report;
  std::unique_ptr<convlab::test::TempDir> dir;
  fs::path out() const { return dir->path() / "out"; }

  // The check with this id (the test fails if there is none).
  const json& check(const std::string& id) const {
    for (const json& c : report.at("checks")) {
      if (c.value("id", "") == id) return c;
    }
    FAIL("no check '" << id << "' in the report; convlab printed:\n" << output);
    static const json none;
    return none;
  }
  // Every stderr (or stdout) log of the checks, concatenated.
  std::string logs(const std::string& suffix) const {
    std::string all;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(out() / "logs", ec)) {
      const std::string name = e.path().filename().string();
      if (name.size() < suffix.size() ||
          name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0) {
        continue;
      }
      std::ifstream in(e.path());
      all += std::string((std::istreambuf_iterator<char>(in)), {});
    }
    return all;
  }
};

std::string quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

// Skips the case unless this build's `convlab grade` exists and the data set is installed.
const std::string& grade_help() {
  static const std::string help = [] {
    std::string why;
    if (!convlab::test::real_data_dir(&why)) convlab::test::skip(why);
    std::string out;
    const int rc = convlab::test::run_command(
        quote(convlab::test::convlab_binary().string()) + " grade --help", &out);
    if (rc != 0) {
      convlab::test::skip("`convlab grade` is not in this build (grader/grade/ not built): " +
                          out.substr(0, 300));
    }
    return out;
  }();
  return help;
}

// An attack's lines "// convlab-hostile: insert NAME" replaced by tests/grader/hostile/NAME,
// code that several attacks share.
std::string with_inserts(std::string text) {
  const std::string marker = "// convlab-hostile: insert ";
  for (std::size_t at; (at = text.find(marker)) != std::string::npos;) {
    const std::size_t end = text.find('\n', at);
    const std::string name = text.substr(at + marker.size(), end - at - marker.size());
    const fs::path file = convlab::test::source_dir() / "tests/grader/hostile" / name;
    REQUIRE_MESSAGE(fs::is_regular_file(file), "no " << file << " to insert");
    text.replace(at, end - at + 1, read_all(file));
  }
  return text;
}

// A case whose attack needs a working convolution keeps only the attack (CASE/attack/student/
// FILE, no convolution in it). Its first line, "// convlab-hostile: staff rename NAME", asks for
// the staff solution of that file to be laid before it, with the entry point NAME renamed
// staff_NAME. The submission is put together here, from this tree's staff code, so that no
// fixture holds a working convolution.
fs::path composed_submission(const fs::path& case_dir, const fs::path& into) {
  const fs::path attack = case_dir / "attack";
  const std::string marker = "// convlab-hostile: staff rename ";
  for (const auto& e : fs::recursive_directory_iterator(attack)) {
    if (!e.is_regular_file()) continue;
    const std::string text = with_inserts(read_all(e.path()));
    REQUIRE_MESSAGE(text.rfind(marker, 0) == 0, e.path() << " does not start with " << marker);
    const std::string name = text.substr(marker.size(), text.find('\n') - marker.size());
    const std::string rel = fs::relative(e.path(), attack).string();
    if (!fs::exists(convlab::test::source_dir() / "reference/solutions" / rel.substr(8))) {
      convlab::test::skip("this case lays its attack over the staff solution of " + rel +
                          ", which this tree does not have");
    }
    std::string code = convlab::test::solution_as_student(rel);
    const std::string def = "void " + name + "(";
    const std::size_t at = code.find(def);
    REQUIRE_MESSAGE(at != std::string::npos, "no " << def << " in the staff " << rel);
    code.replace(at, def.size(), "void staff_" + name + "(");
    convlab::test::put_file(into, rel, code + "\n" + text);
  }
  return into;
}

// Grades tests/grader/hostile/CASE/submission (or the composed one) for MILESTONE, running
// only the checks ONLY (plus files, build and symbols), with a fixed seed and the shared
// framework cache of this build. TEAM: the --team given (default: NAME, which report.json must
// then show); ENV: variables for the grader ("TMPDIR=/x").
Grade grade(const std::string& name, const std::string& milestone,
            const std::vector<std::string>& only, const std::vector<std::string>& extra = {},
            const std::string& team = "", const std::string& env = "") {
  grade_help();
  Grade g;
  g.dir = std::make_unique<convlab::test::TempDir>();
  const fs::path case_dir = convlab::test::source_dir() / "tests/grader/hostile" / name;
  const fs::path submission = fs::exists(case_dir / "submission")
                                  ? case_dir / "submission"
                                  : composed_submission(case_dir, g.dir->path() / "submission");
  std::string cmd = (env.empty() ? "" : "env " + env + " ") +
                    quote(convlab::test::convlab_binary().string()) + " grade " +
                    quote(submission.string()) + " --team " + quote(team.empty() ? name : team) +
                    " --milestone " + milestone + " --allow-degraded --out " +
                    quote(g.out().string()) + " --cache " + quote(HOSTILE_CACHE) + " --seed 1";
  for (const std::string& glob : only) {
    cmd += " --only ";
    cmd += quote(glob);
  }
  for (const std::string& arg : extra) {
    cmd += ' ';
    cmd += quote(arg);
  }
  std::cout << "$ " << cmd << std::endl;
  g.exit_code = convlab::test::run_command(cmd, &g.output);
  std::cout << g.output << std::endl;
  const fs::path report = g.out() / "report.json";
  INFO(g.output);
  REQUIRE_MESSAGE(fs::exists(report), "no report.json: the grade did not complete");
  std::ifstream in(report);
  g.report = json::parse(in);
  // Whatever the submission did, the grade completed and says so.
  CHECK(g.exit_code == 0);
  CHECK(g.report.value("schema", "") == "convlab-grade-report/1");
  if (team.empty()) CHECK(g.report.value("team", "") == name);
  CHECK(g.report.value("milestone", "") == milestone);
  return g;
}

std::string show(const json& check) {
  return check.value("id", "?") + ": " + check.value("status", "?") + " (" +
         check.value("reason", "?") + ")\n" + check.value("output", "");
}

// A failed check with this reason and an output that explains it.
void expect_failed(const json& check, const std::string& reason) {
  INFO(show(check));
  CHECK(check.value("status", "") == "failed");
  CHECK(check.value("reason", "") == reason);
  CHECK(check.value("score", -1.0) == 0.0);
  CHECK(check.value("output", "").size() > 20);
}

void expect_passed(const json& check) {
  INFO(show(check));
  CHECK(check.value("status", "") == "passed");
  CHECK(check.value("reason", "") == "ok");
}

// The files, build and symbols checks of a submission that is only hostile at run time.
void expect_clean_build(const Grade& g) {
  expect_passed(g.check("files"));
  expect_passed(g.check("build"));
  expect_passed(g.check("symbols"));
}

// Pids of live processes named `comm`.
std::vector<int> processes_named(const std::string& comm) {
  std::vector<int> found;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator("/proc", ec)) {
    const std::string pid = e.path().filename().string();
    if (pid.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream in(e.path() / "comm");
    std::string name;
    std::getline(in, name);
    if (name == comm) found.push_back(std::stoi(pid));
  }
  return found;
}

// The m3 checks skip where no GPU is usable; so does the case, with their reason.
void skip_without_gpu(const Grade& g, const std::string& id) {
  const json& c = g.check(id);
  if (c.value("reason", "") == "no_gpu") {
    convlab::test::skip("no usable GPU: " + c.value("output", ""));
  }
}

// Skips before anything is built where the case cannot run: a build without CUDA, or no GPU
// the driver lists.
void require_cuda_build() {
#ifndef CONVLAB_HAVE_CUDA
  convlab::test::skip("this convlab is built without CUDA (-DCONVLAB_CUDA=OFF): m3 needs it");
#endif
  std::string out;
  if (convlab::test::run_command("nvidia-smi -L", &out) != 0) {
    convlab::test::skip("no usable GPU (nvidia-smi -L: " + out.substr(0, 200) + ")");
  }
}

const std::string kM2Check = "network/cpu/ece408-high/100";

// Everything a grade wrote that someone reads: report.json, results.json and every log.
std::string everything_written(const Grade& g) {
  std::string all = read_all(g.out() / "report.json") + read_all(g.out() / "results.json");
  std::error_code ec;
  for (const auto& e : fs::recursive_directory_iterator(g.out() / "logs", ec)) {
    if (e.is_regular_file()) all += read_all(e.path());
  }
  return all;
}

// A temporary folder for one grader (its TMPDIR): what the grade leaves there is visible.
struct GraderTmp {
  convlab::test::TempDir dir;
  std::string env() const { return "TMPDIR=" + quote(dir.path().string()); }
  // Entries left in it, and live processes that name it (a compiler, a check).
  std::vector<std::string> leftovers() const {
    std::vector<std::string> left;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(dir.path(), ec)) {
      left.push_back(e.path().filename().string());
    }
    for (const auto& e : fs::directory_iterator("/proc", ec)) {
      const std::string pid = e.path().filename().string();
      if (pid.find_first_not_of("0123456789") != std::string::npos) continue;
      std::string cmdline = read_all(e.path() / "cmdline");
      if (cmdline.find(dir.path().string()) != std::string::npos) left.push_back("process " + pid);
    }
    return left;
  }
};

// SysV shared-memory segments of the grader's IPC namespace with this key (/proc/sysvipc/shm).
int segments_with_key(long key) {
  std::ifstream in("/proc/sysvipc/shm");
  std::string header;
  std::getline(in, header);
  int n = 0;
  long k = 0;
  std::string rest;
  while (in >> k && std::getline(in, rest)) n += k == key ? 1 : 0;
  return n;
}

}  // namespace

TEST_CASE("m2_infinite_loop") {
  if (grade_help().find("--time-limit") == std::string::npos) {
    convlab::test::skip(
        "`convlab grade` has no --time-limit option, and m2's own wall-clock limit is 600 s: "
        "too long for this suite");
  }
  // Two checks side by side: each times out there, runs again alone, and times out again.
  const std::string other = "network/cpu/ece408-low/100";
  const Grade g = grade("m2_infinite_loop", "m2", {kM2Check, other},
                        {"--time-limit", "6", "--check-jobs", "2"});
  expect_clean_build(g);
  for (const std::string& id : {kM2Check, other}) {
    CAPTURE(id);
    const json& c = g.check(id);
    expect_failed(c, "timeout");
    CHECK(c.value("output", "").find("timed out") != std::string::npos);
    CHECK(c.value("wall_s", 0.0) >= 6.0);
    CHECK(c.value("wall_s", 0.0) < 20.0);
    CHECK(g.output.find(id + ": ran out of time or GPU memory beside other checks; running it "
                             "again alone") != std::string::npos);
  }
}

TEST_CASE("m2_segfault") {
  const Grade g = grade("m2_segfault", "m2", {kM2Check});
  expect_clean_build(g);
  const json& c = g.check(kM2Check);
  expect_failed(c, "crash");
  CHECK(c.value("output", "").find("SIGSEGV (segmentation fault") != std::string::npos);
}

TEST_CASE("m2_abort") {
  const Grade g = grade("m2_abort", "m2", {kM2Check});
  expect_clean_build(g);
  const json& c = g.check(kM2Check);
  expect_failed(c, "crash");
  CHECK(c.value("output", "").find("SIGABRT (abort") != std::string::npos);
}

TEST_CASE("m2_fork_bomb") {
  REQUIRE(processes_named("hostile-sleeper").empty());
  const Grade g = grade("m2_fork_bomb", "m2", {kM2Check});
  expect_clean_build(g);
  const json& c = g.check(kM2Check);
  INFO(show(c));
  // Graded as what it is: a correct count, or the failure the exhausted process limit caused
  // (threads count against it too); never the grader's own failure.
  const std::string reason = c.value("reason", "");
  CHECK((reason == "ok" || reason == "error" || reason == "crash"));
  // Contained: nothing it forked outlives its check.
  CHECK(processes_named("hostile-sleeper").empty());
  const std::string err = g.logs(".stderr.txt");
  int forked = -1;
  const auto at = err.find("fork bomb: forked ");
  REQUIRE_MESSAGE(at != std::string::npos, "stderr logs:\n" << err);
  REQUIRE(std::sscanf(err.c_str() + at, "fork bomb: forked %d of 300", &forked) == 1);
  const json& features = g.report.at("sandbox").at("features");
  if (features.value("dropped_privileges", false) || geteuid() != 0) {
    const int limit = g.report.at("sandbox").at("limits").value("max_processes", 0);
    CHECK(forked < 300);
    CHECK(forked <= limit);
  } else {
    MESSAGE("checks run as root here: the process limit does not bind (" << forked << " forks)");
  }
}

TEST_CASE("m2_endless_output") {
  const Grade g = grade("m2_endless_output", "m2", {kM2Check});
  expect_clean_build(g);
  const json& c = g.check(kM2Check);
  expect_failed(c, "output_limit");
  CHECK(c.value("output", "").find("passed its limit") != std::string::npos);
  // The kept output stops at the cap.
  const std::string out = g.logs(".stdout.txt");
  const std::size_t cap = g.report.at("sandbox").at("limits").value("max_output_bytes", 0u);
  CHECK(out.size() == cap);
}

TEST_CASE("m2_fake_op_time") {
  const std::string id = "time/cpu/ece408-high/10000";
  const Grade g = grade("m2_fake_op_time", "m2", {id}, {"--runs", "1"});
  expect_clean_build(g);
  const json& c = g.check(id);
  expect_passed(c);
  INFO(show(c));
  // The printed line reached stdout, and nothing took it for the time.
  CHECK(g.logs(".stdout.txt").find("Op Time: 0.000001") != std::string::npos);
  REQUIRE(c.at("op_time_s").is_number());
  const double op_time = c.at("op_time_s").get<double>();
  CHECK(op_time != doctest::Approx(0.000001));
  CHECK(op_time > 1e-3);  // 10000 images through a plain CPU loop
  REQUIRE(g.report.at("op_time_s").is_number());
  CHECK(g.report.at("op_time_s").get<double>() == doctest::Approx(op_time));
}

TEST_CASE("m2_write_outside") {
  const fs::path marker = "/tmp/convlab-hostile-marker";
  fs::remove(marker);
  REQUIRE_FALSE(fs::exists(marker));
  const Grade g = grade("m2_write_outside", "m2", {kM2Check});
  expect_clean_build(g);
  expect_passed(g.check(kM2Check));
  CHECK_FALSE(fs::exists(marker));
  // Both writes failed: /tmp and the framework tree it was compiled in.
  const std::string err = g.logs(".stderr.txt");
  INFO(err);
  CHECK(err.find("write-outside: cannot write /tmp/convlab-hostile-marker") != std::string::npos);
  std::size_t failures = 0;
  for (auto at = err.find("write-outside: cannot write "); at != std::string::npos;
       at = err.find("write-outside: cannot write ", at + 1)) {
    ++failures;
  }
  CHECK(failures == 2);
  CHECK(err.find("write-outside: wrote") == std::string::npos);
}

TEST_CASE("m2_read_labels") {
  const Grade g = grade("m2_read_labels", "m2", {kM2Check, "elementwise/cpu"});
  expect_clean_build(g);
  expect_failed(g.check(kM2Check), "wrong_count");
  expect_failed(g.check("elementwise/cpu"), "mismatch");
  const std::string err = g.logs(".stderr.txt");
  INFO(err);
  CHECK(err.find("labels: cannot open") != std::string::npos);
  if (g.report.at("sandbox").at("features").value("mount_namespace", false)) {
    CHECK(err.find("labels: read") == std::string::npos);
  } else {
    MESSAGE("no mount namespace here: the labels stay readable, only the checks catch it");
  }
}

TEST_CASE("m2_cudnn_call") {
  const Grade g = grade("m2_cudnn_call", "m2", {kM2Check});
  expect_passed(g.check("files"));
  const json& symbols = g.check("symbols");
  if (symbols.value("reason", "") != "forbidden_symbol") {
#ifndef CONVLAB_HAVE_CUDA
    convlab::test::skip("the cuDNN symbol check needs a CUDA build of convlab; here: " +
                        show(symbols));
#endif
  }
  expect_failed(symbols, "forbidden_symbol");
  CHECK(symbols.value("output", "").find("cudnnCreate") != std::string::npos);
  const json& net = g.check(kM2Check);
  CHECK(net.value("status", "") == "failed");
  CHECK(net.value("reason", "") == "forbidden_symbol");
}

TEST_CASE("m2_hardcoded_shapes") {
  const fs::path models = convlab::test::source_dir() / "tests/grader/models";
  const Grade g =
      grade("m2_hardcoded_shapes", "m2", {kM2Check, "hidden/cpu/*"}, {"--models", models.string()});
  expect_clean_build(g);
  // Right on the public model it was written for...
  expect_passed(g.check(kM2Check));
  // ...caught by the hidden one.
  const json& hidden = g.check("hidden/cpu/hidden-1/10000");
  expect_failed(hidden, "wrong_count");
  CHECK(hidden.value("correct", -1) != 8000);
  CHECK(hidden.value("expected_correct", -1) == 8000);
  // Students read the outcome, not the hidden model's name.
  CHECK(hidden.value("output", "").find("hidden-1") == std::string::npos);
  CHECK(hidden.value("name", "").find("hidden-1") == std::string::npos);
}

TEST_CASE("m2_edited_harness") {
  const Grade g = grade("m2_edited_harness", "m2", {kM2Check});
  const json& files = g.check("files");
  expect_failed(files, "forbidden_file");
  CHECK(files.value("output", "").find("reference/network/network.cpp") != std::string::npos);
  // Graded with the pristine harness: the edited file (an #error) was never compiled.
  expect_passed(g.check("build"));
  expect_passed(g.check(kM2Check));
}

TEST_CASE("m3_out_of_bounds") {
  require_cuda_build();
  const std::string net = "network/baseline/ece408-high/100";
  const Grade g = grade("m3_out_of_bounds", "m3", {net, "memcheck/baseline"});
  expect_clean_build(g);
  skip_without_gpu(g, net);
  const json& memcheck = g.check("memcheck/baseline");
  const json& network = g.check(net);
  INFO(show(memcheck));
  INFO(show(network));
  if (memcheck.value("status", "") == "skipped") {
    // No compute-sanitizer: only a crash or a CUDA error can catch it.
    const std::string reason = network.value("reason", "");
    if (reason != "crash" && reason != "cuda_error") {
      convlab::test::skip("compute-sanitizer is not installed and the write went unnoticed: " +
                          memcheck.value("output", ""));
    }
    return;
  }
  CHECK(memcheck.value("status", "") == "failed");
  const std::string reason = memcheck.value("reason", "");
  CHECK((reason == "memory_error" || reason == "crash" || reason == "cuda_error"));
  if (reason == "memory_error") {
    // The sanitizer's report, which names the kernel and the access, reaches the student.
    CHECK(memcheck.value("output", "").find("Invalid __global__ write") != std::string::npos);
    CHECK(memcheck.value("output", "").find("conv_kernel") != std::string::npos);
  }
}

TEST_CASE("m3_unchecked_launch") {
  require_cuda_build();
  const std::string net = "network/baseline/ece408-high/100";
  const Grade g = grade("m3_unchecked_launch", "m3", {net});
  expect_clean_build(g);
  skip_without_gpu(g, net);
  const json& c = g.check(net);
  INFO(show(c));
  CHECK(c.value("status", "") == "failed");
  const std::string reason = c.value("reason", "");
  CHECK((reason == "cuda_error" || reason == "wrong_count"));
  // Either way the student reads which CUDA call failed and why ("invalid configuration
  // argument", or "invalid argument" on recent drivers), not only a wrong count.
  const std::string output = c.value("output", "");
  CHECK((output.find("invalid configuration argument") != std::string::npos ||
         output.find("invalid argument") != std::string::npos));
}

// ---------------------------------------------------------------------------------------------
// The team's process holds only the team's code; the referee owns inputs, clock and verdict.

namespace {

// The time check of a composed case (staff convolution plus an attack): it passes, and its Op
// Time is the referee's honest one: no 10x speed-up over the library, no flag.
const json& expect_honest_time(const Grade& g, const std::string& id, double max_speedup) {
  const json& c = g.check(id);
  expect_passed(c);
  INFO(show(c));
  REQUIRE(c.at("op_time_s").is_number());
  const double op_time = c.at("op_time_s").get<double>();
  CHECK(op_time > 0.0);
  if (c.contains("reference_time_s") && c.at("reference_time_s").is_number()) {
    const double speedup = c.at("reference_time_s").get<double>() / op_time;
    CAPTURE(speedup);
    CHECK(speedup < max_speedup);
  }
  CHECK(g.report.value("flags", json::array()).empty());
  return c;
}

long long cache_hits(const std::string& log) {
  const std::size_t at = log.find("cache hits: ");
  REQUIRE_MESSAGE(at != std::string::npos, "the attack did not report its cache: " << log);
  return std::stoll(log.substr(at + 12));
}

const std::string kM2Time = "time/cpu/ece408-high/10000";
const std::string kM3Time = "time/baseline/ece408-high/10000";

}  // namespace

TEST_CASE("m2_reach_reference") {
  const Grade g = grade("m2_reach_reference", "m2", {kM2Check, "elementwise/cpu"});
  expect_clean_build(g);
  expect_failed(g.check(kM2Check), "wrong_count");
  expect_failed(g.check("elementwise/cpu"), "mismatch");
  CHECK(g.report.value("score", -1.0) == 0.0);
  CHECK(g.logs(".stderr.txt").find("reference not found") != std::string::npos);
  CHECK(g.logs(".stderr.txt").find("reference found") == std::string::npos);
}

TEST_CASE("m2_forge_result") {
  const Grade g = grade("m2_forge_result", "m2", {kM2Time}, {"--runs", "1"});
  expect_clean_build(g);
  const json& c = expect_honest_time(g, kM2Time, 10.0);
  CHECK(c.at("op_time_s").get<double>() > 1e-3);  // not the forged 4.2 us
  CHECK(g.report.dump().find("forged") == std::string::npos);
  CHECK(read_all(g.out() / "results.json").find("forged") == std::string::npos);
}

TEST_CASE("m2_forge_socket") {
  const Grade g = grade("m2_forge_socket", "m2", {kM2Check});
  expect_clean_build(g);
  const json& c = g.check(kM2Check);
  expect_failed(c, "exit_code");
  // A forged reply caught before the request ("out of turn") or after it, with the wrong
  // nonce ("answered another request"): which one depends on the thread's timing.
  const std::string output = c.value("output", "");
  CHECK_MESSAGE((output.find("out of turn") != std::string::npos ||
                 output.find("answered another request") != std::string::npos),
                output);
  CHECK(g.report.value("op_time_s", json()).is_null());
}

TEST_CASE("m2_patch_clock") {
  const Grade g = grade("m2_patch_clock", "m2", {kM2Time}, {"--runs", "1"});
  expect_clean_build(g);
  expect_honest_time(g, kM2Time, 10.0);
  CHECK(g.logs(".stderr.txt").find("steady_clock::now patched") != std::string::npos);
}

TEST_CASE("m2_cache_outputs") {
  const Grade g = grade("m2_cache_outputs", "m2", {kM2Time}, {"--runs", "1"});
  expect_clean_build(g);
  expect_honest_time(g, kM2Time, 10.0);
  // 10000 real images, then 10000 noisy ones: a hit is a duplicate image of the test set, never
  // a timed image.
  CHECK(cache_hits(g.logs(".stderr.txt")) < 100);
}

TEST_CASE("m3_reach_reference") {
  require_cuda_build();
  const std::string net = "network/baseline/ece408-high/100";
  const Grade g = grade("m3_reach_reference", "m3", {net, "elementwise/baseline"});
  expect_clean_build(g);
  skip_without_gpu(g, net);
  expect_failed(g.check(net), "wrong_count");
  expect_failed(g.check("elementwise/baseline"), "mismatch");
  CHECK(g.logs(".stderr.txt").find("cudnn mapped: no, library conv: not found") !=
        std::string::npos);
}

TEST_CASE("m3_patch_clock") {
  require_cuda_build();
  const Grade g = grade("m3_patch_clock", "m3", {kM3Time}, {"--runs", "3"});
  expect_clean_build(g);
  skip_without_gpu(g, kM3Time);
  expect_honest_time(g, kM3Time, 10.0);
  CHECK(g.logs(".stderr.txt").find("clocks patched") != std::string::npos);
}

TEST_CASE("m3_early_done") {
  require_cuda_build();
  const Grade g = grade("m3_early_done", "m3", {kM3Time}, {"--runs", "3"});
  expect_clean_build(g);
  skip_without_gpu(g, kM3Time);
  const json& c = g.check(kM3Time);
  INFO(show(c));
  if (c.value("status", "") == "passed") {
    // The fence waited for the kernel: timed as the honest baseline is.
    expect_honest_time(g, kM3Time, 3.0);
  } else {
    // Caught with unwritten (NaN) outputs: in the count pass or in a checked timed call.
    const std::string reason = c.value("reason", "");
    CHECK((reason == "wrong_count" || reason == "mismatch"));
    CHECK(c.value("score", -1.0) == 0.0);
  }
}

TEST_CASE("m3_cache_outputs") {
  require_cuda_build();
  const Grade g = grade("m3_cache_outputs", "m3", {kM3Time}, {"--runs", "3"});
  expect_clean_build(g);
  skip_without_gpu(g, kM3Time);
  expect_honest_time(g, kM3Time, 10.0);
  CHECK(cache_hits(g.logs(".stderr.txt")) == 0);
}

TEST_CASE("m3_skip_repeats") {
  require_cuda_build();
  const Grade g = grade("m3_skip_repeats", "m3", {kM3Time}, {"--runs", "3"});
  expect_clean_build(g);
  skip_without_gpu(g, kM3Time);
  expect_failed(g.check(kM3Time), "mismatch");
  const std::string log = g.logs(".stderr.txt");
  INFO(log);
  // The attack did meet repeated requests: it copied outputs instead of computing them.
  const std::size_t at = log.find("skip-repeats: computed ");
  REQUIRE(at != std::string::npos);
  CHECK(log.find(", copied 0") == std::string::npos);
}

// ---- Trusted timing: nothing the team can touch is subtracted or verified against ----------

// The Op Time of the honest control (the staff baseline as a submission), graded like the
// attacks it is compared with.
double honest_m3_op_time() {
  const Grade g = grade("m3_honest_control", "m3", {kM3Time}, {"--runs", "3"});
  skip_without_gpu(g, kM3Time);
  const json& c = expect_honest_time(g, kM3Time, 10.0);
  return c.at("op_time_s").get<double>();
}

TEST_CASE("m3_rewrite_inputs") {
  require_cuda_build();
  const Grade g = grade("m3_rewrite_inputs", "m3", {kM3Time}, {"--runs", "3"});
  expect_clean_build(g);
  skip_without_gpu(g, kM3Time);
  const json& c = g.check(kM3Time);
  expect_failed(c, "input_written");
  CHECK(c.value("output", "").find("input x") != std::string::npos);
  CHECK(g.report.value("op_time_s", json()).is_null());
  const std::string log = g.logs(".stderr.txt");
  INFO(log);
  // The attack did meet repeated calls and rewrote their inputs.
  CHECK(log.find("rewrite-inputs: rewrote ") != std::string::npos);
  CHECK(log.find("rewrite-inputs: rewrote 0 ") == std::string::npos);
}

TEST_CASE("m3_contention") {
  require_cuda_build();
  const double honest = honest_m3_op_time();
  const Grade g = grade("m3_contention", "m3", {kM3Time}, {"--runs", "3"});
  expect_clean_build(g);
  skip_without_gpu(g, kM3Time);
  const json& c = expect_honest_time(g, kM3Time, 10.0);
  const double attacked = c.at("op_time_s").get<double>();
  CAPTURE(honest);
  CAPTURE(attacked);
  // Load before the first call buys nothing: the time is the honest one, within noise.
  CHECK(attacked > 0.9 * honest);
  CHECK(g.logs(".stderr.txt").find("contention: load started") != std::string::npos);
}

TEST_CASE("m3_fill_memory") {
  require_cuda_build();
  const Grade g = grade("m3_fill_memory", "m3", {kM3Time}, {"--runs", "3"});
  expect_clean_build(g);
  skip_without_gpu(g, kM3Time);
  const json& c = g.check(kM3Time);
  INFO(show(c));
  CHECK(c.value("reason", "") != "grader_error");
  if (c.value("status", "") != "passed") expect_failed(c, "gpu_memory");
  CHECK(g.report.value("grader_error", "").empty());
  CHECK(g.logs(".stderr.txt").find("fill-memory: holding ") != std::string::npos);
}

// What a snoop reported: its "found" lines, after checking that it ran to the end.
std::string snoop_findings(const Grade& g) {
  const std::string log = g.logs(".stderr.txt");
  INFO(log);
  REQUIRE(log.find("snoop: done, ") != std::string::npos);
  std::string found;
  std::stringstream ss(log);
  for (std::string line; std::getline(ss, line);) {
    if (line.rfind("snoop: found", 0) == 0) found += line + "\n";
  }
  return found;
}

TEST_CASE("m2_snoop") {
  const Grade g = grade("m2_snoop", "m2", {kM2Check});
  expect_clean_build(g);
  expect_passed(g.check(kM2Check));
  CHECK(snoop_findings(g) == "");
}

TEST_CASE("m3_snoop") {
  require_cuda_build();
  const std::string net = "network/baseline/ece408-high/100";
  const Grade g = grade("m3_snoop", "m3", {net});
  expect_clean_build(g);
  skip_without_gpu(g, net);
  expect_passed(g.check(net));
  CHECK(snoop_findings(g) == "");
}

// ---- Isolation: each case is graded as what it is, leaks nothing, leaves nothing ----------

TEST_CASE("m2_shm_leak") {
  constexpr long kKey = 0x0c0ffee5;
  REQUIRE(segments_with_key(kKey) == 0);
  const fs::path models = convlab::test::source_dir() / "tests/grader/models";
  GraderTmp tmp;
  // Hidden check, public checks, then a second grade: each could find what another left.
  const Grade g = grade("m2_shm_leak", "m2", {"hidden/cpu/*", kM2Check, "elementwise/cpu"},
                        {"--models", models.string()}, "", tmp.env());
  expect_clean_build(g);
  expect_failed(g.check(kM2Check), "wrong_count");
  if (!g.report.at("sandbox").at("features").value("ipc_namespace", false)) {
    convlab::test::skip("no IPC namespace on this machine (a degraded grade): segments are shared");
  }
  const Grade again = grade("m2_shm_leak", "m2", {kM2Check}, {}, "", tmp.env());
  expect_failed(again.check(kM2Check), "wrong_count");
  for (const Grade* each : {&g, &again}) {
    const std::string err = each->logs(".stderr.txt");
    INFO(err);
    CHECK(err.find("shm-leak: no segment yet; made one: yes") != std::string::npos);
    CHECK(err.find("shm-leak: found") == std::string::npos);
    CHECK(everything_written(*each).find("found the segment") == std::string::npos);
  }
  CHECK(g.report.value("score", -1.0) < g.report.value("max_score", 0.0));
  // Nothing held: no segment in the grader's namespace, no folder, no process.
  CHECK(segments_with_key(kKey) == 0);
  CHECK(tmp.leftovers().empty());
}

TEST_CASE("m2_memory_hog") {
  GraderTmp tmp;
  const Grade g = grade("m2_memory_hog", "m2", {kM2Check}, {}, "", tmp.env());
  expect_clean_build(g);
  const json& c = g.check(kM2Check);
  expect_failed(c, "memory_limit");
  const std::uint64_t limit =
      g.report.at("sandbox").at("limits").value("max_memory_bytes", std::uint64_t{0});
  CHECK(limit > 0);
  CHECK(limit < (6ull << 30));
  CHECK(c.value("output", "").find("memory limit of") != std::string::npos);
  CHECK(g.report.at("sandbox").at("features").value("memory_limit", "none") != "none");
  // Stopped near the limit, never at 6 GB.
  CHECK(g.logs(".stderr.txt").find("memory-hog: 6144 MiB") == std::string::npos);
  CHECK(g.report.value("score", -1.0) == 0.0);
  CHECK(tmp.leftovers().empty());
}

TEST_CASE("m2_tmp_filler") {
  GraderTmp tmp;
  const Grade g = grade("m2_tmp_filler", "m2", {kM2Check}, {}, "", tmp.env());
  expect_clean_build(g);
  expect_failed(g.check(kM2Check), "wrong_count");
  const std::string err = g.logs(".stderr.txt");
  INFO(err);
  // Each folder it could write to stopped it, in bytes and in files.
  int stopped = 0;
  for (auto at = err.find("tmp-filler: "); at != std::string::npos;
       at = err.find("tmp-filler: ", at + 1)) {
    const std::string line = err.substr(at, err.find('\n', at) - at);
    INFO(line);
    CHECK(line.find("wrote 1536 MiB") == std::string::npos);
    CHECK(line.find("made 200000 files") == std::string::npos);
    ++stopped;
  }
  CHECK(stopped == 3);
  if (g.report.at("sandbox").at("features").value("private_tmpfs", false)) {
    CHECK(err.find("(No space left on device), made ") != std::string::npos);
  }
  // Nothing it wrote is left: its private folder was a tmpfs gone with the run.
  CHECK(tmp.leftovers().empty());
  std::error_code ec;
  for (const auto& e : fs::directory_iterator("/tmp", ec)) {
    CHECK_FALSE(fs::exists(e.path() / "filler0.bin"));
  }
}

TEST_CASE("m2_constexpr_bomb") {
  GraderTmp tmp;
  // A 1 GiB limit stops the bomb within seconds; the default 4 GiB takes a minute.
  const Grade g =
      grade("m2_constexpr_bomb", "m2", {kM2Check}, {"--build-memory", "1024"}, "", tmp.env());
  const json& build = g.check("build");
  INFO(show(build));
  CHECK(build.value("status", "") == "failed");
  const std::string reason = build.value("reason", "");
  CHECK((reason == "build_failed" || reason == "timeout"));
  const std::string output = build.value("output", "");
  CHECK((output.find("memory limit of 1 GiB") != std::string::npos ||
         output.find("time limit") != std::string::npos));
  CHECK(g.report.value("score", -1.0) == 0.0);
  // No compiler outlives the build.
  CHECK(tmp.leftovers().empty());
}

TEST_CASE("m2_incbin_escape") {
  // A file of "another checkout" that every user could read, were it visible.
  const fs::path other = "/tmp/convlab-hostile-other-checkout";
  const std::string marker = "STAFF-ONLY-" + std::to_string(getpid()) + "-MARKER";
  fs::create_directories(other);
  std::ofstream(other / "staff_solution.txt") << marker << "\n";
  fs::permissions(other, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                             fs::perms::others_read | fs::perms::others_exec);
  fs::permissions(other / "staff_solution.txt", fs::perms::owner_read | fs::perms::owner_write |
                                                    fs::perms::group_read | fs::perms::others_read);
  std::string shadow_line;  // the first line of the shadow file, where the test can read it
  if (std::ifstream shadow("/etc/shadow"); shadow) std::getline(shadow, shadow_line);

  GraderTmp tmp;
  const Grade g = grade("m2_incbin_escape", "m2", {kM2Check}, {}, "", tmp.env());
  fs::remove_all(other);
  if (!g.report.at("sandbox").at("features").value("mount_namespace", false)) {
    convlab::test::skip(
        "no mount namespace on this machine (a degraded grade): no allow-list view");
  }
  expect_passed(g.check("files"));
  const json& build = g.check("build");
  INFO(show(build));
  CHECK(build.value("status", "") == "failed");
  const std::string reason = build.value("reason", "");
  CHECK((reason == "build_failed" || reason == "forbidden_include"));
  CHECK(g.report.value("score", -1.0) == 0.0);
  const std::string written = everything_written(g) + g.output;
  CHECK(written.find(marker) == std::string::npos);
  if (shadow_line.size() > 8) CHECK(written.find(shadow_line) == std::string::npos);
  CHECK(tmp.leftovers().empty());
}

TEST_CASE("m2_control_chars") {
  // Recolour, clear the screen, set the window title, ring the bell; C1 CSI; DEL.
  const std::string team =
      "ctl\x1b[31m-red\x1b[2J\x1b]0;owned\x07-team\x07\xc2\x9b"
      "1m\x7f";
  const std::string clean = "ctl-red-team1m";
  const Grade g = grade("m2_control_chars", "m2", {kM2Check}, {}, team);
  expect_failed(g.check(kM2Check), "wrong_count");
  CHECK(g.report.value("team", "") == clean);
  const std::string written = everything_written(g) + g.output;
  for (const char c : {'\x1b', '\x07', '\x7f'}) CHECK(written.find(c) == std::string::npos);
  CHECK(written.find("\xc2\x9b") == std::string::npos);
  CHECK(g.output.find(clean) != std::string::npos);
}

}  // namespace test_hostile
