// student/final/menu/fusion.cu: the fusion variant.
// Idea: conv, tanh and 2x2 max-pool in one kernel; the conv output is never stored.
//
// Kernel fusion: conv_tanh_maxpool_fusion computes, in one kernel, the conv layer together
// with the tanh and the max-pool that follow it:
//   y[b][m][i][j] = max over 0 <= u, v < pool.size of
//                   tanh(conv[b][m][i*pool.stride + u][j*pool.stride + v])
// into y[B][M][pool.out(H-K+1)][pool.out(W-K+1)]; the full-size conv output never goes to
// memory. conv_fusion is the plain convolution, for layers that no tanh and pool follow (any of
// your correct kernels will do).
//
// The harness calls conv_fusion(y, x, k, shape, stream) with DEVICE pointers:
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
// Read the handout first: milestones/final/README.md, section 'Menu: kernel fusion'.
#include <cuda_runtime_api.h>

#include "reference/conv/student_api.hpp"
#include "reference/core/cuda_check.hpp"
#include "reference/core/error.hpp"

namespace convlab::student {

void conv_fusion([[maybe_unused]] float* y, [[maybe_unused]] const float* x,
                 [[maybe_unused]] const float* k, [[maybe_unused]] const ConvShape& shape,
                 [[maybe_unused]] cudaStream_t stream) {
  // Replace this line with your launch.
  convlab::not_implemented("the fusion GPU convolution", "student/final/menu/fusion.cu",
                           "milestones/final/README.md, section 'Menu: kernel fusion'");
}

void conv_tanh_maxpool_fusion([[maybe_unused]] float* y, [[maybe_unused]] const float* x,
                              [[maybe_unused]] const float* k,
                              [[maybe_unused]] const ConvShape& shape,
                              [[maybe_unused]] const PoolShape& pool,
                              [[maybe_unused]] cudaStream_t stream) {
  // Replace this line with your fused launch.
  convlab::not_implemented("the fused conv + tanh + max-pool of the fusion variant",
                           "student/final/menu/fusion.cu",
                           "milestones/final/README.md, section 'Menu: kernel fusion'");
}

}  // namespace convlab::student
