/// @file
/// @brief The entry points a team writes. The harness calls these and times them.
///
/// Every convolution computes, for x[B][C][H][W] and k[M][C][K][K]:
///
///     y[b][m][h][w] = sum_{c,p,q} x[b][c][h+p][w+q] * k[m][c][p][q]
///
/// into y[B][M][H-K+1][W-K+1] (valid cross-correlation, stride 1, no padding, no bias).
/// The staff solutions (namespace convlab::solution) have the same signatures.
#pragma once

#include "reference/conv/conv_shape.hpp"

#ifdef CONVLAB_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

/// Everything convlab defines: the framework, the team's code (convlab::student) and the staff
/// solutions (convlab::solution).
namespace convlab {

/// Milestone m2's CPU convolution; all pointers are host memory.
using CpuConvFn = void (*)(float* y, const float* x, const float* k, const ConvShape& shape);

/// The code a team writes, in the files of student/. The harness calls these entry points and
/// times them (Op Time).
namespace student {
/// Milestone m2: the CPU convolution, in student/m2/conv_cpu.cpp.
void conv_forward_cpu(float* y, const float* x, const float* k, const ConvShape& shape);
}  // namespace student

/// The staff solutions of every student entry point (reference/solutions/, left out of the
/// student release). `convlab run --impl solution` runs them.
namespace solution {
/// Staff solution of student::conv_forward_cpu.
void conv_forward_cpu(float* y, const float* x, const float* k, const ConvShape& shape);
}  // namespace solution

#ifdef CONVLAB_HAVE_CUDA
/// The one signature of every GPU variant. x, k and y are device pointers; the launcher
/// enqueues its work on `stream` and may return before it finishes (the harness synchronises).
using GpuConvFn = void (*)(float* y, const float* x, const float* k, const ConvShape& shape,
                           cudaStream_t stream);

/// The optional fused signature (GpuVariant::student_fused): writes
/// y = maxpool(tanh(conv(x, k))), the conv layer, the tanh after it and the max-pool after
/// that in one call, without storing the convolution's output. x and k are as for GpuConvFn;
/// y is y[B][M][pool.out(H-K+1)][pool.out(W-K+1)]. Device pointers; enqueue on `stream`.
using GpuConvTanhPoolFn = void (*)(float* y, const float* x, const float* k, const ConvShape& shape,
                                   const PoolShape& pool, cudaStream_t stream);

/// Declares the launcher conv_<id> of one line of gpu_variants.def (expanded once in namespace
/// student, once in namespace solution).
#define CONVLAB_GPU_VARIANT(id, milestone, file, handout, idea)                    \
  void conv_##id(float* y, const float* x, const float* k, const ConvShape& shape, \
                 cudaStream_t stream);
/// Declares the fused launcher conv_tanh_maxpool_<id> of a variant that offers one.
#define CONVLAB_GPU_FUSED_VARIANT(id)                                                           \
  void conv_tanh_maxpool_##id(float* y, const float* x, const float* k, const ConvShape& shape, \
                              const PoolShape& pool, cudaStream_t stream);
namespace student {
#include "reference/conv/gpu_variants.def"
}  // namespace student
namespace solution {
#include "reference/conv/gpu_variants.def"
}  // namespace solution
#undef CONVLAB_GPU_FUSED_VARIANT
#undef CONVLAB_GPU_VARIANT

// clang-format off
/// @fn void convlab::student::conv_baseline(float* y, const float* x, const float* k, const ConvShape& shape, cudaStream_t stream)
/// @brief Milestone m3: the baseline GPU convolution, one thread per output element, every
/// operand from global memory.
///
/// Written in student/m3/conv_baseline.cu; handout: milestones/m3/README.md, "What you write".
/// Signature of every GPU variant (GpuConvFn): x, k and y are
/// device pointers; enqueue the work on `stream` and return.

/// @fn void convlab::student::conv_shared_tiling(float* y, const float* x, const float* k, const ConvShape& shape, cudaStream_t stream)
/// @brief Final, variant 1: the input tile and the filters staged in shared memory.
///
/// Written in student/final/1_shared_tiling.cu; handout: milestones/final/README.md, "1.
/// Shared-memory tiling". Signature of every GPU variant (GpuConvFn): x, k and y are
/// device pointers; enqueue the work on `stream` and return.

/// @fn void convlab::student::conv_threads_1024(float* y, const float* x, const float* k, const ConvShape& shape, cudaStream_t stream)
/// @brief Final, variant 2: one-dimensional blocks of 1024 threads mapped onto the output.
///
/// Written in student/final/2_threads_1024.cu; handout: milestones/final/README.md, "2. One
/// block of 1024 threads". Signature of every GPU variant (GpuConvFn): x, k and y are
/// device pointers; enqueue the work on `stream` and return.

/// @fn void convlab::student::conv_unroll(float* y, const float* x, const float* k, const ConvShape& shape, cudaStream_t stream)
/// @brief Final, variant 3: the filter size known at compile time and the filter loops
/// unrolled.
///
/// Written in student/final/3_unroll.cu; handout: milestones/final/README.md, "3. Loop
/// unrolling". Signature of every GPU variant (GpuConvFn): x, k and y are
/// device pointers; enqueue the work on `stream` and return.

/// @fn void convlab::student::conv_constant_memory(float* y, const float* x, const float* k, const ConvShape& shape, cudaStream_t stream)
/// @brief Final, variant 4: the filters in __constant__ memory.
///
/// Written in student/final/4_constant_memory.cu; handout: milestones/final/README.md, "4.
/// Constant memory". Signature of every GPU variant (GpuConvFn): x, k and y are
/// device pointers; enqueue the work on `stream` and return.

/// @fn void convlab::student::conv_best(float* y, const float* x, const float* k, const ConvShape& shape, cudaStream_t stream)
/// @brief Final, variant 5: the team's fastest kernel, the one the ranking uses.
///
/// Written in student/final/5_best.cu; handout: milestones/final/README.md, "5. Your best
/// kernel". Signature of every GPU variant (GpuConvFn): x, k and y are
/// device pointers; enqueue the work on `stream` and return.

/// @fn void convlab::student::conv_tanh_maxpool_best(float* y, const float* x, const float* k, const ConvShape& shape, const PoolShape& pool, cudaStream_t stream)
/// @brief Final, variant 5, optional: the best kernel fused with the tanh and max-pool that
/// follow the conv layer, y = maxpool(tanh(conv(x, k))).
///
/// Written in student/final/5_best.cu; handout: milestones/final/README.md, "5. Your best
/// kernel". Signature GpuConvTanhPoolFn. While it throws NotImplemented (the stub), the
/// harness runs conv_best and then its own tanh and max-pool.
// clang-format on
#endif

}  // namespace convlab
