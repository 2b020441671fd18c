// The grader's parts that run nothing: the element-wise oracle and comparison, the shared
// protocol (base64, shapes, input generator), the check plan with its points and ids, hidden
// models, --only globs, and the reports (Gradescope's results.json parsed back).
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>

#include "grader/grade/elementwise.hpp"
#include "grader/grade/grading_plan.hpp"
#include "grader/grade/report.hpp"
#include "grader/worker/protocol.hpp"
#include "grader/worker/verify_rule.hpp"
#include "reference/conv/elementwise.hpp"
#include "reference/conv/library_conv.hpp"
#include "reference/conv/variant_table.hpp"
#include "reference/core/error.hpp"
#include "reference/model/model.hpp"
#include "tests/support/test_support.hpp"

namespace test_grade_units {

using namespace convlab;
using namespace convlab::grader;
using nlohmann::json;
namespace fs = std::filesystem;

TEST_CASE("base64 round-trips every length and rejects malformed text") {
  for (std::size_t n = 0; n < 10; ++n) {
    std::vector<unsigned char> bytes;
    for (std::size_t i = 0; i < n; ++i) bytes.push_back(static_cast<unsigned char>(i * 37 + 200));
    const std::string text = base64_encode(bytes.data(), bytes.size());
    CHECK(text.size() == (n + 2) / 3 * 4);
    const auto back = base64_decode(text);
    REQUIRE(back.has_value());
    CHECK(*back == bytes);
  }
  CHECK(base64_encode("Man", 3) == "TWFu");
  CHECK(base64_encode("Ma", 2) == "TWE=");
  CHECK(base64_encode("M", 1) == "TQ==");
  CHECK_FALSE(base64_decode("TWE").has_value());       // length
  CHECK_FALSE(base64_decode("TW!u").has_value());      // character
  CHECK_FALSE(base64_decode("T=Fu").has_value());      // padding inside
  CHECK_FALSE(base64_decode("TQ==TWFu").has_value());  // padding before the end
  const std::vector<float> f = {1.5f, -0.0f, std::numeric_limits<float>::quiet_NaN(), 3e-38f};
  const auto g = decode_floats(encode_floats(f));
  REQUIRE(g.has_value());
  REQUIRE(g->size() == 4);
  CHECK((*g)[0] == 1.5f);
  CHECK(std::signbit((*g)[1]));
  CHECK(std::isnan((*g)[2]));
  CHECK(!decode_floats(base64_encode("abc", 3)).has_value());  // not whole floats
}

TEST_CASE("shape arguments parse six positive integers and nothing else") {
  const ConvShape s{3, 50, 1, 28, 28, 5};
  CHECK(shape_argument(s) == "3,50,1,28,28,5");
  const auto back = parse_shape_argument("3,50,1,28,28,5");
  REQUIRE(back.has_value());
  CHECK(*back == s);
  for (const char* bad : {"", "1,2,3,4,5", "1,2,3,4,5,6,7", "1,2,3,4,5,x", "1,2,0,4,5,6",
                          "1,2,-3,4,5,6", "1,,3,4,5,6", "1,2,3,4,5,6,"}) {
    CAPTURE(bad);
    CHECK_FALSE(parse_shape_argument(bad).has_value());
  }
}

TEST_CASE("the element-wise inputs are deterministic, seed-dependent, in [-1, 1) and exact") {
  const auto a = elementwise_values(42, 0, ElementwiseTensor::x, 4096);
  CHECK(a == elementwise_values(42, 0, ElementwiseTensor::x, 4096));
  CHECK(a != elementwise_values(43, 0, ElementwiseTensor::x, 4096));
  CHECK(a != elementwise_values(42, 1, ElementwiseTensor::x, 4096));
  CHECK(a != elementwise_values(42, 0, ElementwiseTensor::k, 4096));
  double lo = 1, hi = -1, sum = 0;
  for (float v : a) {
    CHECK(v >= -1.0f);
    CHECK(v < 1.0f);
    // A multiple of 2^-23: exact in float32.
    const double scaled = (static_cast<double>(v) + 1.0) * 0x1p23;
    CHECK(scaled == std::floor(scaled));
    lo = std::min(lo, double{v});
    hi = std::max(hi, double{v});
    sum += v;
  }
  CHECK(lo < -0.99);
  CHECK(hi > 0.99);
  CHECK(std::fabs(sum / 4096) < 0.05);
  // Pinned: a change of the generator changes every grade's inputs and must be deliberate.
  // The values come from an independent implementation of the documented rule.
  const auto pinned = elementwise_values(0, 0, ElementwiseTensor::x, 3);
  CHECK(pinned[0] == -0.13694405555725098f);
  CHECK(pinned[1] == -0.9471324682235718f);
  CHECK(pinned[2] == 0.9417638778686523f);
  const auto pinned_k = elementwise_values(12345, 2, ElementwiseTensor::k, 2);
  CHECK(pinned_k[0] == -0.28104305267333984f);
  CHECK(pinned_k[1] == 0.5367351770401001f);
}

TEST_CASE("the double-precision oracle agrees with the library convolution") {
  const ConvShape s{2, 3, 2, 9, 11, 3};
  const auto x = elementwise_values(7, 0, ElementwiseTensor::x, s.x_elements());
  const auto k = elementwise_values(7, 0, ElementwiseTensor::k, s.k_elements());
  const std::vector<double> want = conv_reference_double(s, x, k);
  std::vector<float> y(static_cast<std::size_t>(s.y_elements()));
  conv_forward_reference(y.data(), x.data(), k.data(), s);
  const ElementwiseComparison c = compare_elementwise(y, want, s, 1e-5, 1e-5);
  CHECK(c.ok);
  CHECK(c.mismatches == 0);
  CHECK(c.elements == s.y_elements());
  REQUIRE(c.worst.has_value());
  CHECK(c.worst->error < 1e-5);
  // One term by hand: y[1][2][3][4].
  double sum = 0;
  for (int c2 = 0; c2 < s.C; ++c2) {
    for (int p = 0; p < s.K; ++p) {
      for (int q = 0; q < s.K; ++q) {
        sum += double{x[static_cast<std::size_t>(((1 * s.C + c2) * s.H + 3 + p) * s.W + 4 + q)]} *
               k[static_cast<std::size_t>(((2 * s.C + c2) * s.K + p) * s.K + q)];
      }
    }
  }
  CHECK(want[static_cast<std::size_t>(((1 * s.M + 2) * s.H_out() + 3) * s.W_out() + 4)] ==
        doctest::Approx(sum).epsilon(1e-15));
}

TEST_CASE("mismatches are named by their coordinates, NaN fails, the tolerance edge passes") {
  const ConvShape s{2, 3, 1, 6, 7, 3};  // y is [2][3][4][5]
  const std::size_t n = static_cast<std::size_t>(s.y_elements());
  std::vector<double> want(n);
  for (std::size_t i = 0; i < n; ++i) want[i] = 0.5 + 0.01 * static_cast<double>(i);
  std::vector<float> got(want.begin(), want.end());
  const double atol = 1e-4, rtol = 1e-4;

  SUBCASE("identical outputs pass") {
    const auto c = compare_elementwise(got, want, s, atol, rtol);
    CHECK(c.ok);
    CHECK(c.first.empty());
  }
  SUBCASE("one wrong element: its b, m, h, w") {
    const std::size_t idx = ((1 * 3 + 2) * 4 + 3) * 5 + 1;  // y[1][2][3][1]
    got[idx] += 0.25f;
    const auto c = compare_elementwise(got, want, s, atol, rtol);
    CHECK_FALSE(c.ok);
    CHECK(c.mismatches == 1);
    REQUIRE(c.first.size() == 1);
    CHECK(c.first[0].b == 1);
    CHECK(c.first[0].m == 2);
    CHECK(c.first[0].h == 3);
    CHECK(c.first[0].w == 1);
    REQUIRE(c.worst.has_value());
    CHECK(c.worst->error == doctest::Approx(0.25).epsilon(1e-6));
    CHECK(describe_mismatch(c.first[0]).find("y[1][2][3][1]") == 0);
  }
  SUBCASE("NaN is a mismatch and the worst error") {
    got[7] += 0.01f;
    got[9] = std::numeric_limits<float>::quiet_NaN();
    const auto c = compare_elementwise(got, want, s, atol, rtol);
    CHECK_FALSE(c.ok);
    CHECK(c.mismatches == 2);
    CHECK(c.non_finite == 1);
    REQUIRE(c.worst.has_value());
    CHECK(std::isinf(c.worst->error));
    CHECK(c.worst->w == 4);  // index 9 = y[0][0][1][4]
    CHECK(c.worst->h == 1);
    CHECK(describe_mismatch(*c.worst).find("nan") != std::string::npos);
  }
  SUBCASE("infinity is a mismatch") {
    got[3] = std::numeric_limits<float>::infinity();
    const auto c = compare_elementwise(got, want, s, atol, rtol);
    CHECK_FALSE(c.ok);
    CHECK(c.non_finite == 1);
  }
  SUBCASE("exactly on the tolerance passes, just beyond it fails") {
    // want = 0.5 + 0.01 i; pick element 0 (0.5) and a got that is exact in float.
    std::vector<double> w2(n, 0.5);
    std::vector<float> g2(n, 0.5f);
    const float up = 0.5f + 0.25f;  // error 0.25
    g2[0] = up;
    CHECK(compare_elementwise(g2, w2, s, 0.25 - 0.5 * 0.0, 0.0).ok);  // == atol
    CHECK(compare_elementwise(g2, w2, s, 0.125, 0.25).ok);            // 0.125 + 0.125
    CHECK_FALSE(compare_elementwise(g2, w2, s, 0.125, 0.2499).ok);    // just beyond
    CHECK_FALSE(compare_elementwise(g2, w2, s, 0.2499999, 0.0).ok);
  }
  SUBCASE("only the first ten mismatches are kept, in memory order") {
    for (float& v : got) v += 1.0f;
    const auto c = compare_elementwise(got, want, s, atol, rtol);
    CHECK(c.mismatches == static_cast<std::int64_t>(n));
    REQUIRE(c.first.size() == 10);
    CHECK(c.first[0].w == 0);
    CHECK(c.first[9].h == 1);
    CHECK(c.first[9].w == 4);
  }
  SUBCASE("a size that does not match the shape is an error") {
    got.pop_back();
    CHECK_THROWS_AS(compare_elementwise(got, want, s, atol, rtol), Error);
  }
}

namespace {

const PlannedCheck* find_check(const std::vector<PlannedCheck>& plan, const std::string& id) {
  for (const PlannedCheck& p : plan) {
    if (p.check.id == id) return &p;
  }
  return nullptr;
}

double total_points(const std::vector<PlannedCheck>& plan) {
  double t = 0;
  for (const PlannedCheck& p : plan) t += p.check.max_score;
  return t;
}

}  // namespace

TEST_CASE("m2's plan: every listed check, element-wise and the time, with their points") {
  const fs::path root = test::source_dir();
  const auto specs = load_milestone_specs(root, "m2");
  REQUIRE(specs.size() == 1);
  CHECK_FALSE(specs[0].gpu);
  CHECK(specs[0].ranked_variant == "cpu");
  const auto plan = plan_checks(specs, {}, root / "datasets" / "models");
  // 9 network checks, element-wise, time; no memcheck on the CPU.
  CHECK(plan.size() == 11);
  const PlannedCheck* high = find_check(plan, "network/cpu/ece408-high/10000");
  REQUIRE(high != nullptr);
  CHECK(high->check.max_score == 10);
  CHECK(high->check.expected_correct == 8562);
  CHECK(high->timed);
  CHECK_FALSE(high->gpu);
  const PlannedCheck* small = find_check(plan, "network/cpu/ece408-high/100");
  REQUIRE(small != nullptr);
  CHECK(small->check.max_score == 0);
  CHECK_FALSE(small->timed);
  REQUIRE(find_check(plan, "elementwise/cpu") != nullptr);
  CHECK(find_check(plan, "elementwise/cpu")->check.max_score == 5);
  REQUIRE(find_check(plan, "time/cpu/ece408-high/10000") != nullptr);
  CHECK(find_check(plan, "memcheck/cpu") == nullptr);
  CHECK(total_points(plan) == 10 + 10 + 5 + 5);
  std::set<std::string> ids;
  for (const PlannedCheck& p : plan) ids.insert(p.check.id);
  CHECK(ids.size() == plan.size());
}

TEST_CASE("final's plan: the ranked variant gets every check, the others two at their points") {
  const fs::path root = test::source_dir();
  const auto specs = load_milestone_specs(root, "final");
  REQUIRE(specs.size() == 1);
  const MilestoneSpec& s = specs[0];
  CHECK(s.gpu);
  // Every declared variant of final, the ranked one (checks.json) first.
  const std::vector<std::string> declared = variant_ids("final");
  CHECK(std::set<std::string>(s.variants.begin(), s.variants.end()) ==
        std::set<std::string>(declared.begin(), declared.end()));
  const std::string ranked = s.ranked_variant;
  CHECK(s.variants.front() == ranked);
  REQUIRE(s.memcheck.has_value());
  CHECK(s.memcheck->images == 100);
  const auto plan = plan_checks(specs, {}, root / "datasets" / "models");
  CHECK(find_check(plan, "network/" + ranked + "/two-conv/10000")->check.max_score == 5);
  CHECK(find_check(plan, "elementwise/" + ranked)->check.max_score == 5);
  CHECK(find_check(plan, "memcheck/" + ranked)->check.max_score == 2);
  double others = 0.0;
  for (const std::string& name : declared) {
    if (name == ranked) continue;
    CAPTURE(name);
    // A menu weight (variant_points) is shared by the two checks; the rest get 2 per check.
    const auto weight = s.variant_points.find(name);
    const double per_check = weight == s.variant_points.end() ? 2.0 : weight->second / 2;
    others += 2 * per_check;
    REQUIRE(find_check(plan, "network/" + name + "/ece408-high/10000") != nullptr);
    CHECK(find_check(plan, "network/" + name + "/ece408-high/10000")->check.max_score == per_check);
    CHECK_FALSE(find_check(plan, "network/" + name + "/ece408-high/10000")->timed);
    CHECK(find_check(plan, "elementwise/" + name)->check.max_score == per_check);
    CHECK(find_check(plan, "memcheck/" + name)->check.max_score == 0);
    CHECK(find_check(plan, "network/" + name + "/ece408-low/10000") == nullptr);
    CHECK(find_check(plan, "time/" + name + "/ece408-high/10000") == nullptr);
  }
  // The menu's weights as checks.json gives them (the later editions' points).
  CHECK_FALSE(s.variant_points.empty());
  for (const auto& [id, points] : s.variant_points) {
    CAPTURE(id);
    CHECK(std::find(declared.begin(), declared.end(), id) != declared.end());
    CHECK(points > 0);
  }
  // The ranked one: 10 + 10 + 5 (networks) + 5 (element-wise) + 2 (memcheck).
  CHECK(total_points(plan) == 32 + others);
}

TEST_CASE("all grades m2, m3 and final with unique ids") {
  const fs::path root = test::source_dir();
  const auto specs = load_milestone_specs(root, "all");
  REQUIRE(specs.size() == 3);
  const auto plan = plan_checks(specs, {}, root / "datasets" / "models");
  std::set<std::string> ids;
  for (const PlannedCheck& p : plan) ids.insert(p.check.id);
  CHECK(ids.size() == plan.size());
  CHECK(find_check(plan, "network/baseline/ece408-high/10000")->check.milestone == "m3");
  CHECK(find_check(plan, "memcheck/baseline")->check.max_score == 2);
  CHECK_THROWS_AS(load_milestone_specs(root, "m1"), Error);
  CHECK_THROWS_AS(load_milestone_specs(root, "m9"), Error);
}

TEST_CASE("hidden models: those with expected counts, numbered, largest N, only students' names") {
  const fs::path root = test::source_dir();
  test::TempDir dir;
  Model m = load_model(root / "datasets" / "models" / "two-conv.safetensors");
  m.expected_correct = {{100, 82}, {1000, 897}};
  save_model(dir.path() / "b-secret.safetensors", m);
  m.expected_correct.clear();
  m.min_margin.reset();
  save_model(dir.path() / "a-uncalibrated.safetensors", m);
  std::vector<std::string> skipped;
  const auto hidden = find_hidden_models({dir.path()}, 10000, &skipped);
  REQUIRE(hidden.size() == 1);
  CHECK(hidden[0].name == "b-secret");
  CHECK(hidden[0].number == 1);
  CHECK(hidden[0].images == 1000);
  CHECK(hidden[0].expected == 897);
  REQUIRE(skipped.size() == 1);
  CHECK(skipped[0].find("a-uncalibrated") != std::string::npos);
  // N above what the test set holds is not usable.
  CHECK(find_hidden_models({dir.path()}, 500)[0].images == 100);

  const auto specs = load_milestone_specs(root, "m2");
  const auto plan = plan_checks(specs, hidden, root / "datasets" / "models");
  const PlannedCheck* h = find_check(plan, "hidden/cpu/b-secret/1000");
  REQUIRE(h != nullptr);
  CHECK(h->check.hidden);
  CHECK(h->check.max_score == 5);
  CHECK(h->check.name.find("hidden model 1") != std::string::npos);
  CHECK(h->check.name.find("secret") == std::string::npos);
  CHECK(h->model_file == dir.path() / "b-secret.safetensors");
  CHECK_THROWS_AS(find_hidden_models({dir.path() / "missing"}, 10000), Error);
}

TEST_CASE("--only globs select by id; * crosses /") {
  CHECK(id_selected("network/cpu/ece408-high/100", {}));
  CHECK(id_selected("network/cpu/ece408-high/100", {"network/*/100"}));
  CHECK(id_selected("network/cpu/ece408-high/100", {"network/*"}));
  CHECK(id_selected("elementwise/cpu", {"network/*", "elementwise/*"}));
  CHECK_FALSE(id_selected("network/cpu/ece408-high/1000", {"network/*/100"}));
  CHECK_FALSE(id_selected("time/cpu/ece408-high/10000", {"network/*"}));
}

namespace {

GradeResult sample_result() {
  GradeResult r;
  r.team = "team-a";
  r.milestone = "final";
  r.seed = 1234;
  r.ranked_variant = variant_ids("final").back();
  r.ranked_model = "ece408-high";
  r.ranked_images = 10000;
  r.op_time_s = 0.002;
  r.reference_time_s = 0.003;
  r.speedup = 1.5;
  r.sandbox_json = R"({"features":{"pid_namespace":true}})";
  CheckResult a;
  a.id = "network/best/ece408-high/10000";
  a.name = "best: ece408-high, 10000 images";
  a.kind = "network";
  a.status = CheckStatus::passed;
  a.score = 10;
  a.max_score = 10;
  a.output = "8562 of 10000";
  a.correct = 8562;
  a.expected_correct = 8562;
  CheckResult b;
  b.id = "hidden/best/secret/1000";
  b.name = "best: hidden model 1, 1000 images";
  b.kind = "network";
  b.hidden = true;
  b.status = CheckStatus::failed;
  b.reason = "wrong_count";
  b.max_score = 5;
  b.worst_error = std::numeric_limits<double>::infinity();
  CheckResult c;
  c.id = "memcheck/best";
  c.name = "best: memcheck";
  c.kind = "memcheck";
  c.status = CheckStatus::skipped;
  c.reason = "skipped";
  c.max_score = 2;
  c.output = "compute-sanitizer is not installed";
  r.checks = {a, b, c};
  r.score = 10;
  r.max_score = 17;
  return r;
}

}  // namespace

TEST_CASE("results.json is Gradescope's format and its scores add up") {
  const GradeResult r = sample_result();
  const json doc = json::parse(gradescope_json(r));
  CHECK(doc.at("score").get<double>() == 10);
  CHECK(doc.at("execution_time").is_number());
  CHECK(doc.at("output").get<std::string>().find("10 of 17") != std::string::npos);
  const json& tests = doc.at("tests");
  REQUIRE(tests.size() == 3);
  double sum = 0;
  for (const json& t : tests) {
    for (const char* field : {"name", "score", "max_score", "status", "output", "visibility"}) {
      CAPTURE(field);
      CHECK(t.contains(field));
    }
    const std::string status = t.at("status").get<std::string>();
    CHECK((status == "passed" || status == "failed"));
    sum += t.at("score").get<double>();
  }
  CHECK(sum == doc.at("score").get<double>());
  CHECK(tests[0].at("visibility") == "visible");
  CHECK(tests[1].at("visibility") == "after_published");
  CHECK(tests[1].at("name").get<std::string>().find("secret") == std::string::npos);
  CHECK(tests[2].at("status") == "failed");  // skipped is never a pass
  const json& board = doc.at("leaderboard");
  REQUIRE(board.size() == 2);
  CHECK(board[0].at("name") == "Op Time (ms)");
  CHECK(board[0].at("value").get<double>() == doctest::Approx(2.0));
  CHECK(board[0].at("order") == "asc");
  CHECK(board[1].at("name") == "Speedup vs cuDNN");
  CHECK(board[1].at("value").get<double>() == doctest::Approx(1.5));

  GradeResult untimed = r;
  untimed.op_time_s.reset();
  CHECK_FALSE(json::parse(gradescope_json(untimed)).contains("leaderboard"));
}

TEST_CASE("report.json carries every field, non-finite numbers as null") {
  const json doc = json::parse(report_json(sample_result()));
  CHECK(doc.at("schema") == "convlab-grade-report/1");
  for (const char* field : {"grader_version",   "framework_hash", "team",
                            "milestone",        "submission",     "started_at",
                            "duration_s",       "seed",           "score",
                            "max_score",        "op_time_s",      "op_time_median_s",
                            "reference_time_s", "speedup",        "ranked_variant",
                            "ranked_model",     "ranked_images",  "flags",
                            "partial",          "only",           "grader_error",
                            "machine",          "sandbox",        "checks"}) {
    CAPTURE(field);
    CHECK(doc.contains(field));
  }
  CHECK(doc.at("sandbox").at("features").at("pid_namespace") == true);
  CHECK(doc.at("op_time_median_s").is_null());
  const json& c = doc.at("checks");
  REQUIRE(c.size() == 3);
  CHECK(c[0].at("correct") == 8562);
  CHECK(c[1].at("worst_error").is_null());
  CHECK(c[1].at("hidden") == true);
  CHECK(c[2].at("status") == "skipped");
  const std::string table = summary_table(sample_result());
  CHECK(table.find("hidden/best/secret/1000") != std::string::npos);
  CHECK(table.find("Total: 10 / 17") != std::string::npos);
}

TEST_CASE("reports and the summary show control characters escaped, in every field") {
  GradeResult r = sample_result();
  r.submission = "/subs/team\x1b[2J\nevil\x07";
  r.flags = {"best is \x1b]0;owned\x07" "fast"};
  r.checks[0].output = "line one\nline \x1b[31mtwo\x9b";
  for (const std::string& text : {report_json(r), gradescope_json(r), summary_table(r)}) {
    CAPTURE(text);
    for (const char c : {'\x1b', '\x07'}) CHECK(text.find(c) == std::string::npos);
  }
  const json doc = json::parse(report_json(r));
  CHECK(doc.at("submission") == "/subs/team\\x1b[2J\\x0aevil\\x07");
  CHECK(doc.at("checks")[0].at("output") == "line one\nline \\x1b[31mtwo\\x9b");
  CHECK(summary_table(r).find("best is \\x1b]0;owned\\x07fast") != std::string::npos);
}

TEST_CASE("the referee's check of repeated calls: a kept output fails on long sums too") {
  // 6400 terms: the rounding allowance of both float32 sums is about 0.15 here, more than a
  // 1/256 move of the inputs changes an output, so repeat_noise() moves them further.
  const ConvShape s{2, 3, 256, 9, 9, 5};
  CHECK(repeat_noise(ConvShape{1, 50, 1, 28, 28, 5}) == kRepeatNoiseMin);
  CHECK(repeat_noise(ConvShape{1, 16, 4, 40, 40, 7}) == kRepeatNoiseMin);
  const double eps = repeat_noise(s);
  CHECK(eps > 10 * kRepeatNoiseMin);
  CHECK(eps <= 0.5);
  CHECK(repeat_noise(ConvShape{1, 1, 4096, 20, 20, 13}) == 0.5);

  const auto x = elementwise_values(3, 0, ElementwiseTensor::x, s.x_elements());
  const auto k = elementwise_values(3, 0, ElementwiseTensor::k, s.k_elements());
  const auto u = elementwise_values(3, 1, ElementwiseTensor::x, s.x_elements());
  std::vector<float> kept(static_cast<std::size_t>(s.y_elements()));
  conv_forward_reference(kept.data(), x.data(), k.data(), s);
  // The share of outputs a result `got` of the moved inputs fails, for a move of `e`.
  const auto failing = [&](double e, bool correct) {
    std::vector<float> moved(x.size()), abs_x(x.size()), abs_k(k.size());
    for (std::size_t j = 0; j < x.size(); ++j) {
      moved[j] = static_cast<float>(x[j] * (1.0 + e * u[j]));
      abs_x[j] = std::fabs(moved[j]);
    }
    for (std::size_t j = 0; j < k.size(); ++j) abs_k[j] = std::fabs(k[j]);
    std::vector<float> want(kept.size());
    conv_forward_reference(want.data(), moved.data(), k.data(), s);
    const std::vector<double> exact = conv_reference_double(s, moved, k);
    const std::vector<double> sums = conv_reference_double(s, abs_x, abs_k);
    std::int64_t bad = 0;
    for (std::size_t i = 0; i < want.size(); ++i) {
      const double got = correct ? static_cast<double>(static_cast<float>(exact[i])) : kept[i];
      const double allowed = kVerifyAtol + kVerifyRtol * std::fabs(want[i]) +
                             rounding_allowance(Precision::fp32, s, sums[i], 1.0, 1.0);
      bad += !(std::fabs(got - want[i]) <= allowed);
    }
    return static_cast<double>(bad) / static_cast<double>(want.size());
  };
  CHECK(failing(eps, false) > 0.9);              // the kept output is caught
  CHECK(failing(eps, true) == 0.0);              // a correct one passes
  CHECK(failing(kRepeatNoiseMin, false) < 0.5);  // a 1/256 move alone would let most through
}

TEST_CASE("an incomplete grade says what it did not check, in the table and the reports") {
  GradeResult r = sample_result();
  r.partial = true;
  r.incomplete = true;
  r.points_not_checked = 5;
  r.not_run = {"1 check, 5 points (no_gpu): No usable GPU for this check: no CUDA device"};
  const std::string table = summary_table(r);
  CAPTURE(table);
  CHECK(table.find("Total: 10 / 12 points checked here; incomplete: 5 of 17 points not checked "
                   "here") != std::string::npos);
  CHECK(table.find("-/2") != std::string::npos);  // no score of 0 for a check not run
  GradeResult none = r;
  none.score = 0;
  none.points_not_checked = none.max_score;
  CHECK(summary_table(none).find("Total: no points checked here; incomplete: 17 of 17 points") !=
        std::string::npos);
  CHECK(table.find("Not run here:\n  1 check, 5 points (no_gpu)") != std::string::npos);
  CHECK(table.find("not run") != std::string::npos);  // the skipped check's status column
  CHECK(table.find("(partial: --only)") == std::string::npos);
  const json doc = json::parse(report_json(r));
  CHECK(doc.at("partial") == true);
  CHECK(doc.at("incomplete") == true);
  CHECK(doc.at("points_not_checked").get<double>() == 5);
  REQUIRE(doc.at("not_run").size() == 1);
  const json results = json::parse(gradescope_json(r));
  CHECK(results.at("output").get<std::string>().find("Not run: 1 check, 5 points") !=
        std::string::npos);

  // A complete grade says none of it.
  const std::string complete = summary_table(sample_result());
  CHECK(complete.find("incomplete") == std::string::npos);
  CHECK(complete.find("Not run here") == std::string::npos);
}

TEST_CASE("a grade of one's own checkout writes its reports under the checkout's build/") {
  test::TempDir dir;
  const fs::path kit = dir.path() / "kit";
  fs::create_directories(kit / "student");
  // From inside the checkout (convlab grade .) and from a folder of it.
  CHECK(default_out_dir(kit, "kit", "m2", kit) == kit / "build" / "grade-m2");
  CHECK(default_out_dir(kit, "kit", "final", kit / "student") == kit / "build" / "grade-final");
  // From elsewhere: ./grade-TEAM, as before.
  CHECK(default_out_dir(kit, "kit", "m2", dir.path()) == dir.path() / "grade-kit");
  // A sibling whose name starts with the checkout's is not inside it.
  fs::create_directories(dir.path() / "kit2");
  CHECK(default_out_dir(kit, "kit", "m3", dir.path() / "kit2") ==
        dir.path() / "kit2" / "grade-kit");
}

}  // namespace test_grade_units
