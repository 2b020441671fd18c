// Tests of the staff trainer and calibrator: layer gradients, learning, determinism, margin
// repair and the target search, all on tiny networks and generated data.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "datasets/synthetic.hpp"
#include "reference/core/parallel.hpp"
#include "reference/model/model.hpp"
#include "tests/support/test_support.hpp"
#include "tools/calibrate/calibrate.hpp"
#include "tools/train/net.hpp"
#include "tools/train/rng.hpp"
#include "tools/train/sha256.hpp"
#include "tools/train/trainer.hpp"

namespace test_trainer {

namespace {

using convlab::Layer;
using convlab::LayerKind;
using convlab::Model;
using convlab::Shape;
using convlab::Tensor;
namespace tools = convlab::tools;

// cpu_threads() reads CONVLAB_THREADS once; asking for 2 before any use makes the parallel
// runs below really split the work, even on a one-core machine (unless the caller chose).
const bool kThreadsSet = [] {
  setenv("CONVLAB_THREADS", "2", 0);
  return true;
}();

Layer conv(const std::string& name, Shape shape) {
  Layer l;
  l.kind = LayerKind::conv;
  l.weight_name = name;
  l.weight = Tensor(std::move(shape));
  return l;
}

Layer fc(const std::string& name, std::int64_t out, std::int64_t in, bool bias) {
  Layer l;
  l.kind = LayerKind::fc;
  l.weight_name = name + ".weight";
  l.weight = Tensor(Shape{out, in});
  if (bias) {
    l.bias_name = name + ".bias";
    l.bias = Tensor(Shape{out});
  }
  return l;
}

Layer simple(LayerKind kind) {
  Layer l;
  l.kind = kind;
  return l;
}

Layer pool(int size, int stride) {
  Layer l = simple(LayerKind::maxpool);
  l.pool_size = size;
  l.pool_stride = stride;
  return l;
}

Model tiny(Shape input, std::vector<Layer> layers) {
  Model m;
  m.name = "tiny";
  m.input = std::move(input);
  m.layers = std::move(layers);
  // Random (not Glorot) values, biases included, so every gradient term is exercised.
  tools::Rng rng(1234);
  for (Layer& l : m.layers) {
    for (float& v : l.weight.values()) v = rng.symmetric(0.8f);
    for (float& v : l.bias.values()) v = rng.symmetric(0.3f);
  }
  return m;
}

/// Summed cross-entropy of `images` images (random inputs, fixed labels) at `params`.
double loss_at(const tools::NetPlan& plan, const std::vector<double>& params,
               const std::vector<double>& input, const std::vector<std::uint8_t>& labels,
               std::vector<double>* grad) {
  const int n = static_cast<int>(labels.size());
  tools::Workspace<double> ws = tools::make_workspace<double>(plan, n);
  std::copy(input.begin(), input.end(), ws.input.begin());
  tools::forward(plan, params.data(), n, ws);
  std::vector<double> g(params.size(), 0.0);
  const double loss = tools::backward(plan, params.data(), labels.data(), n, ws, g.data(), nullptr);
  if (grad != nullptr) *grad = g;
  return loss;
}

/// Compares backward() with central differences for every parameter of `model`.
void check_gradients(const Model& model) {
  const tools::NetPlan plan = tools::make_plan(model);
  std::vector<double> params = tools::flatten_params<double>(plan, model);
  const int n = 3;
  tools::Rng rng(99);
  std::vector<double> input(static_cast<std::size_t>(n * plan.input_size));
  for (double& v : input) v = rng.symmetric(1.0f);
  std::vector<std::uint8_t> labels;
  for (int b = 0; b < n; ++b) {
    labels.push_back(
        static_cast<std::uint8_t>(rng.below(static_cast<std::uint32_t>(plan.classes))));
  }
  std::vector<double> grad;
  loss_at(plan, params, input, labels, &grad);
  const double eps = 1e-6;
  double worst = 0.0;
  for (std::size_t k = 0; k < params.size(); ++k) {
    const double keep = params[k];
    params[k] = keep + eps;
    const double up = loss_at(plan, params, input, labels, nullptr);
    params[k] = keep - eps;
    const double down = loss_at(plan, params, input, labels, nullptr);
    params[k] = keep;
    const double numeric = (up - down) / (2 * eps);
    const double err = std::abs(numeric - grad[k]) / std::max(1.0, std::abs(numeric));
    worst = std::max(worst, err);
    if (err > 1e-6) {
      FAIL_CHECK("parameter " << k << ": backward " << grad[k] << ", finite difference "
                              << numeric);
      return;
    }
  }
  CHECK(worst < 1e-6);
}

Model synthetic_two_conv(std::uint32_t seed) {
  return tools::make_architecture("two-conv", seed);
}

bool same_weights(const Model& a, const Model& b) {
  for (std::size_t i = 0; i < a.layers.size(); ++i) {
    const auto wa = a.layers[i].weight.values(), wb = b.layers[i].weight.values();
    const auto ba = a.layers[i].bias.values(), bb = b.layers[i].bias.values();
    if (!std::equal(wa.begin(), wa.end(), wb.begin(), wb.end())) return false;
    if (!std::equal(ba.begin(), ba.end(), bb.begin(), bb.end())) return false;
  }
  return true;
}

}  // namespace

TEST_CASE("fc backward matches finite differences (with and without bias)") {
  check_gradients(tiny({1, 3, 4}, {simple(LayerKind::flatten), fc("a", 5, 12, true),
                                   fc("b", 4, 5, false), simple(LayerKind::softmax)}));
}

TEST_CASE("tanh and relu backward match finite differences") {
  check_gradients(
      tiny({2, 2, 2}, {fc("a", 6, 8, true), simple(LayerKind::tanh), fc("b", 5, 6, true),
                       simple(LayerKind::relu), fc("c", 3, 5, true), simple(LayerKind::softmax)}));
}

TEST_CASE("conv backward (weights and input, C > 1) matches finite differences") {
  check_gradients(tiny({2, 7, 6}, {conv("c1", {3, 2, 3, 3}), simple(LayerKind::tanh),
                                   conv("c2", {2, 3, 2, 2}), simple(LayerKind::flatten),
                                   fc("f", 4, 2 * 4 * 3, true), simple(LayerKind::softmax)}));
}

TEST_CASE("maxpool backward matches finite differences (overlapping and strided windows)") {
  check_gradients(tiny({1, 9, 9}, {conv("c1", {2, 1, 2, 2}), pool(3, 2), simple(LayerKind::relu),
                                   pool(2, 1), simple(LayerKind::flatten),
                                   fc("f", 3, 2 * 2 * 2, true), simple(LayerKind::softmax)}));
}

TEST_CASE("the architectures have the documented shapes") {
  const Model m = tools::make_architecture("ece408", 1);
  const tools::NetPlan plan = tools::make_plan(m);
  CHECK(plan.layers[0].out_size() == 50 * 24 * 24);
  CHECK(plan.layers[3].out_size() == 7200);
  CHECK(plan.classes == 10);
  CHECK(plan.param_count == 50 * 25 + 7200 * 128 + 128 + 128 * 10 + 10);
  const tools::NetPlan two = tools::make_plan(tools::make_architecture("two-conv", 1));
  CHECK(two.layers[6].out_size() == 400);
  CHECK_THROWS(tools::make_architecture("vgg", 1));
}

TEST_CASE("fast_tanh stays within 1e-6 of std::tanh") {
  double worst = 0.0;
  for (int i = -40000; i <= 40000; ++i) {
    const float x = static_cast<float>(i) * 3e-4f;
    worst = std::max(worst, std::abs(double{tools::fast_tanh(x)} - std::tanh(double{x})));
  }
  CHECK(worst < 1e-6);
  CHECK(tools::fast_tanh(50.0f) == 1.0f);
  CHECK(tools::fast_tanh(-50.0f) == -1.0f);
}

TEST_CASE("sha256 gives the standard digests") {
  const std::string abc = "abc";
  CHECK(tools::sha256_hex({reinterpret_cast<const std::uint8_t*>(abc.data()), abc.size()}) ==
        "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  CHECK(tools::sha256_hex({}) ==
        "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  const std::vector<std::uint8_t> many(1000, 'a');
  tools::Sha256 s;
  s.update({many.data(), 3});
  s.update({many.data() + 3, 997});
  CHECK(s.hex_digest() == tools::sha256_hex(many));
}

TEST_CASE("training on synthetic data lowers the loss; same seed gives the same weights") {
  const auto train = convlab::data::make_synthetic(480, 28, 28, 5);
  const auto test = convlab::data::make_synthetic(200, 28, 28, 6);
  tools::TrainOptions opt;
  opt.seed = 3;
  opt.epochs = 2;
  opt.batch = 32;
  opt.lr = 0.05;

  Model a = synthetic_two_conv(3);
  const double before = tools::mean_loss(a, test, test.count);
  const auto reports = tools::train_model(a, train, &test, opt, {});
  const double after = tools::mean_loss(a, test, test.count);
  CHECK(reports.size() == 3);
  CHECK(after < 0.7 * before);
  CHECK(tools::count_correct(a, test, test.count) > 40);  // chance: 20 of 200

  SUBCASE("same seed, same weights; serial and parallel agree bit for bit") {
    REQUIRE(convlab::cpu_threads() >= 1);
    Model b = synthetic_two_conv(3);
    tools::train_model(b, train, nullptr, opt, {});
    CHECK(same_weights(a, b));
    Model c = synthetic_two_conv(3);
    tools::TrainOptions serial = opt;
    serial.parallel = false;
    tools::train_model(c, train, nullptr, serial, {});
    CHECK(same_weights(a, c));
    Model d = synthetic_two_conv(4);
    tools::train_model(d, train, nullptr, opt, {});
    CHECK_FALSE(same_weights(a, d));
  }

  SUBCASE("adam and a partial last batch train too") {
    tools::TrainOptions adam = opt;
    adam.optimizer = "adam";
    adam.lr = 0.003;
    adam.batch = 50;  // 480 = 9 * 50 + 30
    Model e = synthetic_two_conv(3);
    tools::train_model(e, train, nullptr, adam, {});
    CHECK(tools::mean_loss(e, test, test.count) < before);
  }
}

TEST_CASE("margin repair raises every margin and keeps every prediction") {
  const auto train = convlab::data::make_synthetic(320, 28, 28, 11);
  const auto test = convlab::data::make_synthetic(300, 28, 28, 12);
  Model m = synthetic_two_conv(8);
  tools::TrainOptions opt;
  opt.epochs = 1;
  opt.batch = 32;
  tools::train_model(m, train, nullptr, opt, {});

  const tools::Evaluation before = tools::evaluate_exact(m, test, test.count, true);
  // A bound well above the smallest margin, so several images need raising.
  std::vector<double> margins;
  for (std::int64_t i = 0; i < before.count; ++i) margins.push_back(before.margin(i));
  std::sort(margins.begin(), margins.end());
  const double bound = margins[5] + 1e-4;
  const Model original = m;
  const tools::RepairResult r = tools::repair_margins(m, before, bound, {});
  CHECK(r.images_below >= 5);
  CHECK(r.steps >= 1);

  const tools::Evaluation after = tools::evaluate_exact(m, test, test.count, false);
  CHECK(after.predictions == before.predictions);
  CHECK(after.min_margin() >= bound);
  CHECK(after.correct(test.count) == before.correct(test.count));
  // Only the last fc layer moved.
  for (std::size_t i = 0; i + 2 < m.layers.size(); ++i) {
    const auto x = std::as_const(m).layers[i].weight.values();
    const auto y = original.layers[i].weight.values();
    CHECK(std::equal(x.begin(), x.end(), y.begin(), y.end()));
  }
  // The independent float32 evaluation agrees.
  CHECK(tools::predict_float32(m, test, test.count, nullptr) == after.predictions);
}

TEST_CASE("the target search finds an exact count between two models") {
  const auto train = convlab::data::make_synthetic(320, 28, 28, 21);
  const auto test = convlab::data::make_synthetic(300, 28, 28, 22);
  const Model init = synthetic_two_conv(5);
  Model trained = init;
  tools::TrainOptions opt;
  opt.epochs = 2;
  opt.batch = 32;
  tools::train_model(trained, train, nullptr, opt, {});
  const std::int64_t lo = tools::evaluate_exact(init, test, test.count, false).correct(test.count);
  const std::int64_t hi =
      tools::evaluate_exact(trained, test, test.count, false).correct(test.count);
  REQUIRE(hi > lo + 10);
  const std::int64_t target = (lo + hi) / 2 + 1;
  const tools::TargetSearch found =
      tools::find_target(init, trained, test, test.count, target, 8, {});
  CHECK(found.correct == target);
  const Model mixed = tools::interpolate(init, trained, found.t);
  CHECK(tools::evaluate_exact(mixed, test, test.count, false).correct(test.count) == target);
  CHECK(same_weights(tools::interpolate(init, trained, 1.0), trained));
  CHECK(same_weights(tools::interpolate(init, trained, 0.0), init));
  CHECK_THROWS(tools::find_target(init, trained, test, test.count, test.count + 1, 4, {}));
}

TEST_CASE("a model file written and read back keeps weights and expectations") {
  convlab::test::TempDir dir;
  Model m = synthetic_two_conv(9);
  m.expected_correct[100] = 42;
  m.min_margin = 0.001;
  const auto path = dir.path() / "m.safetensors";
  convlab::save_model(path, m);
  const Model back = convlab::load_model(path);
  CHECK(same_weights(m, back));
  CHECK(back.expected_correct.at(100) == 42);
  CHECK(tools::make_plan(back).param_count == tools::make_plan(m).param_count);
}

}  // namespace test_trainer
