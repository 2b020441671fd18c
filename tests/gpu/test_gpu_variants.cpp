// Every GPU variant's staff solution against cuDNN and the CPU reference, on shapes chosen to
// break tiling assumptions: sizes that are not tile multiples, K from 1 to 11, many channels,
// filters beyond 64 KB of constant memory, and batches beyond the 65535 grid limit.
//
// Set CONVLAB_GPU_TIMING=1 to also time every variant and cuDNN on the project's layer.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "reference/conv/cudnn_conv.hpp"
#include "reference/conv/library_conv.hpp"
#include "reference/conv/variants.hpp"
#include "reference/core/cuda_check.hpp"
#include "reference/core/device_buffer.hpp"
#include "tests/support/test_support.hpp"

namespace {

using convlab::ConvShape;
using convlab::DeviceBuffer;
using convlab::GpuConvFn;

// Inputs on the device, an output buffer, and a stream of its own (launchers must use it).
struct Problem {
  explicit Problem(const ConvShape& s)
      : shape(s),
        x_host(convlab::test::random_values(s.x_elements(), 1234)),
        k_host(convlab::test::random_values(s.k_elements(), 5678)),
        x(s.x_elements()),
        k(s.k_elements()),
        y(s.y_elements()) {
    x.upload(x_host);
    k.upload(k_host);
    CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  }
  ~Problem() { cudaStreamDestroy(stream); }
  Problem(const Problem&) = delete;
  Problem& operator=(const Problem&) = delete;

  // Poisons y with NaN, runs `fn` on the stream, returns y.
  std::vector<float> run(GpuConvFn fn) {
    y.fill_bytes(0xff);
    fn(y.data(), x.data(), k.data(), shape, stream);
    CUDA_CHECK(cudaStreamSynchronize(stream));
    CUDA_CHECK(cudaGetLastError());
    return y.download();
  }

  ConvShape shape;
  std::vector<float> x_host, k_host;
  DeviceBuffer x, k, y;
  cudaStream_t stream = nullptr;
};

std::string describe(const char* what, const ConvShape& s, const convlab::test::Comparison& c) {
  return std::string(what) + " on " + s.to_string() + ": " + std::to_string(c.mismatches) +
         " mismatches, worst error " + std::to_string(c.worst_error) + "\n" + c.report;
}

// Checks every variant on `s` against cuDNN, and against the CPU reference when `with_cpu`.
void check_all_variants(const ConvShape& s, bool with_cpu) {
  Problem problem(s);
  const std::vector<float> cudnn = problem.run(&convlab::conv_forward_cudnn);
  if (with_cpu) {
    std::vector<float> cpu(static_cast<std::size_t>(s.y_elements()));
    convlab::conv_forward_reference(cpu.data(), problem.x_host.data(), problem.k_host.data(), s);
    const auto c = convlab::test::compare_conv_output(cudnn, cpu, s);
    CHECK_MESSAGE(c.ok, describe("cuDNN vs CPU reference", s, c));
    for (const convlab::GpuVariant& v : convlab::gpu_variants()) {
      const std::string name(v.name);
      const std::vector<float> out = problem.run(v.launcher(convlab::Impl::solution));
      const auto r = convlab::test::compare_conv_output(out, cpu, s);
      CHECK_MESSAGE(r.ok, describe((name + " vs CPU reference").c_str(), s, r));
    }
  }
  for (const convlab::GpuVariant& v : convlab::gpu_variants()) {
    const std::string name(v.name);
    const GpuConvFn fn = v.launcher(convlab::Impl::solution);
    const std::vector<float> first = problem.run(fn);
    const auto r = convlab::test::compare_conv_output(first, cudnn, s);
    CHECK_MESSAGE(r.ok, describe((name + " vs cuDNN").c_str(), s, r));
    // Same inputs, same code: any difference means a race or an uninitialised read.
    const std::vector<float> second = problem.run(fn);
    CHECK_MESSAGE(std::memcmp(first.data(), second.data(), first.size() * sizeof(float)) == 0,
                  name << " gives different results on two runs of " << s.to_string());
  }
}

// B, M, C, H, W, K
const ConvShape kSmallShapes[] = {
    {1, 1, 1, 5, 5, 5},      // one output
    {3, 7, 1, 28, 28, 5},    // the project's layer, few images and maps
    {2, 5, 3, 31, 17, 3},    // nothing a multiple of anything
    {4, 50, 1, 28, 28, 5},   // the project's layer
    {2, 4, 4, 40, 40, 7},    // several tiles, K=7
    {1, 3, 2, 9, 13, 1},     // K=1
    {2, 16, 8, 12, 12, 3},   // second layer of a small net
    {1, 64, 64, 14, 14, 3},  // many channels
    {2, 6, 3, 23, 19, 11},   // K=11: runtime-K paths
    {2, 3, 2, 30, 26, 9},    // K=9, W_out multiple of 2 but not of 4
    {3, 8, 40, 28, 28, 3},   // channels in several shared-memory slabs
    {1, 40, 64, 9, 9, 3},    // filters above 64 KB: constant memory in chunks of maps
    {1, 2, 400, 7, 7, 7},    // one filter above 64 KB: constant memory in chunks of channels
    {2, 5, 1, 130, 120, 2},  // large image, K=2
};

}  // namespace

