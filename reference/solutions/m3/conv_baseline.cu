// Staff solution, m3 baseline: one thread per output element, everything from global memory.
//
// Each 16x16 block computes one 16x16 tile of one output map of one image; each thread sums its
// C*K*K products straight from global memory. This is the starting point every later variant is
// measured against: simple, correct for any shape, and limited by memory traffic (every input
// value is fetched K*K*M times, served mostly by the caches).
#include <cuda_runtime_api.h>

#include <algorithm>
#include <climits>
#include <cstdint>

#include "reference/conv/student_api.hpp"
#include "reference/core/cuda_check.hpp"

namespace convlab::solution {
namespace {

constexpr int kTile = 16;  // output tile edge: 256 threads per block

// grid.x: output tiles of one map; grid.y, grid.z: output maps and images, strided because
// gridDim.y and gridDim.z stop at 65535.
__global__ void conv_baseline_kernel(float* __restrict__ y, const float* __restrict__ x,
                                     const float* __restrict__ k, int B, int M, int C, int H, int W,
                                     int K, int tiles_w) {
  const int H_out = H - K + 1;
  const int W_out = W - K + 1;
  const int h = (static_cast<int>(blockIdx.x) / tiles_w) * kTile + static_cast<int>(threadIdx.y);
  const int w = (static_cast<int>(blockIdx.x) % tiles_w) * kTile + static_cast<int>(threadIdx.x);
  if (h >= H_out || w >= W_out) return;  // no barrier below: early exit is safe
  for (int b = blockIdx.z; b < B; b += gridDim.z) {
    for (int m = blockIdx.y; m < M; m += gridDim.y) {
      float acc = 0.0f;
      for (int c = 0; c < C; ++c) {
        const float* xc = x + (std::int64_t{b} * C + c) * H * W;
        const float* kc = k + (std::int64_t{m} * C + c) * K * K;
        for (int p = 0; p < K; ++p) {
          for (int q = 0; q < K; ++q) {
            acc += xc[std::int64_t{h + p} * W + (w + q)] * kc[p * K + q];
          }
        }
      }
      y[((std::int64_t{b} * M + m) * H_out + h) * W_out + w] = acc;
    }
  }
}

}  // namespace

void conv_baseline(float* y, const float* x, const float* k, const ConvShape& shape,
                   cudaStream_t stream) {
  shape.validate();
  const int tiles_w = ceil_div(shape.W_out(), kTile);
  const std::int64_t tiles = std::int64_t{ceil_div(shape.H_out(), kTile)} * tiles_w;
  if (tiles > INT_MAX) throw Error("output map too large for conv_baseline: " + shape.to_string());
  const dim3 block(kTile, kTile);
  const dim3 grid(static_cast<unsigned>(tiles), static_cast<unsigned>(std::min(shape.M, 65535)),
                  static_cast<unsigned>(std::min(shape.B, 65535)));
  conv_baseline_kernel<<<grid, block, 0, stream>>>(y, x, k, shape.B, shape.M, shape.C, shape.H,
                                                   shape.W, shape.K, tiles_w);
  CUDA_CHECK_LAUNCH();
}

}  // namespace convlab::solution
