// Every GPU variant under test (the staff solution, or in the student release the team's code)
// against cuDNN and the CPU reference, on shapes chosen to
// break tiling assumptions: sizes that are not tile multiples, K from 1 to 11, many channels,
// filters beyond 64 KB of constant memory, and batches beyond the 65535 grid limit.
//
// Variants with a fused launcher (conv + tanh + max-pool) are checked against the CPU reference
// conv -> tanh -> max-pool on the same kind of shapes, with several pool geometries.
//
// A sweep of random shapes covers what no list foresees: CONVLAB_RANDOM_SHAPES=N (default 64)
// and CONVLAB_RANDOM_SEED=S repeat or widen it, CONVLAB_VARIANT=NAME keeps one variant.
//
// Set CONVLAB_GPU_TIMING=1 to also time every variant and cuDNN on the project's layer.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "reference/bench/bench_report.hpp"
#include "reference/conv/cudnn_conv.hpp"
#include "reference/conv/elementwise.hpp"
#include "reference/conv/library_conv.hpp"
#include "reference/conv/variants.hpp"
#include "reference/core/cuda_check.hpp"
#include "reference/core/device_buffer.hpp"
#include "reference/layers/cpu_layers.hpp"
#include "tests/support/code_under_test.hpp"
#include "tests/support/test_support.hpp"

namespace test_gpu_variants {

namespace {

using convlab::ConvShape;
using convlab::DeviceBuffer;
using convlab::GpuConvCall;
using convlab::GpuConvTanhPoolFn;
using convlab::PoolShape;

// Inputs on the device, an output buffer, and a stream of its own (launchers must use it).
// `scale` multiplies x and divides k: the same products, from inputs of another magnitude.
struct Problem {
  explicit Problem(const ConvShape& s, float scale = 1.0f)
      : shape(s),
        x_host(convlab::test::random_values(s.x_elements(), 1234)),
        k_host(convlab::test::random_values(s.k_elements(), 5678)),
        x(s.x_elements()),
        k(s.k_elements()),
        y(s.y_elements()) {
    for (float& v : x_host) v *= scale;
    for (float& v : k_host) v /= scale;
    x.upload(x_host);
    k.upload(k_host);
    CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  }
  ~Problem() { cudaStreamDestroy(stream); }
  Problem(const Problem&) = delete;
  Problem& operator=(const Problem&) = delete;

  // Poisons y with NaN, runs `fn` on the stream, returns y.
  std::vector<float> run(const GpuConvCall& fn) {
    y.fill_bytes(0xff);
    fn(y.data(), x.data(), k.data(), shape, stream);
    CUDA_CHECK(cudaStreamSynchronize(stream));
    CUDA_CHECK(cudaGetLastError());
    return y.download();
  }

  // Likewise for a fused launcher: the pooled output, poisoned first.
  std::vector<float> run(GpuConvTanhPoolFn fn, const PoolShape& pool) {
    DeviceBuffer pooled(pool.pooled_elements(shape));
    pooled.fill_bytes(0xff);
    fn(pooled.data(), x.data(), k.data(), shape, pool, stream);
    CUDA_CHECK(cudaStreamSynchronize(stream));
    CUDA_CHECK(cudaGetLastError());
    return pooled.download();
  }

