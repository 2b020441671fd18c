// The network on the GPU: its layers agree with the CPU layers, the library (cuDNN) network
// and every staff variant give the exact expected counts on the real test set.
#include <doctest/doctest.h>

#include <cmath>
#include <filesystem>

#include "datasets/fashion_mnist.hpp"
#include "reference/conv/cudnn_conv.hpp"
#include "reference/conv/library_conv.hpp"
#include "reference/conv/variants.hpp"
#include "reference/core/cuda_check.hpp"
#include "reference/layers/cpu_layers.hpp"
#include "reference/layers/gpu_layers.hpp"
#include "reference/network/network_gpu.hpp"
#include "tests/support/test_support.hpp"

using namespace convlab;
namespace fs = std::filesystem;

namespace {

Model model_named(const std::string& name) {
  return load_model(test::source_dir() / "datasets/models" / (name + ".safetensors"));
}

std::int64_t correct_of(const Model& model, std::int64_t n, const GpuConvCall& conv,
                        const std::string& name) {
  const data::Dataset& ds = test::real_test_set();
  const NetworkRun run = run_network_gpu(model, ds.images(n, model.input_scale), conv, name);
  return count_correct(predictions(run.output), ds.labels);
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

TEST_CASE("every staff variant gives the exact counts of ece408-high, ece408-low, two-conv") {
  if (!solutions_available()) test::skip("staff solutions are not part of this build");
  for (const char* name : {"ece408-high", "ece408-low", "two-conv"}) {
    const Model m = model_named(name);
    const auto [n, expected] = *m.expected_correct.rbegin();
    for (const GpuVariant& v : gpu_variants()) {
      CAPTURE(name);
      CAPTURE(v.name);
      CHECK(correct_of(m, n, v.launcher(Impl::solution), std::string(v.name)) == expected);
    }
  }
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
