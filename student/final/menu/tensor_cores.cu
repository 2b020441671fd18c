// student/final/menu/tensor_cores.cu: the tensor_cores variant.
// Idea: the product on tensor cores through WMMA, TF32 inputs, float32 accumulation.
//
// Tensor cores: the implicit product with its inner loop on WMMA fragments
// (nvcuda::wmma, <mma.h>): m16n16k8 with wmma::precision::tf32 inputs, rounded with
// wmma::__float_to_tf32, and float accumulators. Fragment pointers must be 32-byte aligned and
// leading dimensions multiples of 16 bytes. This variant is in the tf32 class: it is judged by
// the class's tolerance and rule (docs/grader.md, "Precision classes"), not the exact count.
//
// The harness calls conv_tensor_cores(y, x, k, shape, stream) with DEVICE pointers:
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
// Optional: conv_tanh_maxpool_tensor_cores(y, x, k, shape, pool, stream) computes the conv
// layer with the tanh and max-pool after it, as conv_tanh_maxpool_best does (its comment in
// student/final/5_best.cu gives the formula), so only the pooled quarter of y is written.
// While it throws NotImplemented, as below, the harness runs conv_tensor_cores and then its own
// tanh and max-pool.
//
// Read the handout first: milestones/final/README.md, section 'Menu: tensor cores'.
#include <cuda_runtime_api.h>

#include "reference/conv/student_api.hpp"
#include "reference/core/cuda_check.hpp"
#include "reference/core/error.hpp"

namespace convlab::student {

void conv_tensor_cores([[maybe_unused]] float* y, [[maybe_unused]] const float* x,
                       [[maybe_unused]] const float* k, [[maybe_unused]] const ConvShape& shape,
                       [[maybe_unused]] cudaStream_t stream) {
  // Replace this line with your launch.
  convlab::not_implemented("the tensor_cores GPU convolution", "student/final/menu/tensor_cores.cu",
                           "milestones/final/README.md, section 'Menu: tensor cores'");
}

void conv_tanh_maxpool_tensor_cores([[maybe_unused]] float* y, [[maybe_unused]] const float* x,
                                    [[maybe_unused]] const float* k,
                                    [[maybe_unused]] const ConvShape& shape,
                                    [[maybe_unused]] const PoolShape& pool,
                                    [[maybe_unused]] cudaStream_t stream) {
  // Optional. Replace this line with your fused launch (or leave it: conv_tensor_cores is used).
  convlab::not_implemented("the fused conv + tanh + max-pool of the tensor_cores kernel (optional)",
                           "student/final/menu/tensor_cores.cu",
                           "milestones/final/README.md, section 'Menu: tensor cores'");
}

}  // namespace convlab::student
