// `convlab grade` end to end on the GPU (m3, final): the staff solutions get full marks with a
// time against cuDNN from the same run, the fused launcher is checked element-wise, and the
// pristine stubs get zero with a message per variant. Skipped (with the reason) without a GPU.
#include <doctest/doctest.h>

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>

#include "grader/grade/grading_plan.hpp"
#include "reference/conv/variant_table.hpp"
#include "reference/milestones/milestone.hpp"
#include "tests/grader/grade/grade_test_support.hpp"

namespace test_grade_gpu {

using namespace convlab;
using namespace convlab::grader;
using nlohmann::json;

namespace {

// The student files of `milestone`'s variants, from the declarations.
std::vector<std::string> files_of(std::string_view milestone) {
  std::vector<std::string> files;
  for (const Variant& v : variants()) {
    if (v.milestone == milestone) files.emplace_back(v.student_file);
  }
  return files;
}
const std::vector<std::string> kFinalFiles = files_of("final");

// The ranked variant of `milestone` (its checks.json).
std::string ranked_variant(const std::string& milestone) {
  const auto specs = load_milestone_specs(test::source_dir(), milestone);
  REQUIRE(specs.size() == 1);
  return specs[0].ranked_variant;
}

// Full marks, except a memcheck that is skipped because compute-sanitizer is missing.
void expect_full_marks(const GradeResult& r) {
  double lost = 0;
  for (const CheckResult& c : r.checks) {
    CAPTURE(c.id);
    CAPTURE(c.output);
    if (c.kind == "memcheck" && c.status == CheckStatus::skipped) {
      CHECK(c.reason == "skipped");
      lost += c.max_score;
      continue;
    }
    CHECK(c.status == CheckStatus::passed);
    CHECK(c.reason == "ok");
  }
  CHECK(r.score == r.max_score - lost);
}

}  // namespace

TEST_CASE("m3: the staff baseline gets full marks and a time against cuDNN") {
  test::require_data();
  test::Submission s("staff-m3");
  s.add_solutions(files_of("m3"));
  const GradeResult r = test::grade(s.options("m3"));
  INFO(test::describe(r));
  CHECK(r.grader_error.empty());
  CHECK(r.max_score == 32);  // 10 + 10 + 5 + 5 (element-wise) + 2 (memcheck)
  expect_full_marks(r);
  CHECK(!r.machine.gpu_name.empty());
  const CheckResult& time = test::check_of(r, "time/baseline/ece408-high/10000");
  REQUIRE(time.op_time_s.has_value());
  REQUIRE(time.reference_time_s.has_value());
  CHECK(time.op_time_runs_s.size() == 3);
  REQUIRE(r.op_time_s.has_value());
  REQUIRE(r.speedup.has_value());
  CHECK(*r.speedup == doctest::Approx(*r.reference_time_s / *r.op_time_s));
  std::ifstream in(s.out() / "results.json");
  const json results = json::parse(in);
  REQUIRE(results.at("leaderboard").size() == 2);
  CHECK(results.at("leaderboard")[1].at("name") == "Speedup vs cuDNN");
}

TEST_CASE("final: the staff variants get full marks; a fused launcher is checked too") {
  test::require_data();
  test::Submission s("staff-final");
  s.add_solutions(kFinalFiles);
  const GradeResult r = test::grade(s.options("final"));
  INFO(test::describe(r));
  CHECK(r.grader_error.empty());
  // The ranked variant: 32 points; every other one 2 + 2, or its menu weight
  // (final/checks.json, grading.other_variants).
  const convlab::Milestone ms = convlab::load_milestone(test::source_dir(), "final");
  REQUIRE(ms.grading.has_value());
  double others = 0.0;
  for (const std::string& id : ms.variants) {
    if (id == ms.ranked_variant) continue;
    const auto weight = ms.grading->variant_points.find(id);
    others += weight == ms.grading->variant_points.end() ? 2 * ms.grading->other_points_per_check
                                                          : weight->second;
  }
  CHECK(kFinalFiles.size() == ms.variants.size());
  CHECK(r.max_score == 32 + others);
  expect_full_marks(r);
  const std::string ranked = ranked_variant("final");
  for (const Variant& v : variants()) {
    if (v.milestone != "final" || !v.fused) continue;
    CAPTURE(v.id);
    const json ew = json::parse(test::check_of(r, "elementwise/" + std::string(v.id)).details_json);
    CHECK(ew.at("fused") == "ok");
    CHECK(ew.at("shapes")[0].contains("fused"));
  }
  REQUIRE(r.op_time_s.has_value());
  CHECK(r.ranked_variant == ranked);
  // A speedup over cuDNN beyond grading.flag_speedup_over (10) gets a flag naming the variant,
  // and only then (the staff kernel is near that line on some GPUs).
  REQUIRE(r.speedup.has_value());
  CHECK(*r.speedup > 0.5);
  const bool flagged = std::any_of(r.flags.begin(), r.flags.end(), [&](const std::string& f) {
    return f.find(ranked) != std::string::npos && f.find("faster than cuDNN") != std::string::npos;
  });
  CHECK(flagged == (*r.speedup > 10.0));
}

TEST_CASE("m3: an out-of-bounds kernel is caught by memcheck") {
  test::require_data();
  test::Submission s("oob-m3");
  // The staff baseline with its bounds check one row short: the threads of the row below the
  // output write into the next map, and past the end of y for the last one.
  const Variant& variant = find_variant(variant_ids("m3").front());
  const std::string file(variant.student_file);
  std::string code = test::solution_as_student(file);
  const std::string guard = "if (h >= H_out || w >= W_out) return;";
  const std::size_t at = code.find(guard);
  REQUIRE_MESSAGE(at != std::string::npos, "the staff baseline has no '" << guard << "'");
  code.replace(at, guard.size(), "if (h > H_out || w >= W_out) return;");
  test::put_file(s.dir(), file, code);
  const GradeResult r = test::grade(s.options("m3", {"memcheck/*"}));
  INFO(test::describe(r));
  const CheckResult& mem = test::check_of(r, "memcheck/" + std::string(variant.id));
  if (mem.status == CheckStatus::skipped) test::skip("compute-sanitizer is missing: " + mem.output);
  CHECK(mem.status == CheckStatus::failed);
  CHECK((mem.reason == "memory_error" || mem.reason == "crash" || mem.reason == "cuda_error"));
  if (mem.reason == "memory_error") {
    // The staff kernel is named after its launcher.
    CHECK(mem.output.find(variant.entry_point() + "_kernel") != std::string::npos);
  }
}

TEST_CASE("final: the pristine stubs get zero, each naming its file") {
  test::require_data();
  test::Submission s("stub-final");
  const GradeResult r = test::grade(s.options("final", {"elementwise/*", "network/*/100"}));
  INFO(test::describe(r));
  CHECK(r.score == 0);
  CHECK_FALSE(r.op_time_s.has_value());
  for (const std::string& file : kFinalFiles) {
    bool named = false;
    for (const CheckResult& c : r.checks) {
      if (c.kind != "elementwise") continue;
      CHECK(c.reason == "not_implemented");
      named = named || c.output.find(file) != std::string::npos;
    }
    CHECK_MESSAGE(named, file);
  }
}

}  // namespace test_grade_gpu
