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

#include <cstddef>
#include <span>

#include "reference/conv/conv_shape.hpp"

#ifdef CONVLAB_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

/// Everything convlab defines: the framework, the team's code (convlab::student) and the staff
/// solutions (convlab::solution).
namespace convlab {

/// The signature of every CPU variant (m2's convolution); all pointers are host memory.
using CpuConvFn = void (*)(float* y, const float* x, const float* k, const ConvShape& shape);

#ifdef CONVLAB_HAVE_CUDA
/// The one signature of every GPU variant. x, k and y are device pointers; the launcher
/// enqueues its work on `stream` and may return before it finishes (the harness synchronises).
using GpuConvFn = void (*)(float* y, const float* x, const float* k, const ConvShape& shape,
                           cudaStream_t stream);

/// The launcher of a variant declared `workspace`: as GpuConvFn, plus `workspace`, device
/// memory of at least the bytes its GpuWorkspaceFn stated for `shape` (256-byte aligned,
/// uninitialised, the variant's own for the call). The framework allocates it outside every
/// timed call and keeps it between calls.
using GpuConvWorkspaceFn = void (*)(float* y, const float* x, const float* k,
                                    const ConvShape& shape, void* workspace, cudaStream_t stream);

/// The launcher of a variant declared `host` (streams): x, k and y are page-locked host
/// memory (the harness allocates them with cudaMallocHost). The call does everything a layer
/// needs on the device (allocation, copies in, kernels, copy back, freeing) and returns when y
/// holds the result: its whole duration is its Layer Time.
using GpuConvHostFn = void (*)(float* y, const float* x, const float* k, const ConvShape& shape);

/// How many bytes of workspace a `workspace` variant needs for `shape` (conv_<id>_workspace).
/// Called on the host, outside the timed call; 0 is allowed.
using GpuWorkspaceFn = std::size_t (*)(const ConvShape& shape);

/// One point of a variant's parameter grid: a plain launcher compiled for one choice of its
/// parameters, and that choice in words ("BM=64 BN=64 TM=4 TN=4").
struct SweepPoint {
  const char* params;  ///< the point's parameters, as a report prints them
  GpuConvFn launch;    ///< the variant compiled for them
};

/// A variant declared `sweep` offers its grid (conv_<id>_sweep): every point `convlab sweep`
/// checks and times. An empty span means the grid is not written yet.
using GpuSweepFn = std::span<const SweepPoint> (*)();

/// The optional fused signature (GpuVariant::student_fused): writes
/// y = maxpool(tanh(conv(x, k))), the conv layer, the tanh after it and the max-pool after
/// that in one call, without storing the convolution's output. x and k are as for GpuConvFn;
/// y is y[B][M][pool.out(H-K+1)][pool.out(W-K+1)]. Device pointers; enqueue on `stream`.
using GpuConvTanhPoolFn = void (*)(float* y, const float* x, const float* k, const ConvShape& shape,
                                   const PoolShape& pool, cudaStream_t stream);
#endif

// The entry points of every line of variants.def, declared from it: a CPU variant's
// conv_forward_<id> (CpuConvFn), a GPU variant's conv_<id> (GpuConvFn) and, where it is
// declared fused, conv_tanh_maxpool_<id> (GpuConvTanhPoolFn); a `workspace` GPU variant's
// conv_<id> is a GpuConvWorkspaceFn, with conv_<id>_workspace (GpuWorkspaceFn) beside it; a
// `host` variant's conv_<id> is a GpuConvHostFn; a `sweep` variant also has conv_<id>_sweep
// (GpuSweepFn). Expanded once in namespace student and once in namespace solution; their
// documentation is generated from the same lines (docs/CMakeLists.txt).
/// @cond CONVLAB_VARIANT_MACROS
#define CONVLAB_DECLARE_ENTRY_cpu(id, interface, sweep) \
  void conv_forward_##id(float* y, const float* x, const float* k, const ConvShape& shape);
#ifdef CONVLAB_HAVE_CUDA
#define CONVLAB_DECLARE_ENTRY_gpu(id, interface, sweep) \
  CONVLAB_DECLARE_GPU_##interface(id) CONVLAB_DECLARE_SWEEP_##sweep(id)
#define CONVLAB_DECLARE_SWEEP_sweep(id) std::span<const SweepPoint> conv_##id##_sweep();
#define CONVLAB_DECLARE_SWEEP_nosweep(id)
#define CONVLAB_DECLARE_GPU_plain(id)                                              \
  void conv_##id(float* y, const float* x, const float* k, const ConvShape& shape, \
                 cudaStream_t stream);
#define CONVLAB_DECLARE_GPU_workspace(id)                                           \
  std::size_t conv_##id##_workspace(const ConvShape& shape);                        \
  void conv_##id(float* y, const float* x, const float* k, const ConvShape& shape, \
                 void* workspace, cudaStream_t stream);
#define CONVLAB_DECLARE_GPU_host(id) \
  void conv_##id(float* y, const float* x, const float* k, const ConvShape& shape);
#define CONVLAB_DECLARE_FUSED_fused(id)                                                         \
  void conv_tanh_maxpool_##id(float* y, const float* x, const float* k, const ConvShape& shape, \
                              const PoolShape& pool, cudaStream_t stream);
#else
#define CONVLAB_DECLARE_ENTRY_gpu(id, interface, sweep)
#define CONVLAB_DECLARE_FUSED_fused(id)
#endif
#define CONVLAB_DECLARE_FUSED_unfused(id)
#define CONVLAB_VARIANT(id, milestone, device, student_file, staff_file, handout, idea, \
                        precision, libraries, interface, sweep, fused)                   \
  CONVLAB_DECLARE_ENTRY_##device(id, interface, sweep) CONVLAB_DECLARE_FUSED_##fused(id)
/// @endcond

/// The code a team writes, in the files of student/. The harness calls these entry points and
/// times them (Op Time).
namespace student {
#include "reference/conv/variants.def"
}  // namespace student

/// The staff solutions of every student entry point (reference/solutions/, left out of the
/// student release). `convlab run --impl solution` runs them.
namespace solution {
#include "reference/conv/variants.def"
}  // namespace solution

#undef CONVLAB_VARIANT
#undef CONVLAB_DECLARE_FUSED_unfused
#undef CONVLAB_DECLARE_FUSED_fused
#undef CONVLAB_DECLARE_ENTRY_gpu
#ifdef CONVLAB_HAVE_CUDA
#undef CONVLAB_DECLARE_GPU_plain
#undef CONVLAB_DECLARE_GPU_workspace
#undef CONVLAB_DECLARE_GPU_host
#undef CONVLAB_DECLARE_SWEEP_sweep
#undef CONVLAB_DECLARE_SWEEP_nosweep
#endif
#undef CONVLAB_DECLARE_ENTRY_cpu

}  // namespace convlab
