// student/final/5_best.cu: the best variant.
// Idea: the team's combination of what helped.
//
// Your best kernel: combine what helped in the earlier variants (and anything else you find:
// register blocking, several outputs per thread, several images per block) into the fastest
// kernel you can make. It must stay correct for every shape, not only the project's layer.
//
// The harness calls conv_best(y, x, k, shape, stream) with DEVICE pointers:
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
// A possible skeleton. Keep kernels and helpers in an anonymous namespace, as here: every
// variant file is compiled into one library, so a kernel named the same in two files (a variant
// that starts as a copy of your baseline, say) would be defined twice and the build would fail
// to link; inside `namespace { }` each file's kernel is its own.
//
// namespace {
// __global__ void conv_forward_kernel(float* y, const float* x, const float* k, int B, int M,
//                                     int C, int H, int W, int K) {
//   // which output element(s) this thread computes, from blockIdx and threadIdx
//   // if it is outside the output, return
//   // acc = sum over c, p, q of x[b][c][h+p][w+q] * k[m][c][p][q]; then y[b][m][h][w] = acc
// }
// }  // namespace
//
// Optional, once conv_best is fast: conv_tanh_maxpool_best(y, x, k, shape, pool, stream) computes
// the conv layer together with the tanh and the max-pool that follow it in the network,
//   y[b][m][i][j] = max over 0 <= u, v < pool.size of
//                   tanh(conv[b][m][i*pool.stride + u][j*pool.stride + v])
// into y[B][M][pool.out(H-K+1)][pool.out(W-K+1)], so the full-size convolution output never
// goes to memory. While it throws NotImplemented, as below, the harness runs conv_best and then
// its own tanh and max-pool. Once it is implemented, the Op Time of such a layer is the time of
// this fused call (`convlab run` says so; `--no-fuse` times conv_best alone).
//
// A best kernel of several files keeps these two entry points here and its other .cu and .cuh
// files in student/final/best/ (the handout says how).
//
// Read the handout first: milestones/final/README.md, section '5. Your best kernel'.
#include <cuda_runtime_api.h>

#include "reference/conv/student_api.hpp"
#include "reference/core/cuda_check.hpp"
#include "reference/core/error.hpp"

namespace convlab::student {

void conv_best([[maybe_unused]] float* y, [[maybe_unused]] const float* x,
               [[maybe_unused]] const float* k, [[maybe_unused]] const ConvShape& shape,
               [[maybe_unused]] cudaStream_t stream) {
  // Replace this line with your launch.
  convlab::not_implemented("the best GPU convolution", "student/final/5_best.cu",
                           "milestones/final/README.md, section '5. Your best kernel'");
}

void conv_tanh_maxpool_best([[maybe_unused]] float* y, [[maybe_unused]] const float* x,
                            [[maybe_unused]] const float* k,
                            [[maybe_unused]] const ConvShape& shape,
                            [[maybe_unused]] const PoolShape& pool,
                            [[maybe_unused]] cudaStream_t stream) {
  // Optional. Replace this line with your fused launch (or leave it: conv_best is used).
  convlab::not_implemented("the fused conv + tanh + max-pool of the best kernel (optional)",
                           "student/final/5_best.cu",
                           "milestones/final/README.md, section '5. Your best kernel'");
}

}  // namespace convlab::student
