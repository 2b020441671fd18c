// The best kernel, fused route conv_then_pool: conv + tanh + max-pool, any pool, for the shapes
// no route pools in its epilogue (a product on the tensor cores, or a pool other than 2x2
// stride 2): the plain routes (run_plain) into a workspace from the stream-ordered pool, then
// one kernel takes each window's maximum and its tanh. Far faster than the one-thread fused
// kernel wherever a plain route but the one-thread kernel takes the shape.
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

// tanh and max-pool over a conv output `full` (B x M planes of H_out x W_out): one thread per
// pooled value, grid-stride; the max first, then one tanh (tanh is increasing), as the fused
// kernels do.
__global__ void conv_best_tanh_maxpool_kernel(float* __restrict__ y, const float* __restrict__ full,
                                              int H_out, int W_out, int pool, int stride, int out_h,
                                              int out_w, std::int64_t total) {
  for (std::int64_t i = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x; i < total;
       i += std::int64_t{gridDim.x} * blockDim.x) {
    const int pw = static_cast<int>(i % out_w);
    const int ph = static_cast<int>(i / out_w % out_h);
    const std::int64_t plane = i / (std::int64_t{out_w} * out_h);
    const float* window = full + (plane * H_out + ph * stride) * W_out + pw * stride;
    float best = -INFINITY;
    for (int u = 0; u < pool; ++u) {
      for (int v = 0; v < pool; ++v) best = fmaxf(best, __ldg(window + u * W_out + v));
    }
    y[i] = tanh_fast(best);
  }
}

}  // namespace

// conv + tanh + max-pool as the plain route into a workspace from the stream-ordered pool,
// then tanh and max-pool over it: for shapes whose plain route is a product on the tensor
// cores, and pools other than 2x2 stride 2 (which the fused kernels do not have). False
// (nothing launched) where only the one-thread kernels are left (the fused one then computes
// each output once and writes no conv output) or the workspace cannot be had.
bool run_conv_then_pool(float* y, const float* x, const float* k, const ConvShape& s,
                        const PoolShape& pool, cudaStream_t stream) {
  auto* full = static_cast<float*>(
      pool_workspace(static_cast<std::size_t>(s.y_elements()) * sizeof(float), stream));
  if (full == nullptr) return false;
  const bool launched = run_plain(full, x, k, s, stream);
  if (launched) {
    const std::int64_t total = pool.pooled_elements(s);
    conv_best_tanh_maxpool_kernel<<<grid_stride_blocks(total, 256, kFallbackMaxBlocks), 256, 0,
                                    stream>>>(y, full, s.H_out(), s.W_out(), pool.size, pool.stride,
                                              pool.out(s.H_out()), pool.out(s.W_out()), total);
    CUDA_CHECK_LAUNCH();
  }
  CUDA_CHECK(cudaFreeAsync(full, stream));
  return launched;
}

}  // namespace convlab::solution::best
