// The network on the GPU: its layers agree with the CPU layers, the library (cuDNN) network
// and every staff variant give the exact expected counts on the real test set (a tf32 or fp16
// variant: its class's precision rule against the float64 network), plain and with
// their fused conv + tanh + max-pool launchers; the runner fuses only conv -> tanh -> 2x2
// max-pool and falls back to the plain path when the fused launcher is a stub.
#include <doctest/doctest.h>

#include <algorithm>

#include <cmath>
#include <cstring>
#include <filesystem>

#include "reference/conv/cudnn_conv.hpp"
#include "reference/conv/library_conv.hpp"
#include "reference/conv/variants.hpp"
#include "reference/core/cuda_check.hpp"
#include "reference/data/fashion_mnist.hpp"
#include "reference/layers/cpu_layers.hpp"
#include "reference/layers/gpu_layers.hpp"
#include "reference/network/exact.hpp"
#include "reference/network/network_gpu.hpp"
#include "tests/support/test_support.hpp"

namespace test_gpu_network {

using namespace convlab;
namespace fs = std::filesystem;

namespace {

// The precision class a variant is judged by.
Precision class_of(const GpuVariant& v) {
  return find_variant(v.name).precision;
}

Model model_named(const std::string& name) {
  return load_model(test::source_dir() / "datasets/models" / (name + ".safetensors"));
}

std::int64_t correct_of(const Model& model, std::int64_t n, const GpuConvCall& conv,
                        const std::string& name) {
  const data::Dataset& ds = test::real_test_set();
  const NetworkRun run = run_network_gpu(model, ds.images(n, model.input_scale), conv, name);
  return count_correct(predictions(run.output), ds.labels);
}

// Layers for a model built in the test.
Tensor random_tensor(Shape shape, std::uint32_t seed, float scale) {
  std::vector<float> v = test::random_values(shape_elements(shape), seed);
  for (float& f : v) f *= scale;
  return Tensor(std::move(shape), std::move(v));
}
Layer simple(LayerKind kind) {
  Layer l;
  l.kind = kind;
  return l;
}
Layer conv_layer(const std::string& name, Shape shape, std::uint32_t seed) {
  Layer l;
  l.kind = LayerKind::conv;
  l.weight_name = name;
  l.weight = random_tensor(std::move(shape), seed, 0.3f);
  return l;
}
Layer pool_layer(int size, int stride) {
  Layer l = simple(LayerKind::maxpool);
  l.pool_size = size;
  l.pool_stride = stride;
  return l;
}
Layer fc_layer(const std::string& name, std::int64_t out, std::int64_t in, std::uint32_t seed) {
  Layer l;
  l.kind = LayerKind::fc;
  l.weight_name = name + ".weight";
  l.bias_name = name + ".bias";
  l.weight = random_tensor({out, in}, seed, 0.1f);
  l.bias = random_tensor({out}, seed + 1, 0.1f);
  return l;
}

// Two fusable conv layers whose outputs are no tile multiple: 1x17x19 -> conv 6x1x4x4 (14x16)
// -> tanh -> pool (7x8) -> conv 5x6x3x3 (5x6) -> tanh -> pool (2x3) -> fc 3 -> softmax.
Model odd_model() {
  Model m;
  m.name = "odd-fused";
  m.input = {1, 17, 19};
  m.layers = {
      conv_layer("c1", {6, 1, 4, 4}, 1), simple(LayerKind::tanh),  pool_layer(2, 2),
      conv_layer("c2", {5, 6, 3, 3}, 2), simple(LayerKind::tanh),  pool_layer(2, 2),
      simple(LayerKind::flatten),        fc_layer("fc", 3, 30, 3), simple(LayerKind::softmax)};
  return m;
}

void check_close(const std::vector<float>& gpu, const std::vector<float>& cpu, double tol) {
  REQUIRE(gpu.size() == cpu.size());
  double worst = 0.0;
  for (std::size_t i = 0; i < gpu.size(); ++i) {
    worst = std::max(worst, static_cast<double>(std::fabs(gpu[i] - cpu[i])));
  }
  CHECK(worst <= tol);
}

}  // namespace

TEST_CASE("GPU layers agree with the CPU layers") {
  cudaStream_t stream = nullptr;
  CUDA_CHECK(cudaStreamCreate(&stream));
  {
    gpu::Layers layers(stream);
    const int n = 3, c = 5, h = 9, w = 7;
    const auto x = test::random_values(n * c * h * w, 5);

    SUBCASE("tanh and relu") {
      for (const bool use_tanh : {true, false}) {
        DeviceBuffer d(static_cast<std::int64_t>(x.size()));
        d.upload(x);
        std::vector<float> ref = x;
        if (use_tanh) {
          layers.tanh(d.data(), n, c, h, w);
          cpu::tanh_inplace(ref);
        } else {
          layers.relu(d.data(), n, c, h, w);
          cpu::relu_inplace(ref);
        }
        CUDA_CHECK(cudaStreamSynchronize(stream));
        check_close(d.download(), ref, 1e-6);
      }
    }
    SUBCASE("maxpool 2/2 on odd sizes") {
      DeviceBuffer d(static_cast<std::int64_t>(x.size())), y(n * c * 4 * 3);
      d.upload(x);
      layers.maxpool(d.data(), y.data(), n, c, h, w, 2, 2);
      std::vector<float> ref(n * c * 4 * 3);
      cpu::maxpool(x.data(), ref.data(), n, c, h, w, 2, 2);
      CUDA_CHECK(cudaStreamSynchronize(stream));
      check_close(y.download(), ref, 0.0);
    }
    SUBCASE("fully connected and softmax") {
      const int in = 315, out = 10;
      const auto wts = test::random_values(out * in, 6);
      const auto bias = test::random_values(out, 7);
      DeviceBuffer dx(n * in), dw(out * in), db(out), dy(n * out);
      dx.upload(std::span<const float>(x.data(), n * in));
      dw.upload(wts);
      db.upload(bias);
      layers.fully_connected(dx.data(), dw.data(), db.data(), dy.data(), n, in, out);
      std::vector<float> ref(n * out);
      cpu::fully_connected(x.data(), wts.data(), bias.data(), ref.data(), n, in, out);
      CUDA_CHECK(cudaStreamSynchronize(stream));
      check_close(dy.download(), ref, 1e-4);
      layers.softmax(dy.data(), n, out);
      cpu::softmax_rows(ref.data(), n, out);
      CUDA_CHECK(cudaStreamSynchronize(stream));
      check_close(dy.download(), ref, 1e-6);
    }
  }
  CUDA_CHECK(cudaStreamDestroy(stream));
}

TEST_CASE("m1.2: the cuDNN network gives every model's expected counts") {
  for (const auto& e : fs::directory_iterator(test::source_dir() / "datasets/models")) {
    if (e.path().extension() != ".safetensors") continue;
    const Model m = load_model(e.path());
    CAPTURE(m.name);
    REQUIRE_FALSE(m.expected_correct.empty());
    const auto [n, expected] = *m.expected_correct.rbegin();
    CHECK(correct_of(m, n, conv_forward_cudnn, "cuDNN") == expected);
  }
}

// Every shipped model (the m1 baseline model included): fp32 variants exact, tf32 and fp16 by
// their class's rule.
TEST_CASE("every staff variant passes its class's network check on every shipped model") {
  if (!solutions_available()) test::skip("staff solutions are not part of this build");
  const data::Dataset& ds = test::real_test_set();
  const auto models = test::shipped_models();
  REQUIRE(models.size() >= 4);
  for (const auto& file : models) {
    const std::string name = file.stem().string();
    const Model m = load_model(file);
    const auto [n, expected] = *m.expected_correct.rbegin();
    const auto shapes = m.conv_shapes(static_cast<int>(n));
    for (const GpuVariant& v : gpu_variants()) {
      CAPTURE(name);
      CAPTURE(v.name);
      const GpuConvCall conv = bind_workspace(v.launcher(Impl::solution), shapes);
      const Precision c = class_of(v);
      if (c == Precision::fp32) {
        CHECK(correct_of(m, n, conv, std::string(v.name)) == expected);
        continue;
      }
      // tf32, fp16: every image above the class's bound gets the float64 network's prediction.
      const Tensor input = ds.images(n, m.input_scale);
      const ExactRun exact = run_network_exact(m, input, c);
      const NetworkRun run = run_network_gpu(m, input, conv, std::string(v.name));
      const PrecisionVerdict verdict = judge_predictions(c, predictions(run.output),
                                                        exact.predictions, exact.margins,
                                                        exact.sigma);
      MESSAGE(v.name << " on " << name << ": " << describe_verdict(verdict));
      CHECK(verdict.images == n);
      CHECK(verdict.ok());
    }
  }
}

TEST_CASE("fuses_tanh_maxpool2 accepts only conv -> tanh -> 2x2 stride-2 max-pool") {
  const Model odd = odd_model();
  CHECK(fuses_tanh_maxpool2(odd, 0));
  CHECK_FALSE(fuses_tanh_maxpool2(odd, 1));
  CHECK(fuses_tanh_maxpool2(odd, 3));
  Model other = odd;
  other.layers[2].pool_stride = 1;
  CHECK_FALSE(fuses_tanh_maxpool2(other, 0));
  other = odd;
  other.layers[1].kind = LayerKind::relu;
  CHECK_FALSE(fuses_tanh_maxpool2(other, 0));
  other.layers.resize(2);
  CHECK_FALSE(fuses_tanh_maxpool2(other, 0));
  CHECK_FALSE(fuses_tanh_maxpool2(model_named("two-conv"), 0));  // relu, not tanh
  CHECK(fuses_tanh_maxpool2(model_named("ece408-high"), 0));
}

TEST_CASE("the fused path matches the CPU network on layers that are no tile multiple") {
  if (!solutions_available()) test::skip("staff solutions are not part of this build");
  const Model m = odd_model();
  const std::int64_t n = 37;
  const Tensor input({n, 1, 17, 19}, test::random_values(n * 17 * 19, 21));
  const NetworkRun cpu = run_network_cpu(m, input, conv_forward_reference);
  for (const GpuVariant& v : gpu_variants()) {
    const GpuConvTanhPoolFn fused = v.fused_launcher(Impl::solution);
    // A reduced class is checked layer by layer within its allowance (test_gpu_variants) and
    // on the shipped models by its rule (below): rounding moves these random probabilities.
    if (fused == nullptr || class_of(v) != Precision::fp32) continue;
    CAPTURE(v.name);
    const NetworkRun run = run_network_gpu(m, input, bind_workspace(v.launcher(Impl::solution), {}),
                                           fused, std::string(v.name));
    REQUIRE(run.conv_layers.size() == 2);
    for (const ConvLayerTime& t : run.conv_layers) CHECK(t.fused == kFusedTanhMaxpool2);
    CHECK(run.conv_layers[0].layer == 0);
    CHECK(run.conv_layers[1].layer == 3);
    CHECK(run.conv_layers[1].shape == ConvShape{37, 5, 6, 7, 8, 3});
    const std::vector<float> got(run.output.values().begin(), run.output.values().end());
    const std::vector<float> want(cpu.output.values().begin(), cpu.output.values().end());
    check_close(got, want, 1e-5);
  }
}

TEST_CASE("a fused launcher that throws NotImplemented falls back to the plain path") {
  if (!solutions_available()) test::skip("staff solutions are not part of this build");
  const Model m = odd_model();
  const std::int64_t n = 9;
  const Tensor input({n, 1, 17, 19}, test::random_values(n * 17 * 19, 22));
  // The first variant declared fused; its student stub throws NotImplemented.
  const auto fused = std::find_if(gpu_variants().begin(), gpu_variants().end(),
                                  [](const GpuVariant& v) { return v.student_fused != nullptr; });
  if (fused == gpu_variants().end()) test::skip("no variant is declared fused");
  const GpuVariant& best = *fused;
  const std::string label(best.name);
  const GpuConvCall conv = bind_workspace(best.launcher(Impl::solution), {});
  const NetworkRun plain = run_network_gpu(m, input, conv, label);
  const NetworkRun stub = run_network_gpu(m, input, conv, best.student_fused, label);
  REQUIRE(stub.conv_layers.size() == 2);
  for (const ConvLayerTime& t : stub.conv_layers) CHECK(t.fused.empty());
  // The same kernels ran in the same order: bit-identical probabilities.
  REQUIRE(stub.output.size() == plain.output.size());
  CHECK(std::memcmp(stub.output.data(), plain.output.data(),
                    static_cast<std::size_t>(plain.output.size()) * sizeof(float)) == 0);
}

TEST_CASE("fused staff launchers pass their class's check; relu models stay unfused") {
  if (!solutions_available()) test::skip("staff solutions are not part of this build");
  const data::Dataset& ds = test::real_test_set();
  for (const char* name : {"ece408-high", "ece408-low", "baseline", "two-conv"}) {
    const Model m = model_named(name);
    const auto [n, expected] = *m.expected_correct.rbegin();
    for (const GpuVariant& v : gpu_variants()) {
      const GpuConvTanhPoolFn fused = v.fused_launcher(Impl::solution);
      if (fused == nullptr) continue;
      CAPTURE(name);
      CAPTURE(v.name);
      const Tensor input = ds.images(n, m.input_scale);
      const NetworkRun run = run_network_gpu(
          m, input, bind_workspace(v.launcher(Impl::solution), {}), fused, std::string(v.name));
      const Precision c = class_of(v);
      if (c == Precision::fp32) {
        CHECK(count_correct(predictions(run.output), ds.labels) == expected);
      } else {
        const ExactRun exact = run_network_exact(m, input, c);
        const PrecisionVerdict verdict = judge_predictions(
            c, predictions(run.output), exact.predictions, exact.margins, exact.sigma);
        MESSAGE(v.name << " fused on " << name << ": " << describe_verdict(verdict));
        CHECK(verdict.ok());
      }
      for (const ConvLayerTime& t : run.conv_layers) {
        CHECK(t.fused == (fuses_tanh_maxpool2(m, static_cast<std::size_t>(t.layer))
                              ? std::string(kFusedTanhMaxpool2)
                              : std::string()));
      }
    }
  }
}

TEST_CASE("cuDNN's conv + tanh + max-pool row gives the exact counts") {
  const data::Dataset& ds = test::real_test_set();
  const Model m = model_named("ece408-high");
  const auto [n, expected] = *m.expected_correct.rbegin();
  const NetworkRun run = run_network_gpu(m, ds.images(n, m.input_scale), conv_forward_cudnn,
                                         conv_tanh_maxpool_cudnn, "cuDNN");
  REQUIRE(run.conv_layers.size() == 1);
  CHECK(run.conv_layers[0].fused == kFusedTanhMaxpool2);
  CHECK(count_correct(predictions(run.output), ds.labels) == expected);
}

TEST_CASE("a failing convolution is reported as the convolution's error") {
  const Model m = model_named("ece408-high");
  const GpuConvCall bad = [](float*, const float*, const float*, const ConvShape&, cudaStream_t) {
    CUDA_CHECK(cudaErrorInvalidValue);
  };
  try {
    correct_of(m, 10, bad, "broken");
    FAIL("no error raised");
  } catch (const CudaError& e) {
    CHECK(std::string(e.what()).find("the broken convolution failed on layer 0") !=
          std::string::npos);
  }
}

}  // namespace test_gpu_network
