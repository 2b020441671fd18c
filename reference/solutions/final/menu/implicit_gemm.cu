// Staff solution, menu: the matrix product without the unrolled matrix (implicit GEMM).
//
// unroll_gemm's 16x16-tiled product, one output per thread, but each tile of X is loaded
// straight from x: X[r][j] is x[b][c][h+p][w+q] for row r = (c, p, q) and column j = (b, h, w),
// so the unrolling happens on the way into shared memory and X is never stored. Each thread
// decodes its column once for the whole sum, its rows per step.
// Why: unrolling in DRAM costs K*K times the input's traffic; folding it into the product's
// loads costs only index arithmetic. cuDNN's IMPLICIT_GEMM and CUTLASS's convolutions work so.
// Expected effect: one kernel instead of two, no workspace, and DRAM traffic close to the
// compulsory bytes (ncu: dram__bytes_read.sum against x's size).
#include <cuda_runtime_api.h>

#include <cstdint>

#include "reference/conv/student_api.hpp"
#include "reference/core/ceil_div.hpp"
#include "reference/core/cuda_check.hpp"

namespace convlab::solution {
namespace {

// y[b][m][h][w] for column j = (b, h, w) of the product, row m: kTile x kTile threads, each
// one output.
template <int kTile>
__global__ void implicit_gemm_kernel(float* __restrict__ y, const float* __restrict__ x,
                                     const float* __restrict__ k, const ConvShape s) {
  __shared__ float k_tile[kTile][kTile];
  __shared__ float x_tile[kTile][kTile];
  const int tx = static_cast<int>(threadIdx.x), ty = static_cast<int>(threadIdx.y);
  const int W_out = s.W_out(), P = s.H_out() * W_out, kk = s.K * s.K, Kd = s.C * kk;
  const int m = static_cast<int>(blockIdx.y) * kTile + ty;
  const std::int64_t j = std::int64_t{blockIdx.x} * kTile + tx;
  const bool col_ok = j < std::int64_t{s.B} * P;
  const std::int64_t b = col_ok ? j / P : 0;
  const int p = col_ok ? static_cast<int>(j - b * P) : 0;
  // x[b][0][h][w]: the column's corner; row r adds c*H*W + p'*W + q'.
  const float* __restrict__ corner = x + (b * s.C * s.H + p / W_out) * s.W + p % W_out;
  float acc = 0.0f;
  for (int r0 = 0; r0 < Kd; r0 += kTile) {
    const int k_row = static_cast<int>(blockIdx.y) * kTile + ty, k_col = r0 + tx;
    k_tile[ty][tx] = k_row < s.M && k_col < Kd ? k[std::int64_t{k_row} * Kd + k_col] : 0.0f;
    const int r = r0 + ty;
    float v = 0.0f;
    if (col_ok && r < Kd) {
      const int c = r / kk, pq = r - c * kk;
      v = corner[(std::int64_t{c} * s.H + pq / s.K) * s.W + pq % s.K];
    }
    x_tile[ty][tx] = v;
    __syncthreads();
#pragma unroll
    for (int t = 0; t < kTile; ++t) acc += k_tile[ty][t] * x_tile[t][tx];
    __syncthreads();
  }
  if (m < s.M && col_ok) y[(b * s.M + m) * P + p] = acc;
}

template <int kTile>
void launch_tile(float* y, const float* x, const float* k, const ConvShape& shape,
                 cudaStream_t stream) {
  const std::int64_t cols = std::int64_t{shape.B} * shape.H_out() * shape.W_out();
  const dim3 grid(static_cast<unsigned>(ceil_div<std::int64_t>(cols, kTile)),
                  static_cast<unsigned>(ceil_div(shape.M, kTile)));
  implicit_gemm_kernel<kTile><<<grid, dim3(kTile, kTile), 0, stream>>>(y, x, k, shape);
  CUDA_CHECK_LAUNCH();
}

// The tile edge is the sweep's one parameter: 64, 256 or 1024 threads per block.
constexpr SweepPoint kGrid[] = {
    {"TILE=8 (64 threads)", &launch_tile<8>},
    {"TILE=16 (256 threads)", &launch_tile<16>},
    {"TILE=32 (1024 threads)", &launch_tile<32>},
};

}  // namespace

void conv_implicit_gemm(float* y, const float* x, const float* k, const ConvShape& shape,
                        cudaStream_t stream) {
  launch_tile<16>(y, x, k, shape, stream);
}

std::span<const SweepPoint> conv_implicit_gemm_sweep() {
  return kGrid;
}

}  // namespace convlab::solution
