// The best kernel, the fallbacks: one thread per output (conv_best) or per pooled output
// (conv_tanh_maxpool_best), for the shapes no other route takes (K > 7 with at most 4 maps, or
// with C = 1 on a grid that fills at most half the SMs; one map's filter above 64 KB), so that
// the launchers are correct for every shape. Few outputs with a long sum split the channels
// into parts on blocks of their own (run_channel_parts).
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "fast_tanh.cuh"
#include "reference/conv/student_api.hpp"
#include "reference/core/cuda_check.hpp"
#include "reference/core/cuda_launch.cuh"
#include "routes.cuh"
#include "shared.cuh"

namespace convlab::solution::best {
namespace {

constexpr int kFallbackBlocksPerSm = 8;  // of 256 threads: a full SM

// Every other shape: one thread per output, grid-stride over all of y; a split sum's part
// (blockIdx.y) sums channels [c_begin, c_end) into its own copy of y.
__global__ void conv_best_fallback_kernel(float* __restrict__ y, const float* __restrict__ x,
                                          const float* __restrict__ k, int M, int C, int H, int W,
                                          int K, std::int64_t total, int c_part,
                                          std::int64_t part_floats) {
  const int c_begin = static_cast<int>(blockIdx.y) * c_part, c_end = min(C, c_begin + c_part);
  y += blockIdx.y * part_floats;
  const int H_out = H - K + 1;
  const int W_out = W - K + 1;
  for (std::int64_t i = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x; i < total;
       i += std::int64_t{gridDim.x} * blockDim.x) {
    const int w = static_cast<int>(i % W_out);
    const int h = static_cast<int>(i / W_out % H_out);
    const int m = static_cast<int>(i / (std::int64_t{W_out} * H_out) % M);
    const std::int64_t b = i / (std::int64_t{W_out} * H_out * M);
    float acc = 0.0f;
    for (int c = c_begin; c < c_end; ++c) {
      const float* xc = x + ((b * C + c) * H + h) * W + w;
      const float* kc = k + (std::int64_t{m} * C + c) * K * K;
      for (int p = 0; p < K; ++p) {
        for (int q = 0; q < K; ++q)
          acc += __ldg(xc + std::int64_t{p} * W + q) * __ldg(kc + p * K + q);
      }
    }
    y[i] = acc;
  }
}

// Fused, every other shape or pool: one thread per pooled output, grid-stride over all of y.
__global__ void conv_tanh_maxpool_best_fallback_kernel(float* __restrict__ y,
                                                       const float* __restrict__ x,
                                                       const float* __restrict__ k, int M, int C,
                                                       int H, int W, int K, int pool, int stride,
                                                       int out_h, int out_w, std::int64_t total) {
  for (std::int64_t i = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x; i < total;
       i += std::int64_t{gridDim.x} * blockDim.x) {
    const int pw = static_cast<int>(i % out_w);
    const int ph = static_cast<int>(i / out_w % out_h);
    const int m = static_cast<int>(i / (std::int64_t{out_w} * out_h) % M);
    const std::int64_t b = i / (std::int64_t{out_w} * out_h * M);
    float best = -INFINITY;
    for (int u = 0; u < pool; ++u) {
      for (int v = 0; v < pool; ++v) {
        const int h = ph * stride + u, w = pw * stride + v;
        float acc = 0.0f;
        for (int c = 0; c < C; ++c) {
          const float* xc = x + ((b * C + c) * H + h) * W + w;
          const float* kc = k + (std::int64_t{m} * C + c) * K * K;
          for (int p = 0; p < K; ++p) {
            for (int q = 0; q < K; ++q)
              acc += __ldg(xc + std::int64_t{p} * W + q) * __ldg(kc + p * K + q);
          }
        }
        best = fmaxf(best, acc);
      }
    }
    y[i] = tanh_fast(best);
  }
}

}  // namespace

void run_fallback(float* y, const float* x, const float* k, const ConvShape& shape,
                  cudaStream_t stream) {
  const std::int64_t total = shape.y_elements();
  const unsigned blocks = grid_stride_blocks(total, 256, kFallbackMaxBlocks);
  const auto launch = [&](float* out, int parts, int c_part, std::int64_t stride) {
    conv_best_fallback_kernel<<<dim3(blocks, parts), 256, 0, stream>>>(
        out, x, k, shape.M, shape.C, shape.H, shape.W, shape.K, total, c_part, stride);
    CUDA_CHECK_LAUNCH();
  };
  // Few outputs with a long sum (K > 7, at most 4 maps): the channels in parts.
  const int parts = channel_parts(shape.C, shape.K, blocks, kFallbackBlocksPerSm);
  if (parts > 1 && run_channel_parts(y, total, shape.C, parts, stream, launch)) return;
  launch(y, 1, shape.C, 0);
}

void run_fallback_pooled(float* y, const float* x, const float* k, const ConvShape& shape,
                         const PoolShape& pool, cudaStream_t stream) {
  const std::int64_t total = pool.pooled_elements(shape);
  conv_tanh_maxpool_best_fallback_kernel<<<grid_stride_blocks(total, 256, kFallbackMaxBlocks), 256,
                                           0, stream>>>(
      y, x, k, shape.M, shape.C, shape.H, shape.W, shape.K, pool.size, pool.stride,
      pool.out(shape.H_out()), pool.out(shape.W_out()), total);
  CUDA_CHECK_LAUNCH();
}

}  // namespace convlab::solution::best
