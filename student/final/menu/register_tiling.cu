// student/final/menu/register_tiling.cu: the register_tiling variant.
// Idea: joint register and shared-memory tiling: each thread computes a small tile of outputs.
//
// Register tiling: the implicit product with larger block tiles (say 64x64) where each thread
// computes a small tile of outputs (say 4x4) held in registers: per step of the sum it reads 4
// values of W and 4 of X from shared memory and does 16 multiply-adds with them. Make the tile
// sizes template parameters so you can sweep them.
//
// The harness calls conv_register_tiling(y, x, k, shape, stream) with DEVICE pointers:
//   x[B][C][H][W] input, k[M][C][K][K] filters, y[B][M][H-K+1][W-K+1] output (NCHW, float32),
//   y[b][m][h][w] = sum over c, p, q of x[b][c][h+p][w+q] * k[m][c][p][q]
// (valid cross-correlation, stride 1, no padding, no bias). Enqueue your kernel(s) on `stream`
// and return: the harness synchronises and times the call. Check every launch with
// CUDA_CHECK_LAUNCH() (reference/core/cuda_check.hpp, which also has ceil_div).
//
// Bounds your code must handle: sizes that are not multiples of your tile, any C and K (K up to
// at least 11), batches up to B = 10000 and beyond (gridDim.y and gridDim.z stop at 65535: loop
// or fold the batch), and flat indices above 2^31 (compute them in int64_t).
//
// Keep kernels and helpers in an anonymous namespace (`namespace { }`): every variant file is
// compiled into one library, and a kernel named the same in two files would be defined twice.
//
// Read the handout first: milestones/final/README.md, section 'Menu: register tiling'.
#include <cuda_runtime_api.h>

#include <span>

#include "reference/conv/student_api.hpp"
#include "reference/core/cuda_check.hpp"
#include "reference/core/error.hpp"

namespace convlab::student {

void conv_register_tiling([[maybe_unused]] float* y, [[maybe_unused]] const float* x,
                          [[maybe_unused]] const float* k, [[maybe_unused]] const ConvShape& shape,
                          [[maybe_unused]] cudaStream_t stream) {
  // Replace this line with your launch.
  convlab::not_implemented("the register_tiling GPU convolution",
                           "student/final/menu/register_tiling.cu",
                           "milestones/final/README.md, section 'Menu: register tiling'");
}

std::span<const SweepPoint> conv_register_tiling_sweep() {
  // Your parameter grid, once you sweep: one launcher per point, each your kernel compiled
  // for one choice of its template parameters, for example
  //   static const SweepPoint points[] = {{"BM=64 BN=64", &launch<64, 64>}, ...};
  //   return points;
  // `convlab sweep --variant register_tiling` then checks and times every point.
  return {};
}

}  // namespace convlab::student
