// student/final/2_threads_1024.cu: the threads_1024 variant.
// Idea: one 1-D block of 1024 threads mapped onto the output tile.
//
// One block of 1024 threads: launch 1-D blocks of 1024 threads, one block per (image, group of
// output maps), and map thread t onto output pixel h*W_out + w of a map (several maps per block
// when a map has fewer than 1024 pixels; a loop when it has more).
//
// The harness calls conv_threads_1024(y, x, k, shape, stream) with DEVICE pointers:
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
// Read the handout first: milestones/final/README.md, section '2. One block of 1024 threads'.
#include <cuda_runtime_api.h>

#include "reference/conv/student_api.hpp"
#include "reference/core/cuda_check.hpp"
#include "reference/core/error.hpp"

namespace convlab::student {

void conv_threads_1024([[maybe_unused]] float* y, [[maybe_unused]] const float* x,
                       [[maybe_unused]] const float* k, [[maybe_unused]] const ConvShape& shape,
                       [[maybe_unused]] cudaStream_t stream) {
  // Replace this line with your launch.
  convlab::not_implemented("the threads_1024 GPU convolution", "student/final/2_threads_1024.cu",
                           "milestones/final/README.md, section '2. One block of 1024 threads'");
}

}  // namespace convlab::student
