// The precision classes' rules (reference/conv/precision.hpp, reference/network/exact.hpp):
// the rounding, the element-wise bound against a float64 oracle, and the network rule on every
// shipped model with each class emulated on the CPU.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>
#include <span>
#include <vector>

#include "reference/conv/elementwise.hpp"
#include "reference/conv/library_conv.hpp"
#include "reference/conv/precision.hpp"
#include "reference/core/error.hpp"
#include "reference/data/fashion_mnist.hpp"
#include "reference/network/exact.hpp"
#include "reference/network/network.hpp"
#include "tests/support/test_support.hpp"

namespace test_precision_rule {

using namespace convlab;
namespace fs = std::filesystem;

TEST_CASE("rounding to tf32 and fp16: nearest, ties to even, fp16's range") {
  CHECK(round_to_precision(Precision::fp32, 1.0f + 0x1p-23f) == 1.0f + 0x1p-23f);
  CHECK(round_to_precision(Precision::tf32, 1.0f + 0x1p-11f) == 1.0f);  // tie: to even
  CHECK(round_to_precision(Precision::tf32, 1.0f + 3 * 0x1p-11f) == 1.0f + 0x1p-9f);  // tie: up
  CHECK(round_to_precision(Precision::tf32, 1.0f + 0x1p-11f + 0x1p-20f) == 1.0f + 0x1p-10f);
  CHECK(round_to_precision(Precision::tf32, 1e30f) == doctest::Approx(1e30f).epsilon(1e-3));
  CHECK(std::isinf(round_to_precision(Precision::fp16, 70000.0f)));
  CHECK(round_to_precision(Precision::fp16, 65504.0f) == 65504.0f);
  CHECK(round_to_precision(Precision::fp16, 0x1p-20f) == 0x1p-20f);  // subnormal, exact
  CHECK(round_to_precision(Precision::fp16, 0x1p-26f) == 0.0f);      // under half the spacing
  CHECK(round_to_precision(Precision::fp16, -0.1f) == round_to_precision(Precision::tf32, -0.1f));
  CHECK(parse_precision("tf32") == Precision::tf32);
  CHECK_THROWS_AS(parse_precision("bf16"), Error);
}

TEST_CASE("an emulated tf32 or fp16 convolution stays within the element-wise bound") {
  const ConvShape shapes[] = {{2, 7, 3, 19, 23, 5}, {1, 4, 16, 12, 12, 3}, {3, 5, 1, 9, 11, 7}};
  for (Precision p : {Precision::fp32, Precision::tf32, Precision::fp16}) {
    for (std::size_t i = 0; i < std::size(shapes); ++i) {
      const ConvShape& s = shapes[i];
      CAPTURE(precision_name(p));
      CAPTURE(i);
      const std::vector<float> x = elementwise_values(7, i, ElementwiseTensor::x, s.x_elements());
      const std::vector<float> k = elementwise_values(7, i, ElementwiseTensor::k, s.k_elements());
      std::vector<float> y(static_cast<std::size_t>(s.y_elements()));
      conv_forward_rounded(p, y.data(), x.data(), k.data(), s);
      const std::vector<double> want = conv_reference_double(s, x, k);
      // The sum of |x||k| of each output: the reference of |x| and |k|.
      std::vector<float> ax(x.size()), ak(k.size());
      std::transform(x.begin(), x.end(), ax.begin(), [](float v) { return std::fabs(v); });
      std::transform(k.begin(), k.end(), ak.begin(), [](float v) { return std::fabs(v); });
      const std::vector<double> abs_sum = conv_reference_double(s, ax, ak);
      const std::int64_t n = std::int64_t{s.C} * s.K * s.K;
      double worst = 0.0, loosest = 0.0;
      for (std::size_t j = 0; j < y.size(); ++j) {
        const double bound = elementwise_bound(p, n, abs_sum[j], 1.0, 1.0);
        worst = std::max(worst, std::fabs(y[j] - want[j]) / bound);
        loosest = std::max(loosest, bound);
      }
      CHECK(worst <= 1.0);
      // And the bound is not vacuous: a tf32/fp16 error is a sizeable share of it.
      if (p != Precision::fp32) CHECK(worst > 0.01);
      CHECK(loosest < 0.05);
    }
  }
}

namespace {

// Images per model: enough for the rule to meet small margins, few enough for a quick suite.
constexpr std::int64_t kImages = 2000;

}  // namespace

TEST_CASE("the network rule holds for every class emulated on every shipped model") {
  const data::Dataset& ds = test::real_test_set();
  for (const fs::path& f : test::shipped_models()) {
    const Model model = load_model(f);
    const Tensor input = ds.images(kImages, model.input_scale);
    const Precision classes[] = {Precision::fp32, Precision::tf32, Precision::fp16};
    // One float64 pass for the three classes gives the same doubles as one pass per class.
    const Tensor few = ds.images(50, model.input_scale);
    const std::vector<ExactRun> together = run_network_exact(model, few, classes);
    REQUIRE(together.size() == 3);
    for (std::size_t c = 0; c < 3; ++c) {
      const ExactRun alone = run_network_exact(model, few, classes[c]);
      CHECK(alone.logits == together[c].logits);
      CHECK(alone.margins == together[c].margins);
      CHECK(alone.sigma == together[c].sigma);
    }
    const std::vector<ExactRun> exacts = run_network_exact(model, input, classes);
    for (std::size_t c = 0; c < 3; ++c) {
      const Precision p = classes[c];
      CAPTURE(model.name);
      CAPTURE(precision_name(p));
      const ExactRun& exact = exacts[c];
      REQUIRE(exact.images == kImages);
      const NetworkRun run = run_network_cpu(
          model, input, [p](float* y, const float* x, const float* k, const ConvShape& s) {
            conv_forward_rounded(p, y, x, k, s);
          });
      const std::vector<int> got = predictions(run.output);
      const PrecisionVerdict v =
          judge_predictions(p, got, exact.predictions, exact.margins, exact.sigma);
      MESSAGE(model.name << " " << precision_name(p) << ": " << describe_verdict(v)
                         << "; largest sigma "
                         << *std::max_element(exact.sigma.begin(), exact.sigma.end()));
      CHECK(v.ok());
      // The rule decides on almost every image: the bound is no excuse.
      CHECK(v.under_bound * 50 < v.images);
      // The float64 predictions are the network's: they score what the model records.
      if (auto it = model.expected_correct.find(kImages); it != model.expected_correct.end()) {
        CHECK(count_correct(exact.predictions, ds.labels) == it->second);
      }
    }
  }
}

TEST_CASE("the float64 pass takes one to three classes") {
  const Model model = load_model(test::source_dir() / "datasets/models/two-conv.safetensors");
  const Tensor input = test::real_test_set().images(2, model.input_scale);
  CHECK_THROWS_AS(run_network_exact(model, input, std::span<const Precision>{}), Error);
  const Precision four[] = {Precision::fp32, Precision::tf32, Precision::fp16, Precision::fp32};
  CHECK_THROWS_AS(run_network_exact(model, input, four), Error);
}

TEST_CASE("a prediction that moves above the bound is named by its index") {
  const data::Dataset& ds = test::real_test_set();
  const Model model = load_model(test::source_dir() / "datasets/models/ece408-high.safetensors");
  const ExactRun exact =
      run_network_exact(model, ds.images(200, model.input_scale), Precision::tf32);
  std::vector<int> got = exact.predictions;
  std::int64_t flipped = -1;
  for (std::size_t i = 0; i < got.size() && flipped < 0; ++i) {
    if (exact.margins[i] >= 2 * kMarginSigmas * exact.sigma[i])
      flipped = static_cast<std::int64_t>(i);
  }
  REQUIRE(flipped >= 0);
  got[static_cast<std::size_t>(flipped)] = (got[static_cast<std::size_t>(flipped)] + 1) % 10;
  const PrecisionVerdict v =
      judge_predictions(Precision::tf32, got, exact.predictions, exact.margins, exact.sigma);
  CHECK_FALSE(v.ok());
  REQUIRE(v.wrong.size() == 1);
  CHECK(v.wrong[0] == flipped);
  CHECK(describe_verdict(v).find("image " + std::to_string(flipped)) != std::string::npos);
  CHECK_THROWS_AS(judge_predictions(Precision::tf32, std::span(got).first(3), exact.predictions,
                                    exact.margins, exact.sigma),
                  Error);
}

TEST_CASE("convlab check's class allowance: a tf32 result passes, a wrong output is named") {
  const ConvShape s{2, 6, 3, 13, 17, 4};
  const std::vector<float> x = elementwise_values(11, 0, ElementwiseTensor::x, s.x_elements());
  const std::vector<float> k = elementwise_values(11, 0, ElementwiseTensor::k, s.k_elements());
  const std::vector<double> want = conv_reference_double(s, x, k);
  const std::vector<double> allowed = precision_allowance(Precision::tf32, s, x, k);
  std::vector<float> y(static_cast<std::size_t>(s.y_elements()));
  conv_forward_rounded(Precision::tf32, y.data(), x.data(), k.data(), s);
  CHECK(compare_elementwise_within(y, want, allowed, conv_output_dims(s)).ok);
  // The same result fails the fp32 rule: the class's allowance is what lets it pass.
  const std::vector<double> fp32 =
      elementwise_allowance(Precision::fp32, s, x, k, want, 1e-4, 1e-4);
  CHECK_FALSE(compare_elementwise_within(y, want, fp32, conv_output_dims(s)).ok);
  y[37] += static_cast<float>(4 * allowed[37]);
  const ElementwiseComparison c = compare_elementwise_within(y, want, allowed, conv_output_dims(s));
  CHECK_FALSE(c.ok);
  CHECK(c.mismatches == 1);
  REQUIRE(c.worst);
  CHECK(c.worst->w == 37 % s.W_out());
}

TEST_CASE("the float32 accumulation bound: worst case on short sums, sqrt(n) on long ones") {
  const double u = 0x1p-24;
  CHECK(accumulation_bound(25) == doctest::Approx(25 * u / (1 - 25 * u)));
  CHECK(accumulation_bound(100) == doctest::Approx(100 * u / (1 - 100 * u)));
  CHECK(accumulation_bound(10000) == doctest::Approx(1000 * u).epsilon(1e-3));
  CHECK(accumulation_bound(10000) < 10000 * u);
  CHECK(elementwise_bound(Precision::fp32, 10000, 2.0, 1.0, 1.0) ==
        doctest::Approx(2 * accumulation_bound(10000)));
}

TEST_CASE("a long float32 sum passes the element-wise rule; a wrong one still fails") {
  // C*K*K = 25088 terms, summed in float32 by the library convolution in the plain order
  // (acc += x * k over c, p, q): its own rounding reaches 1e-3 where a fixed
  // 1e-4 + 1e-4 |want| would fail a correct kernel on outputs near zero.
  const ConvShape s{1, 8, 512, 22, 22, 7};
  const std::vector<float> x = elementwise_values(5, 0, ElementwiseTensor::x, s.x_elements());
  const std::vector<float> k = elementwise_values(5, 0, ElementwiseTensor::k, s.k_elements());
  const std::vector<double> want = conv_reference_double(s, x, k);
  std::vector<float> y(static_cast<std::size_t>(s.y_elements()));
  conv_forward_reference(y.data(), x.data(), k.data(), s);
  const OutputDims dims = conv_output_dims(s);
  CHECK_FALSE(compare_elementwise(y, want, dims, 1e-4, 1e-4).ok);
  const std::vector<double> allowed =
      elementwise_allowance(Precision::fp32, s, x, k, want, 1e-4, 1e-4);
  const ElementwiseComparison ok = compare_elementwise_within(y, want, allowed, dims);
  CHECK(ok.ok);
  // The allowance is no blanket: a filter read transposed (k[q][p]) fails almost everywhere.
  std::vector<float> kt(k.size());
  for (std::size_t f = 0; f < k.size(); f += 49)
    for (int p = 0; p < 7; ++p)
      for (int q = 0; q < 7; ++q) kt[f + p * 7 + q] = k[f + q * 7 + p];
  std::vector<float> wrong(y.size());
  conv_forward_reference(wrong.data(), x.data(), kt.data(), s);
  const ElementwiseComparison bad = compare_elementwise_within(wrong, want, allowed, dims);
  CHECK(bad.mismatches * 10 > 9 * bad.elements);
  // Nor does it hide an output never written.
  y[100] = std::numeric_limits<float>::quiet_NaN();
  CHECK(compare_elementwise_within(y, want, allowed, dims).mismatches == 1);
}

TEST_CASE("a pooled output's allowance is the largest of its window's") {
  const ConvShape s{1, 1, 1, 4, 5, 1};  // y is 4x5, pooled 2x2 stride 2 to 2x2
  std::vector<double> allowed(20);
  for (std::size_t i = 0; i < allowed.size(); ++i) allowed[i] = static_cast<double>(i);
  const std::vector<double> pooled = pooled_allowance(allowed, s, PoolShape{2, 2});
  REQUIRE(pooled.size() == 4);
  CHECK(pooled[0] == 6.0);
  CHECK(pooled[1] == 8.0);
  CHECK(pooled[2] == 16.0);
  CHECK(pooled[3] == 18.0);
  CHECK_THROWS_AS(pooled_allowance(std::vector<double>(19), s, PoolShape{2, 2}), Error);
}

TEST_CASE("the bound's max|x| and |x| come from the magnitudes, negative values included") {
  const std::vector<float> x{0.5f, -3.0f, 2.0f, -0.0f};
  CHECK(max_magnitude(x) == 3.0f);
  CHECK(max_magnitude(std::span<const float>{}) == 0.0f);
  std::vector<float> a = x;
  CHECK(to_magnitudes(a) == 3.0f);
  CHECK(a == std::vector<float>{0.5f, 3.0f, 2.0f, 0.0f});
}

}  // namespace test_precision_rule
