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

namespace convlab {

/// Milestone m2's CPU convolution; all pointers are host memory.
using CpuConvFn = void (*)(float* y, const float* x, const float* k, const ConvShape& shape);

namespace student {
/// Milestone m2: the CPU convolution, in student/m2/conv_cpu.cpp.
void conv_forward_cpu(float* y, const float* x, const float* k, const ConvShape& shape);
}  // namespace student

namespace solution {
/// Staff solution of student::conv_forward_cpu.
void conv_forward_cpu(float* y, const float* x, const float* k, const ConvShape& shape);
}  // namespace solution

#ifdef CONVLAB_HAVE_CUDA
/// The one signature of every GPU variant. x, k and y are device pointers; the launcher
/// enqueues its work on `stream` and may return before it finishes (the harness synchronises).
using GpuConvFn = void (*)(float* y, const float* x, const float* k, const ConvShape& shape,
                           cudaStream_t stream);

#define CONVLAB_GPU_VARIANT(id, milestone, file, handout, idea)                           \
  void conv_##id(float* y, const float* x, const float* k, const ConvShape& shape, \
                 cudaStream_t stream);
namespace student {
#include "reference/conv/gpu_variants.def"
}  // namespace student
namespace solution {
#include "reference/conv/gpu_variants.def"
}  // namespace solution
#undef CONVLAB_GPU_VARIANT
#endif

}  // namespace convlab