  ConvShape shape;
  std::vector<float> x_host, k_host;
  DeviceBuffer x, k, y;
  cudaStream_t stream = nullptr;
};

// The one variant CONVLAB_VARIANT keeps; empty where it is unset (every variant runs).
std::string_view variant_filter() {
  const char* only = std::getenv("CONVLAB_VARIANT");
  return only == nullptr ? std::string_view() : std::string_view(only);
}

// False for a variant other than CONVLAB_VARIANT's, where it is set.
bool selected(const convlab::GpuVariant& v) {
  return variant_filter().empty() || v.name == variant_filter();
}

// Whether every fused check must find a launcher: the staff solutions have fused launchers, a
// team's are optional, and CONVLAB_VARIANT may keep a variant without one.
bool fused_expected() { return convlab::solutions_available() && variant_filter().empty(); }

// What a variant's class adds to the fp32 tolerance on this problem (nothing for fp32).
std::vector<double> class_allowance(const convlab::GpuVariant& v, const Problem& p) {
  const convlab::Precision c = convlab::find_variant(v.name).precision;
  if (c == convlab::Precision::fp32) return {};
  return convlab::precision_allowance(c, p.shape, p.x_host, p.k_host);
}

std::string describe(const char* what, const ConvShape& s, const convlab::test::Comparison& c) {
  return std::string(what) + " on " + s.to_string() + ": " + std::to_string(c.mismatches) +
         " mismatches, worst error " + std::to_string(c.worst_error) + "\n" + c.report;
}

// Checks every variant on `s` against cuDNN, and against the CPU reference when `with_cpu`,
// within the bench's fp32 rule (atol growing with sqrt(C*K*K), as the rounding of a sum does in
// any order and through a Winograd transform) plus the variant's class allowance.
void check_all_variants(const ConvShape& s, bool with_cpu) {
  Problem problem(s);
  const convlab::Tolerance tol = convlab::tolerance_for(s);
  const std::vector<float> cudnn = problem.run(&convlab::conv_forward_cudnn);
  if (with_cpu) {
    std::vector<float> cpu(static_cast<std::size_t>(s.y_elements()));
    convlab::conv_forward_reference(cpu.data(), problem.x_host.data(), problem.k_host.data(), s);
    const auto c = convlab::test::compare_conv_output(cudnn, cpu, s, {}, tol.atol, tol.rtol);
    CHECK_MESSAGE(c.ok, describe("cuDNN vs CPU reference", s, c));
    for (const convlab::GpuVariant& v : convlab::gpu_variants()) {
      const std::string name(v.name);
      const GpuConvCall fn = selected(v) ? convlab::test::launcher_under_test(v) : nullptr;
      if (fn == nullptr) continue;
      const std::vector<float> out = problem.run(fn);
      const auto r = convlab::test::compare_conv_output(out, cpu, s, class_allowance(v, problem),
                                                        tol.atol, tol.rtol);
      CHECK_MESSAGE(r.ok, describe((name + " vs CPU reference").c_str(), s, r));
    }
  }
  for (const convlab::GpuVariant& v : convlab::gpu_variants()) {
    const std::string name(v.name);
    const GpuConvCall fn = selected(v) ? convlab::test::launcher_under_test(v) : nullptr;
    if (fn == nullptr) continue;
    const std::vector<float> first = problem.run(fn);
    const auto r = convlab::test::compare_conv_output(first, cudnn, s, class_allowance(v, problem),
                                                      tol.atol, tol.rtol);
    CHECK_MESSAGE(r.ok, describe((name + " vs cuDNN").c_str(), s, r));
    // Same inputs, same code: any difference means a race or an uninitialised read.
    const std::vector<float> second = problem.run(fn);
    CHECK_MESSAGE(std::memcmp(first.data(), second.data(), first.size() * sizeof(float)) == 0,
                  name << " gives different results on two runs of " << s.to_string());
  }
}

// The CPU reference of a fused launcher: conv, then tanh, then max-pool.
std::vector<float> cpu_conv_tanh_pool(const Problem& p, const PoolShape& pool) {
  const ConvShape& s = p.shape;
  std::vector<float> conv(static_cast<std::size_t>(s.y_elements()));
  convlab::conv_forward_reference(conv.data(), p.x_host.data(), p.k_host.data(), s);
  convlab::cpu::tanh_inplace(conv);
  std::vector<float> pooled(static_cast<std::size_t>(pool.pooled_elements(s)));
  convlab::cpu::maxpool(conv.data(), pooled.data(), s.B, s.M, s.H_out(), s.W_out(), pool.size,
                        pool.stride);
  return pooled;
}

// A reduced class's allowance on the pooled output: tanh moves no value further than its
// input moved, so each window may be off by the largest allowance of the conv outputs in it.
std::vector<double> pooled_allowance(const convlab::GpuVariant& v, const Problem& p,
                                     const PoolShape& pool) {
  const std::vector<double> conv = class_allowance(v, p);
  if (conv.empty()) return {};
  const std::vector<float> as_float(conv.begin(), conv.end());
  std::vector<float> pooled(static_cast<std::size_t>(pool.pooled_elements(p.shape)));
  convlab::cpu::maxpool(as_float.data(), pooled.data(), p.shape.B, p.shape.M, p.shape.H_out(),
                        p.shape.W_out(), pool.size, pool.stride);
  return {pooled.begin(), pooled.end()};
}

// Checks every fused launcher on `s` and `pool` against the CPU reference, within the conv's
// own rule plus its class's allowance (tanh and max-pool do not enlarge an error), and that
// two runs agree bit for bit. Returns how many fused launchers were checked.
int check_fused_variants(const ConvShape& s, const PoolShape& pool, float scale = 1.0f) {
  Problem problem(s, scale);
  const std::vector<float> ref = cpu_conv_tanh_pool(problem, pool);
  const convlab::Tolerance tol = convlab::tolerance_for(s);
  // Output coordinates of the pooled tensor, for the mismatch report.
  const ConvShape pooled_layout{s.B, s.M, 1, pool.out(s.H_out()), pool.out(s.W_out()), 1};
  int checked = 0;
  for (const convlab::GpuVariant& v : convlab::gpu_variants()) {
    const GpuConvTanhPoolFn fn =
        selected(v) ? convlab::test::fused_launcher_under_test(v) : nullptr;
    if (fn == nullptr) continue;
    ++checked;
    const std::string name = std::string(v.name) + " fused (" + pool.to_string() + ")";
    const std::vector<float> first = problem.run(fn, pool);
    const auto r = convlab::test::compare_conv_output(
        first, ref, pooled_layout, pooled_allowance(v, problem, pool), tol.atol, tol.rtol);
    CHECK_MESSAGE(r.ok, describe((name + " vs CPU conv, tanh, max-pool").c_str(), s, r));
    const std::vector<float> second = problem.run(fn, pool);
    CHECK_MESSAGE(std::memcmp(first.data(), second.data(), first.size() * sizeof(float)) == 0,
                  name << " gives different results on two runs of " << s.to_string());
  }
  return checked;
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
    {3, 12, 1, 29, 29, 4},    // rows of 26 outputs: stored as pairs, not fours
    {2, 10, 3, 20, 20, 3},    // the same with channels: rows of 18
    {2, 4, 1, 30, 30, 7},     // C=1, K=7: the whole patch held in registers
    {2, 9, 1, 23, 35, 4},     // C=1, K=4, rows of 32: tiles of one row of four
    {2, 5, 1, 25, 20, 7},     // C=1, K=7, rows of 14: tiles of 8x2 that store pairs
    {1, 3, 1, 22, 19, 6},     // C=1, K=6, rows of 14
    {1, 2, 1, 15, 15, 7},     // C=1, K=7, rows of 9: single stores
    // best's GEMM path: each tile shape, filters loaded as float4s and one value at a time
    {2, 24, 41, 9, 9, 3},     // M <= 32, C*K*K not a multiple of 4, filters too long to stage
    {2, 33, 7, 17, 9, 5},     // M <= 64, C*K*K not a multiple of 4
    {2, 100, 6, 15, 14, 4},   // even K, a grid too small for 128x128 tiles
    {3, 200, 24, 11, 13, 3},  // M over two tiles, C*K*K a multiple of 4
    {20, 130, 3, 32, 33, 3},  // a grid large enough for 128x128 tiles, M over two tiles
    {2, 16, 64, 9, 8, 3},     // 16 maps with a sum of 576 terms: 16-row tiles
    {3, 12, 61, 7, 9, 3},     // 12 maps, 549 terms, C*K*K not a multiple of 4
    // filters above 7x7 with 5 maps or more: C = 1, 16 maps on an image above 48 KB, and C = 1
    // on a grid of 64 pixels (too few for a product)
    {2, 8, 1, 30, 33, 9}, {1, 16, 3, 67, 67, 11}, {2, 5, 1, 40, 21, 13}, {1, 64, 1, 20, 20, 13},
    // small sums over 17 to 48 maps: filters held in registers in 3 to 6 fragments of 8 maps
    {2, 20, 1, 19, 23, 4}, {2, 31, 2, 15, 14, 3}, {2, 37, 1, 12, 13, 5}, {2, 45, 3, 11, 10, 3},
    // sums that fill their last step of 8 terms, or at most half of it (a k = 4 product)
    {2, 53, 2, 13, 11, 4}, {3, 6, 1, 20, 17, 8}, {2, 7, 15, 9, 10, 2},
    // best's staged-image path: 1 to 4 fragments of 8 maps, chunks of several images and a
    // short last chunk, a last step of 4 terms or fewer, K = 1, a 36 KB image
    {7, 20, 12, 13, 13, 4}, {3, 32, 3, 9, 7, 3}, {2, 16, 4, 40, 40, 7}, {5, 12, 12, 8, 8, 1},
    {2, 9, 7, 5, 6, 2}, {2, 6, 4, 40, 56, 3}, {3, 24, 5, 20, 19, 3},
    // the tf32 and fp16 staged kernels (sums too long for the filters to stay in registers): 4
    // and 1 fragments of 8 maps (with LeNet's conv2 and the 7-image shape above for 2 and 3)
    {2, 32, 8, 10, 11, 3}, {3, 5, 6, 11, 12, 4},
    // C = 1, 41 to 64 maps a block, K = 5 to 7 (the warp-group products on sm_90a): rows of
    // outputs that are not a multiple of 8, a short last tile of 64 outputs, 2 to 4 map slices
    {3, 64, 1, 29, 27, 6}, {2, 130, 1, 21, 19, 7}, {3, 45, 1, 14, 30, 5}, {2, 200, 1, 20, 21, 5},
    {5, 41, 1, 17, 25, 5},
    // C > 1, 64 maps or more, 64 terms or more, grids of 66 blocks or more (the producer and
    // consumer GEMM on sm_90a): 64 and 96 maps, 130 over two tiles, filters loaded as float4s
    // and one value at a time, a short last tile of pixels
    {16, 96, 8, 34, 35, 3}, {12, 64, 9, 30, 31, 3}, {10, 130, 4, 24, 27, 4},
    // ... with more tiles than blocks (each block takes several in turn), rows of y of an odd
    // length (single stores)
    {33, 64, 8, 41, 41, 3},
    // ... with 33 to 63 maps (one consumer group, its last maps padding): 33, 40 and 59 maps
    {12, 33, 9, 30, 31, 3}, {12, 40, 9, 30, 31, 3}, {10, 59, 5, 34, 35, 4},
    // K = 3 with 64 channels and maps or more (Winograd's F(4x4, 3x3) around that GEMM on
    // sm_90a): 70 and 96 maps over two consumer groups, tiles cut by the image's edges, a sum
    // that ends inside a stage and filters loaded one value at a time, an odd number of tiles,
    // exact tiles with float4 rows, more products' tiles than blocks
    {3, 70, 65, 19, 23, 3}, {5, 96, 80, 13, 30, 3}, {2, 64, 64, 14, 14, 3}, {4, 128, 64, 66, 66, 3},
    {2, 64, 512, 10, 10, 3},  // a sum of 4608 terms: the transforms' rounding within the bound
    // K = 1 with C > 1 and at most 16 maps (best's pointwise kernel): 4, 8 and 16 maps a thread,
    // planes of whole float4s or not, the most channels its shared memory holds and one more,
    // and more pixels than its grid has threads; small grids with the sums split over a warp's
    // lanes: a last warp part full, a channel count no multiple of the split
    {2, 3, 5, 8, 8, 1}, {3, 7, 21, 43, 5, 1}, {2, 16, 9, 12, 12, 1}, {1, 11, 768, 4, 6, 1},
    {2, 12, 769, 3, 5, 1}, {1000, 9, 4, 33, 40, 1}, {20, 16, 64, 14, 14, 1}, {7, 5, 17, 9, 9, 1},
    // few maps, few outputs and long sums (best splits the channels into parts on its FMA
    // kernels): filters in shared memory, in constant memory, above 7x7; channel counts no
    // multiple of a part
    {8, 1, 53, 15, 46, 7}, {4, 3, 135, 9, 21, 4}, {2, 2, 121, 26, 14, 11}, {3, 3, 37, 32, 9, 7},
    // few maps on images too large to stage whole (best's band kernel): bands of rows with a
    // short last band, rows of whole float4s or not, 1 to 4 map fragments, several whole images
    // per tile with the sum split over parts, and a split on bands; 1 to 3 maps with K > 7
    // (B's columns hold shifted filters): rows of y no multiple of the shift, a last band
    // whose last row's terms run past the image
    {3, 13, 19, 40, 61, 4}, {2, 8, 67, 36, 92, 5}, {1, 20, 40, 30, 40, 3}, {2, 29, 24, 50, 50, 5},
    {5, 2, 70, 20, 16, 9}, {2, 10, 93, 32, 35, 8}, {2, 1, 20, 30, 37, 8}, {1, 3, 30, 70, 45, 9},
};

}  // namespace

TEST_CASE("GPU variants match cuDNN and the CPU reference on awkward shapes") {
  for (const ConvShape& s : kSmallShapes) {
    CAPTURE(s.to_string());
    check_all_variants(s, /*with_cpu=*/true);
  }
}

TEST_CASE("fused launchers match the CPU conv, tanh and max-pool on awkward shapes") {
  // B, M, C, H, W, K: odd conv outputs (the last row or column is not pooled), tiles that do
  // not divide the output, C > 1, K from 1 to 11, filters beyond 64 KB of constant memory.
  const ConvShape shapes[] = {
      {3, 7, 1, 28, 28, 5}, {4, 50, 1, 28, 28, 5}, {2, 5, 3, 31, 17, 3}, {2, 4, 4, 40, 40, 7},
      {3, 12, 1, 31, 31, 4}, {2, 10, 3, 39, 39, 4},  // pooled rows of 14 and 18: pairs
      {1, 3, 2, 9, 13, 1},  {2, 16, 8, 12, 12, 3}, {2, 8, 1, 28, 28, 5}, {2, 6, 3, 23, 19, 11},
      {2, 3, 2, 30, 26, 9}, {1, 40, 64, 9, 9, 3},  {1, 2, 400, 8, 8, 7}, {2, 5, 1, 130, 120, 2},
      {5, 9, 1, 27, 29, 6}, {3, 11, 2, 14, 33, 4}, {2, 4, 1, 30, 30, 7},  // C=1, K=7
      {2, 20, 1, 19, 23, 4}, {2, 31, 2, 15, 14, 3}, {2, 37, 1, 12, 13, 5}, {2, 45, 3, 11, 10, 3},
      {2, 53, 2, 13, 11, 4}, {3, 6, 1, 20, 17, 8}, {2, 7, 15, 9, 10, 2},  // full or half last step
      {2, 10, 30, 30, 36, 6},  // images too large to stage whole: pooled after the band kernel
      // C = 1, 41 to 64 maps a block, K = 5 to 7 (the warp-group products on sm_90a; K = 5 with
      // up to 64 maps takes the fp16 products below): odd conv outputs, images of an odd size,
      // a short last tile of windows, 2 to 4 map slices.
      {3, 64, 1, 29, 27, 6}, {2, 130, 1, 21, 19, 7}, {3, 45, 1, 14, 30, 5}, {2, 200, 1, 20, 20, 5},
      {5, 41, 1, 17, 25, 5},
      // C = 1, K = 5, 25 to 64 maps (`best`'s fp16 products, 4 to 8 fragments of 8 maps):
      // images of odd sizes, not a multiple of 4 values, the last tile of windows short.
      {3, 56, 1, 23, 19, 5}, {2, 48, 1, 36, 44, 5}, {4, 49, 1, 9, 10, 5}, {3, 25, 1, 28, 28, 5},
      {2, 33, 1, 15, 21, 5}, {2, 64, 1, 21, 22, 5}, {3, 58, 1, 54, 54, 5},
      // `best`'s staged images with the pool in the epilogue: 1 to 4 fragments of 8 maps,
      // windows of a task across images and a short last chunk, odd conv outputs, K = 1.
      {2, 16, 4, 40, 40, 7}, {7, 20, 12, 13, 13, 4}, {3, 24, 5, 20, 19, 3}, {2, 32, 8, 10, 11, 3},
      {5, 12, 12, 8, 8, 1},
      // Shapes whose plain route in `best` is another product on the tensor cores, pooled after
      // it: Winograd, the producer-consumer GEMM, the GEMM, filters above 7x7, and one map on a
      // grid too small for the channel-streaming kernel.
      {3, 70, 65, 19, 23, 3}, {16, 96, 8, 34, 35, 3}, {2, 24, 41, 9, 9, 3}, {1, 16, 3, 67, 67, 11},
      {16, 1, 16, 32, 32, 3},
      // K = 1 with few maps: the pointwise kernel, pooled after it
      {2, 16, 9, 12, 12, 1}, {3, 7, 21, 43, 6, 1},
  };
  const bool staff = fused_expected();
  for (const ConvShape& s : shapes) {
    CAPTURE(s.to_string());
    CHECK((check_fused_variants(s, PoolShape{2, 2}) > 0 || !staff));
  }
  // Other pool geometries, where `best` pools after its plain route: the GEMM (a grid too
  // small for the channel-streaming kernel), C = 1 on the kernel that holds its patch in
  // registers, staged images, and filters above 7x7 with 4 maps (the one-thread kernels only).
  for (const PoolShape pool : {PoolShape{3, 2}, PoolShape{2, 1}, PoolShape{3, 3}}) {
    CAPTURE(pool.to_string());
    for (const ConvShape& s : {ConvShape{2, 5, 3, 31, 17, 3}, ConvShape{3, 50, 1, 28, 28, 5},
                               ConvShape{2, 16, 4, 40, 40, 7}, ConvShape{2, 4, 2, 20, 22, 9}}) {
      CAPTURE(s.to_string());
      CHECK((check_fused_variants(s, pool) > 0 || !staff));
    }
  }
}

TEST_CASE("fused launchers keep fp32 accuracy on inputs far from 1") {
  // The same products from x scaled by 1e6 and k by 1e-6, and the other way: beyond fp16's
  // range and under its normal numbers, which `best`'s fp16 products must scale away.
  const bool staff = fused_expected();
  for (const float scale : {1e6f, 1e-6f}) {
    CAPTURE(scale);
    for (const ConvShape& s : {ConvShape{4, 50, 1, 28, 28, 5}, ConvShape{3, 45, 1, 14, 30, 5}}) {
      CAPTURE(s.to_string());
      CHECK((check_fused_variants(s, PoolShape{2, 2}, scale) > 0 || !staff));
    }
  }
}

TEST_CASE("fused launchers handle many images and a large batch of the project's layer") {
  const bool staff = fused_expected();
  CHECK((check_fused_variants(ConvShape{70000, 2, 1, 6, 7, 3}, PoolShape{2, 2}) > 0 || !staff));
  CHECK((check_fused_variants(ConvShape{1024, 50, 1, 28, 28, 5}, PoolShape{2, 2}) > 0 || !staff));
  // More images than blocks on other sizes (`best`'s fp16 products take several images a block,
  // one staged while another is split): 4, 5 and 7 tiles of windows over a block's 4 warps, and
  // 9 over 3 warps (with at least 4 blocks an SM's worth of images).
  for (const ConvShape& s : {ConvShape{700, 40, 1, 12, 20, 5}, ConvShape{900, 33, 1, 15, 21, 5},
                             ConvShape{600, 57, 1, 18, 20, 5}, ConvShape{1100, 45, 1, 14, 30, 5}}) {
    CAPTURE(s.to_string());
    CHECK((check_fused_variants(s, PoolShape{2, 2}) > 0 || !staff));
  }
}

TEST_CASE("the student's fused stub throws NotImplemented naming its file") {
  for (const convlab::GpuVariant& v : convlab::gpu_variants()) {
    if (v.student_fused == nullptr) continue;
    CAPTURE(v.name);
    const ConvShape s{1, 1, 1, 6, 6, 3};
    DeviceBuffer x(s.x_elements()), k(s.k_elements()), y(9);
    try {
      v.student_fused(y.data(), x.data(), k.data(), s, PoolShape{2, 2}, nullptr);
      CUDA_CHECK(cudaDeviceSynchronize());
      MESSAGE(v.name << ": the team has written the optional fused launcher");
    } catch (const convlab::NotImplemented& e) {
      CHECK(std::string(e.what()).find(std::string(v.student_file)) != std::string::npos);
    }
  }
}

TEST_CASE("GPU variants handle more images than gridDim.y and gridDim.z allow") {
  check_all_variants(ConvShape{70000, 2, 1, 5, 5, 3}, /*with_cpu=*/true);
}

TEST_CASE("GPU variants match cuDNN on sums longer than one chunk of the GEMM's offset table") {
  // 1030 channels, 9270 terms: two chunks, the second adding to y; 64 maps on 67 blocks of
  // pixels (the producer-consumer GEMM on sm_90a), 40 maps on 68 blocks (the mma.sync GEMM)
  check_all_variants(ConvShape{4, 64, 1030, 48, 48, 3}, /*with_cpu=*/false);
  check_all_variants(ConvShape{30, 40, 1030, 19, 19, 3}, /*with_cpu=*/false);
}

TEST_CASE("GPU variants match cuDNN on long sums over few pixels") {
  // Grids that would leave most SMs idle: the sum in parts on blocks of their own, added at the
  // end. Parts bounded by the offset table (9270 terms on 84 pixels), filters loaded as float4s
  // and a short last part (2500 terms), one value at a time, two parts (693 terms); parts cut
  // to the table's length, so one more of them (24563 terms of K = 11 on 50 blocks of pixels)
  check_all_variants(ConvShape{2, 40, 1030, 8, 9, 3}, /*with_cpu=*/true);
  check_all_variants(ConvShape{1, 24, 100, 9, 7, 5}, /*with_cpu=*/true);
  check_all_variants(ConvShape{1, 33, 77, 7, 8, 3}, /*with_cpu=*/true);
  check_all_variants(ConvShape{4, 16, 203, 50, 50, 11}, /*with_cpu=*/false);
}

TEST_CASE("GPU variants match cuDNN on few maps over many images") {
  // Channels with few maps or short sums on grids of 39 to 95 blocks of 256 threads in 2x4
  // tiles: filters in constant memory, in shared memory (K = 7), in constant memory in two
  // launches of maps (3 x 5500 floats), and one map
  check_all_variants(ConvShape{100, 4, 4, 32, 32, 5}, /*with_cpu=*/false);
  check_all_variants(ConvShape{64, 3, 8, 40, 40, 7}, /*with_cpu=*/false);
  check_all_variants(ConvShape{80, 3, 220, 36, 36, 5}, /*with_cpu=*/false);
  check_all_variants(ConvShape{64, 1, 64, 56, 56, 3}, /*with_cpu=*/false);
  // A long sum over 8 maps on a grid of 40 streaming blocks: `best`'s GEMM
  check_all_variants(ConvShape{80, 8, 300, 34, 34, 3}, /*with_cpu=*/false);
  // One map's filter above constant memory, 2 maps on a grid of 39 such blocks: `best`'s
  // one-thread kernel (the GEMM takes such layers from 5 maps on).
  check_all_variants(ConvShape{64, 2, 400, 40, 40, 7}, /*with_cpu=*/false);
}

TEST_CASE("fused launchers match the CPU on few maps over many images") {
  // `best`'s channel-streaming kernel with its pooling epilogue (grids of 39 blocks or more;
  // smaller ones run the GEMM): filters in constant memory, in shared memory (K = 7), and one
  // map; and a 3x3 stride-2 pool after the plain streaming kernel.
  const bool staff = fused_expected();
  for (const ConvShape& s : {ConvShape{100, 4, 4, 32, 32, 5}, ConvShape{64, 3, 8, 40, 40, 7},
                             ConvShape{64, 1, 64, 56, 56, 3}}) {
    CAPTURE(s.to_string());
    CHECK((check_fused_variants(s, PoolShape{2, 2}) > 0 || !staff));
  }
  CHECK((check_fused_variants(ConvShape{100, 4, 4, 32, 32, 5}, PoolShape{3, 2}) > 0 || !staff));
}

namespace {

// An integer from the environment, or `fallback` where it is unset or not a number.
long env_number(const char* name, long fallback) {
  const char* text = std::getenv(name);
  if (text == nullptr || *text == '\0') return fallback;
  char* end = nullptr;
  const long v = std::strtol(text, &end, 10);
  return *end == '\0' ? v : fallback;
}

// A layer drawn at random: each size log-uniform over its range, so that ones, primes and sizes
// past a tile or a route's threshold all come up, and one layer in three with one size
// stretched far (70,000 images, 2,048 maps, 4,096 channels, rows of 3,000). The other sizes
// are halved, then the stretched one, until the layer has at most 5e8 multiply-adds and 2e7
// inputs and outputs (the CPU reference stays quick). The draw uses only mt19937's own output,
// so a seed gives the same shapes everywhere.
ConvShape random_shape(std::mt19937& rng) {
  const auto log_uniform = [&](int lo, int hi) {
    const double u = static_cast<double>(rng()) / 4294967296.0;
    const double v = std::exp(std::log(lo) + u * (std::log(hi + 1.0) - std::log(lo)));
    return std::clamp(static_cast<int>(v), lo, hi);
  };
  const int stretched = static_cast<int>(rng() % 15);  // 0 to 4: B, M, C, H_out, W_out
  const auto size = [&](int which, int hi, int far) {
    return log_uniform(1, which == stretched ? far : hi);
  };
  const int K = log_uniform(1, 13);
  ConvShape s{size(0, 400, 70000), size(1, 300, 2048), size(2, 700, 4096), 0, 0, K};
  s.H = K - 1 + size(3, 80, 3000);
  s.W = K - 1 + size(4, 80, 3000);
  const auto too_large = [&] {
    return static_cast<double>(s.y_elements()) * s.C * s.K * s.K > 5e8 ||
           std::max(s.x_elements(), s.y_elements()) > 20'000'000;
  };
  int* const sizes[] = {&s.B, &s.M, &s.C, &s.H, &s.W};
  for (int round = 0; round < 2; ++round) {
    for (int i = 0; i < 5; ++i) {
      if ((i == stretched) != (round == 1)) continue;
      int& v = *sizes[i];
      const int least = i >= 3 ? K : 1;  // an image keeps at least one output
      while (too_large() && v > least) v = i >= 3 ? (v + K) / 2 : (v + 1) / 2;
    }
  }
  return s;
}

}  // namespace

// What no list of shapes foresees: layers drawn at random, every variant against cuDNN (twice,
// bit for bit), and the fused launchers against the CPU with a random pool where it fits.
TEST_CASE("GPU variants match cuDNN on random shapes, plain and fused") {
  const long count = env_number("CONVLAB_RANDOM_SHAPES", 64);
  const long seed = env_number("CONVLAB_RANDOM_SEED", 408);
  MESSAGE(count << " random shapes from seed " << seed
                << " (CONVLAB_RANDOM_SHAPES and CONVLAB_RANDOM_SEED repeat or widen the sweep)");
  std::mt19937 rng(static_cast<std::uint32_t>(seed));
  const PoolShape pools[] = {{2, 2}, {2, 2}, {3, 2}, {2, 1}, {3, 3}};
  const bool staff = fused_expected();
  for (long i = 0; i < count; ++i) {
    const ConvShape s = random_shape(rng);
    const PoolShape pool = pools[rng() % std::size(pools)];
    CAPTURE(i);
    CAPTURE(s.to_string());
    check_all_variants(s, /*with_cpu=*/false);
    if (pool.size <= s.H_out() && pool.size <= s.W_out()) {
      CAPTURE(pool.to_string());
      CHECK((check_fused_variants(s, pool) > 0 || !staff));
    }
  }
}

TEST_CASE("GPU variants keep working when layers of other sizes run in between") {
  // A launcher that sets its kernel's shared-memory limit only for sizes it has not seen
  // leaves it at the last new size: the staged tf32 kernel with 109 KB, then 76 KB, then 109
  // KB again failed its launch. C > 1 with 8 maps, images of 34x34 and 28x28.
  for (const ConvShape& s : {ConvShape{2, 8, 10, 34, 34, 5}, ConvShape{1, 8, 10, 28, 28, 5},
                             ConvShape{2, 8, 10, 34, 34, 5}}) {
    CAPTURE(s.to_string());
    check_all_variants(s, /*with_cpu=*/true);
  }
}

TEST_CASE("GPU variants match cuDNN on a large batch of the project's layer") {
  check_all_variants(ConvShape{2048, 50, 1, 28, 28, 5}, /*with_cpu=*/false);
  // Enough tiles to fill the GPU several times over (square tiles rather than rows)
  check_all_variants(ConvShape{8000, 8, 1, 28, 28, 5}, /*with_cpu=*/false);
}

// cuDNN of the tf32 and fp16 classes (the comparison rows of convlab run) stays within its
// class's element-wise bound of the CPU reference on shapes with C > 1 and odd sizes; the fp16
// row differs from fp32 cuDNN (its inputs are rounded to half; the tf32 row only allows TF32,
// and cuDNN may still pick an FMA algorithm).
TEST_CASE("cuDNN of each reduced-precision class is within its class's bound") {
  using convlab::Precision;
  const std::pair<Precision, GpuConvCall> classes[] = {
      {Precision::tf32, convlab::conv_forward_cudnn_of(Precision::tf32)},
      {Precision::fp16, convlab::conv_forward_cudnn_of(Precision::fp16)}};
  for (const ConvShape& s : {ConvShape{3, 7, 3, 19, 23, 5}, ConvShape{64, 16, 8, 12, 12, 3}}) {
    Problem problem(s);
    std::vector<float> cpu(static_cast<std::size_t>(s.y_elements()));
    convlab::conv_forward_reference(cpu.data(), problem.x_host.data(), problem.k_host.data(), s);
    const std::vector<float> fp32 = problem.run(&convlab::conv_forward_cudnn);
    for (const auto& [precision, fn] : classes) {
      CAPTURE(convlab::precision_name(precision));
      const std::vector<float> out = problem.run(fn);
      const auto allowance =
          convlab::precision_allowance(precision, s, problem.x_host, problem.k_host);
      const auto r = convlab::test::compare_conv_output(out, cpu, s, allowance);
      CHECK_MESSAGE(r.ok, describe("cuDNN of the class vs CPU reference", s, r));
      if (precision == Precision::fp16) {
        CHECK(std::memcmp(out.data(), fp32.data(), out.size() * sizeof(float)) != 0);
      }
    }
  }
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
    const GpuConvCall fn = convlab::test::launcher_under_test(v);
    if (fn == nullptr) continue;
    problem.y.fill_bytes(0xff);
    const auto t =
        time([&] { fn(problem.y.data(), problem.x.data(), problem.k.data(), s, problem.stream); });
    const auto c = convlab::test::compare_conv_output(problem.y.download(), ref, s,
                                                      class_allowance(v, problem));
    CHECK_MESSAGE(c.ok, describe((std::string(v.name) + " (timed) vs cuDNN").c_str(), s, c));
    std::snprintf(line, sizeof line, "%-17s %8.3f %11.3f %10.2fx\n", std::string(v.name).c_str(),
                  t.first, t.second, cudnn_ms.first / t.first);
    table += line;
  }
  std::snprintf(line, sizeof line, "%-17s %8.3f %11.3f   (%s, workspace %zu bytes)\n", "cudnn",
                cudnn_ms.first, cudnn_ms.second, cudnn.algorithm().c_str(),
                cudnn.workspace_bytes());
  table += line;
  // Fused launchers against cuDNN's conv, tanh and max-pool, both in one call.
  const PoolShape pool{2, 2};
  DeviceBuffer pooled(pool.pooled_elements(s));
  const auto cudnn_fused_ms = time([&] {
    cudnn.forward_tanh_maxpool(pooled.data(), problem.x.data(), problem.k.data(), s, pool,
                               problem.stream);
  });
  const std::vector<float> pooled_ref = pooled.download();
  const ConvShape pooled_layout{s.B, s.M, 1, pool.out(s.H_out()), pool.out(s.W_out()), 1};
  for (const convlab::GpuVariant& v : convlab::gpu_variants()) {
    const GpuConvTanhPoolFn fn = convlab::test::fused_launcher_under_test(v);
    if (fn == nullptr) continue;
    pooled.fill_bytes(0xff);
    const auto t = time(
        [&] { fn(pooled.data(), problem.x.data(), problem.k.data(), s, pool, problem.stream); });
    const auto c = convlab::test::compare_conv_output(pooled.download(), pooled_ref, pooled_layout,
                                                      1e-5, 1e-4);
    CHECK_MESSAGE(c.ok, describe((std::string(v.name) + " fused (timed) vs cuDNN").c_str(), s, c));
    std::snprintf(line, sizeof line, "%-17s %8.3f %11.3f %10.2fx (conv + tanh + max-pool)\n",
                  (std::string(v.name) + " fused").c_str(), t.first, t.second,
                  cudnn_fused_ms.first / t.first);
    table += line;
  }
  std::snprintf(line, sizeof line, "%-17s %8.3f %11.3f   (conv, tanh, max-pool)\n", "cudnn fused",
                cudnn_fused_ms.first, cudnn_fused_ms.second);
  table += line;
  std::printf("\n%s: %s\n%s", "timing", s.to_string().c_str(), table.c_str());
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
}

}  // namespace test_gpu_variants
