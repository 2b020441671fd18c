// CPU layers and the network runner against hand-computed values.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "reference/conv/elementwise.hpp"
#include "reference/conv/library_conv.hpp"
#include "reference/core/error.hpp"
#include "reference/layers/cpu_layers.hpp"
#include "reference/network/network.hpp"
#include "tests/support/test_support.hpp"

namespace test_cpu_layers {

using namespace convlab;

TEST_CASE("tanh matches std::tanh to 3e-7 over [-12, 12] and keeps NaN") {
  std::vector<float> v;
  for (int i = -120000; i <= 120000; ++i) v.push_back(static_cast<float>(i) * 1e-4f);
  v.push_back(0.0f);
  v.push_back(-0.0f);
  v.push_back(1e-8f);
  v.push_back(std::numeric_limits<float>::infinity());
  std::vector<float> t = v;
  cpu::tanh_inplace(t);
  double worst = 0.0;
  for (std::size_t i = 0; i < v.size(); ++i) {
    worst = std::max(worst,
                     std::fabs(static_cast<double>(t[i]) - std::tanh(static_cast<double>(v[i]))));
  }
  CHECK(worst < 3e-7);
  CHECK(t[v.size() - 1] == 1.0f);
  CHECK(std::signbit(t[v.size() - 3]));  // tanh(-0) is -0
  std::vector<float> nan{std::numeric_limits<float>::quiet_NaN()};
  cpu::tanh_inplace(nan);
  CHECK(std::isnan(nan[0]));
  std::vector<float> known{0.5f, -1.0f, 2.0f};
  cpu::tanh_inplace(known);
  CHECK(known[0] == doctest::Approx(0.46211716).epsilon(1e-6));
  CHECK(known[1] == doctest::Approx(-0.76159416).epsilon(1e-6));
  CHECK(known[2] == doctest::Approx(0.96402758).epsilon(1e-6));
}

TEST_CASE("relu clamps negatives to zero") {
  std::vector<float> v{-1.5f, 0.0f, 2.5f, -0.0f};
  cpu::relu_inplace(v);
  CHECK(v == std::vector<float>{0.0f, 0.0f, 2.5f, 0.0f});
}

TEST_CASE("maxpool 2x2 stride 2 on a 4x4 ramp and a 5x5 (floor) input") {
  std::vector<float> x(16);
  for (int i = 0; i < 16; ++i) x[i] = static_cast<float>(i);
  std::vector<float> y(4);
  cpu::maxpool(x.data(), y.data(), 1, 1, 4, 4, 2, 2);
  CHECK(y == std::vector<float>{5, 7, 13, 15});

  std::vector<float> x5(2 * 25);
  for (int i = 0; i < 50; ++i) x5[i] = static_cast<float>((i * 7) % 11);
  std::vector<float> y5(2 * 4);
  cpu::maxpool(x5.data(), y5.data(), 2, 1, 5, 5, 2, 2);
  // Second image, window rows 0-1 cols 0-1: values at 25,26,30,31 -> (i*7)%11.
  const float expect = std::max({25 * 7 % 11, 26 * 7 % 11, 30 * 7 % 11, 31 * 7 % 11}) * 1.0f;
  CHECK(y5[4] == expect);
  // 3x3 window stride 1.
  std::vector<float> y3(4);
  cpu::maxpool(x.data(), y3.data(), 1, 1, 4, 4, 3, 1);
  CHECK(y3 == std::vector<float>{10, 11, 14, 15});
}

TEST_CASE("fully connected: hand example and a large random case") {
  const std::vector<float> x{1, 2, 3};
  const std::vector<float> w{1, 0, -1, 0.5f, 0.5f, 0.5f};
  const std::vector<float> b{0.1f, -0.2f};
  std::vector<float> y(2);
  cpu::fully_connected(x.data(), w.data(), b.data(), y.data(), 1, 3, 2);
  CHECK(y[0] == doctest::Approx(-1.9));
  CHECK(y[1] == doctest::Approx(2.8));

  // Odd batch, `in` not a multiple of 8, `out` not a multiple of 4: every code path.
  const int batch = 7, in = 1029, out = 10;
  const auto xs = test::random_values(batch * in, 1);
  const auto ws = test::random_values(out * in, 2);
  const auto bs = test::random_values(out, 3);
  std::vector<float> ys(batch * out);
  cpu::fully_connected(xs.data(), ws.data(), bs.data(), ys.data(), batch, in, out);
  for (int n = 0; n < batch; ++n) {
    for (int o = 0; o < out; ++o) {
      double ref = bs[o];
      for (int i = 0; i < in; ++i) ref += static_cast<double>(xs[n * in + i]) * ws[o * in + i];
      CHECK(ys[n * out + o] == doctest::Approx(ref).epsilon(1e-4));
    }
  }
}

TEST_CASE("softmax rows sum to one and match the formula") {
  std::vector<float> v{1, 2, 3, 1000, 1000, 1000};
  cpu::softmax_rows(v.data(), 2, 3);
  const double z = std::exp(1.0) + std::exp(2.0) + std::exp(3.0);
  CHECK(v[0] == doctest::Approx(std::exp(1.0) / z));
  CHECK(v[2] == doctest::Approx(std::exp(3.0) / z));
  CHECK(v[3] == doctest::Approx(1.0 / 3));  // no overflow thanks to the max shift
}

TEST_CASE("reference convolution: hand example") {
  // y[h][w] = x[h][w] - x[h+1][w+1] on a 3x3 ramp: every output is -4.
  const std::vector<float> x{1, 2, 3, 4, 5, 6, 7, 8, 9};
  const std::vector<float> k{1, 0, 0, -1};
  std::vector<float> y(4, 123.0f);
  conv_forward_reference(y.data(), x.data(), k.data(), {1, 1, 1, 3, 3, 2});
  CHECK(y == std::vector<float>{-4, -4, -4, -4});

  // Two channels, two filters: filter 0 sums channel 0's window, filter 1 takes channel 1's
  // top-left value.
  std::vector<float> x2(2 * 9);
  for (int i = 0; i < 18; ++i) x2[i] = static_cast<float>(i);
  const std::vector<float> k2{1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0};
  std::vector<float> y2(2 * 4);
  conv_forward_reference(y2.data(), x2.data(), k2.data(), {1, 2, 2, 3, 3, 2});
  CHECK(y2 == std::vector<float>{8, 12, 20, 24, 9, 10, 12, 13});
}

TEST_CASE("reference convolution agrees with the double-precision reference on awkward shapes") {
  // Two independent codes (the double one sums in another order); the hand example above
  // anchors both.
  const ConvShape shapes[] = {{2, 5, 3, 13, 19, 3},
                              {1, 7, 1, 28, 28, 5},
                              {3, 4, 2, 9, 31, 7},
                              {1, 1, 1, 1, 1, 1},
                              {2, 9, 4, 8, 8, 8}};
  for (const ConvShape& s : shapes) {
    CAPTURE(s.to_string());
    const auto x = test::random_values(s.x_elements(), 11);
    const auto k = test::random_values(s.k_elements(), 12);
    std::vector<float> y(static_cast<std::size_t>(s.y_elements()),
                         std::numeric_limits<float>::quiet_NaN());
    conv_forward_reference(y.data(), x.data(), k.data(), s);
    const std::vector<double> exact = conv_reference_double(s, x, k);
    const std::vector<float> ref(exact.begin(), exact.end());
    const auto cmp = test::compare_conv_output(y, ref, s);
    CHECK_MESSAGE(cmp.ok, cmp.report);
  }
}

TEST_CASE("network runner: a hand-checkable model and its Op Time bookkeeping") {
  // input 1x2x2 -> conv (1 filter, K=1, weight 2) -> relu -> flatten -> fc 2x4 -> softmax
  Model model;
  model.name = "tiny";
  model.input = {1, 2, 2};
  Layer conv;
  conv.kind = LayerKind::conv;
  conv.weight = Tensor({1, 1, 1, 1}, {2.0f});
  Layer relu;
  relu.kind = LayerKind::relu;
  Layer flat;
  flat.kind = LayerKind::flatten;
  Layer fc;
  fc.kind = LayerKind::fc;
  fc.weight = Tensor({2, 4}, {1, 1, 1, 1, 0, 0, 0, 1});
  fc.bias = Tensor({2}, {0.0f, 1.0f});
  Layer soft;
  soft.kind = LayerKind::softmax;
  model.layers = {conv, relu, flat, fc, soft};

  const Tensor input({2, 1, 2, 2}, {1, -1, 2, 0.5f, -3, -3, -3, 4});
  int calls = 0;
  const NetworkRun run = run_network_cpu(
      model, input, [&](float* y, const float* x, const float* k, const ConvShape& s) {
        ++calls;
        CHECK(s == ConvShape{2, 1, 1, 2, 2, 1});
        conv_forward_reference(y, x, k, s);
      });
  CHECK(calls == 1);
  REQUIRE(run.conv_layers.size() == 1);
  CHECK(run.conv_layers[0].layer == 0);
  CHECK(run.op_time() == run.conv_layers[0].seconds);
  // Image 0: conv -> [2,-2,4,1], relu -> [2,0,4,1]; fc -> [7, 2]. Image 1: [0,0,0,8] -> [8, 9].
  const double p0 = 1.0 / (1.0 + std::exp(2.0 - 7.0));
  CHECK(run.output.shape() == Shape{2, 2});
  CHECK(run.output.data()[0] == doctest::Approx(p0));
  CHECK(predictions(run.output) == std::vector<int>{0, 1});
  const std::vector<std::uint8_t> labels{0, 0};
  CHECK(count_correct(predictions(run.output), labels) == 1);

  CHECK_THROWS_AS(run_network_cpu(model, Tensor({1, 1, 3, 3}), conv_forward_reference), Error);

  // A timed pass through the last conv layer only: the same conv calls, nothing after them.
  TimingOptions through_conv;
  through_conv.through_last_conv = true;
  CHECK(layers_to_run(model, through_conv) == 1);
  CHECK(layers_to_run(model, TimingOptions()) == model.layers.size());
  calls = 0;
  const NetworkRun timed = run_network_cpu(
      model, input,
      [&](float* y, const float* x, const float* k, const ConvShape& s) {
        ++calls;
        conv_forward_reference(y, x, k, s);
      },
      through_conv);
  CHECK(calls == 1);
  REQUIRE(timed.conv_layers.size() == 1);
  CHECK(timed.conv_layers[0].shape.B == 2);
  CHECK(timed.output.size() == 0);
}

}  // namespace test_cpu_layers
