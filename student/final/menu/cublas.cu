// student/final/menu/cublas.cu: the cublas variant.
// Idea: the input unrolled into a workspace, then cuBLAS SGEMM (the one variant that may link
// cuBLAS).
//
// cuBLAS: unroll the input into `workspace` as in unroll_gemm, then let cublasSgemm (or
// cublasSgemmStridedBatched, one product per image) multiply. cuBLAS is column-major: ask for the
// transposed product. Bind the handle to `stream` (cublasSetStream) and keep the default math
// mode (no TF32: this variant is in the fp32 class). This is the only file that may call cuBLAS.
// conv_cublas_workspace(shape) returns the bytes of workspace you need (allocated by the harness
// before any timed call).
//
// The harness calls conv_cublas(y, x, k, shape, workspace, stream) with DEVICE pointers:
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
// Read the handout first: milestones/final/README.md, section 'Menu: cuBLAS'.
#include <cuda_runtime_api.h>

#include <cstddef>

#include "reference/conv/student_api.hpp"
#include "reference/core/cuda_check.hpp"
#include "reference/core/error.hpp"

namespace convlab::student {

std::size_t conv_cublas_workspace([[maybe_unused]] const ConvShape& shape) {
  // Replace with the bytes your launcher needs for `shape`.
  return 0;
}

void conv_cublas([[maybe_unused]] float* y, [[maybe_unused]] const float* x,
                 [[maybe_unused]] const float* k, [[maybe_unused]] const ConvShape& shape,
                 [[maybe_unused]] void* workspace, [[maybe_unused]] cudaStream_t stream) {
  // Replace this line with your launch.
  convlab::not_implemented("the cublas GPU convolution", "student/final/menu/cublas.cu",
                           "milestones/final/README.md, section 'Menu: cuBLAS'");
}

}  // namespace convlab::student