TEST_CASE("GPU variants match cuDNN and the CPU reference on awkward shapes") {
  for (const ConvShape& s : kSmallShapes) {
    CAPTURE(s.to_string());
    check_all_variants(s, /*with_cpu=*/true);
  }
}

TEST_CASE("GPU variants handle more images than gridDim.y and gridDim.z allow") {
  check_all_variants(ConvShape{70000, 2, 1, 5, 5, 3}, /*with_cpu=*/true);
}

TEST_CASE("GPU variants match cuDNN on a large batch of the project's layer") {
  check_all_variants(ConvShape{2048, 50, 1, 28, 28, 5}, /*with_cpu=*/false);
}

TEST_CASE("cuDNN names its algorithm") {
  const ConvShape s{2, 4, 3, 12, 12, 3};
  Problem problem(s);
  convlab::CudnnConv conv;
  conv.forward(problem.y.data(), problem.x.data(), problem.k.data(), s, problem.stream);
  CUDA_CHECK(cudaStreamSynchronize(problem.stream));
  CHECK_FALSE(conv.algorithm().empty());
}

// Timing of every variant and cuDNN on the project's layer (B=10000, M=50, C=1, 28x28, K=5):
// one warm-up, ten timed runs each with CUDA events, min and median, and the output of the last
// timed run re-checked against cuDNN. Off unless CONVLAB_GPU_TIMING is set: it takes seconds.
TEST_CASE("GPU variant timing on the project's layer") {
  const char* env = std::getenv("CONVLAB_GPU_TIMING");
  if (env == nullptr || std::string(env) == "0") return;
  const ConvShape s{10000, 50, 1, 28, 28, 5};
  Problem problem(s);
  convlab::CudnnConv cudnn;
  cudaEvent_t start = nullptr, stop = nullptr;
  CUDA_CHECK(cudaEventCreate(&start));
  CUDA_CHECK(cudaEventCreate(&stop));
  auto time = [&](auto&& launch) {
    launch();  // warm-up (also prepares cuDNN)
    std::vector<float> ms;
    for (int i = 0; i < 10; ++i) {
      CUDA_CHECK(cudaEventRecord(start, problem.stream));
      launch();
      CUDA_CHECK(cudaEventRecord(stop, problem.stream));
      CUDA_CHECK(cudaEventSynchronize(stop));
      float t = 0.0f;
      CUDA_CHECK(cudaEventElapsedTime(&t, start, stop));
      ms.push_back(t);
    }
    std::sort(ms.begin(), ms.end());
    return std::pair{ms.front(), ms[ms.size() / 2]};
  };
  const auto cudnn_ms = time([&] {
    cudnn.forward(problem.y.data(), problem.x.data(), problem.k.data(), s, problem.stream);
  });
  const std::vector<float> ref = problem.y.download();
  std::string table = "variant            min ms   median ms   speedup vs cuDNN (min)\n";
  char line[160];
  for (const convlab::GpuVariant& v : convlab::gpu_variants()) {
    const GpuConvFn fn = v.launcher(convlab::Impl::solution);
    problem.y.fill_bytes(0xff);
    const auto t =
        time([&] { fn(problem.y.data(), problem.x.data(), problem.k.data(), s, problem.stream); });
    const auto c = convlab::test::compare_conv_output(problem.y.download(), ref, s);
    CHECK_MESSAGE(c.ok, describe((std::string(v.name) + " (timed) vs cuDNN").c_str(), s, c));
    std::snprintf(line, sizeof line, "%-17s %8.3f %11.3f %10.2fx\n", std::string(v.name).c_str(),
                  t.first, t.second, cudnn_ms.first / t.first);
    table += line;
  }
  std::snprintf(line, sizeof line, "%-17s %8.3f %11.3f   (%s, workspace %zu bytes)\n", "cudnn",
                cudnn_ms.first, cudnn_ms.second, cudnn.algorithm().c_str(),
                cudnn.workspace_bytes());
  table += line;
  std::printf("\n%s: %s\n%s", "timing", s.to_string().c_str(), table.c_str());
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
}
