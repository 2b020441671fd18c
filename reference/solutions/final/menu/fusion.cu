// Staff solution, menu: conv + tanh + max-pool in one kernel.
//
// conv_tanh_maxpool_fusion computes each pooled output in one thread: the conv outputs of its
// pool window (2x2 in the project's networks), tanh of each, their maximum; only the pooled
// tensor is written. The conv outputs never reach global memory, and the separate tanh and
// max-pool kernels (each a full read and write of the conv output) disappear. The plain
// launcher, for conv layers that no tanh and pool follow, is the direct convolution with the
// same per-output sum, one thread per output.
// Why: the later editions' "kernel fusion" point. In ece408's first layer the conv output is
// 4 times the pooled tensor and is written once and read twice more unfused.
// Expected effect: nsys shows one kernel where there were three; DRAM bytes written fall by
// the pool's factor (ncu: dram__bytes_write.sum). `convlab run` times the fused call as the
// layer's Op Time and says so under the table.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>

#include "reference/conv/student_api.hpp"
#include "reference/core/ceil_div.hpp"
#include "reference/core/cuda_check.hpp"

namespace convlab::solution {
namespace {

// conv[b][m][h][w], summed in the (c, p, q) order of the reference; xb = x[b], km = k[m].
__device__ float conv_at(const float* __restrict__ xb, const float* __restrict__ km,
                         const ConvShape& s, int h, int w) {
  float acc = 0.0f;
  for (int c = 0; c < s.C; ++c) {
    for (int p = 0; p < s.K; ++p) {
      for (int q = 0; q < s.K; ++q) {
        acc += __ldg(xb + (std::int64_t{c} * s.H + h + p) * s.W + w + q) *
               __ldg(km + (c * s.K + p) * s.K + q);
      }
    }
  }
  return acc;
}

// One thread per element of a [B][M][rows][cols] output (grid-stride): `element` computes it
// from x[b], k[m] and (row, col).
template <typename Element>
__global__ void per_output_kernel(float* __restrict__ y, const float* __restrict__ x,
                                  const float* __restrict__ k, const ConvShape s, int rows,
                                  int cols, Element element) {
  const std::int64_t total = std::int64_t{s.B} * s.M * rows * cols;
  for (std::int64_t i = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x; i < total;
       i += std::int64_t{gridDim.x} * blockDim.x) {
    const int col = static_cast<int>(i % cols);
    const int row = static_cast<int>(i / cols % rows);
    const int m = static_cast<int>(i / (std::int64_t{cols} * rows) % s.M);
    const std::int64_t b = i / (std::int64_t{cols} * rows * s.M);
    y[i] = element(x + b * s.C * s.H * s.W, k + std::int64_t{m} * s.C * s.K * s.K, row, col);
  }
}

// The plain convolution's element.
struct ConvElement {
  ConvShape s;
  __device__ float operator()(const float* xb, const float* km, int h, int w) const {
    return conv_at(xb, km, s, h, w);
  }
};

// The fused element: the max over the pool window of tanh(conv).
struct TanhMaxPoolElement {
  ConvShape s;
  PoolShape pool;
  __device__ float operator()(const float* xb, const float* km, int ph, int pw) const {
    float best = 0.0f;
    for (int u = 0; u < pool.size; ++u) {
      for (int v = 0; v < pool.size; ++v) {
        const float t = tanhf(conv_at(xb, km, s, ph * pool.stride + u, pw * pool.stride + v));
        best = u == 0 && v == 0 ? t : fmaxf(best, t);
      }
    }
    return best;
  }
};

template <typename Element>
void launch_per_output(float* y, const float* x, const float* k, const ConvShape& s, int rows,
                       int cols, Element element, cudaStream_t stream) {
  const std::int64_t total = std::int64_t{s.B} * s.M * rows * cols;
  if (total == 0) return;
  constexpr int kThreads = 256;
  const auto blocks = static_cast<unsigned>(
      std::min<std::int64_t>(ceil_div<std::int64_t>(total, kThreads), std::int64_t{1} << 20));
  per_output_kernel<<<blocks, kThreads, 0, stream>>>(y, x, k, s, rows, cols, element);
  CUDA_CHECK_LAUNCH();
}

}  // namespace

void conv_fusion(float* y, const float* x, const float* k, const ConvShape& shape,
                 cudaStream_t stream) {
  launch_per_output(y, x, k, shape, shape.H_out(), shape.W_out(), ConvElement{shape}, stream);
}

void conv_tanh_maxpool_fusion(float* y, const float* x, const float* k, const ConvShape& shape,
                              const PoolShape& pool, cudaStream_t stream) {
  launch_per_output(y, x, k, shape, pool.out(shape.H_out()), pool.out(shape.W_out()),
                    TanhMaxPoolElement{shape, pool}, stream);
}

}  // namespace convlab::solution
