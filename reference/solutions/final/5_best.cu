// Staff solution, final step 5: the best kernel, and its fused conv + tanh + max-pool launcher.
//
// No one kernel is the fastest on every shape, so a layer runs on one of several routes, each a
// kernel (or a few) for the shapes it is fastest on. kPlainRoutes and kPooledRoutes below try
// them in order; best/<route>.cu holds each, with what it does and why:
//   pointwise       K = 1, C > 1, up to 16 maps: x read once for all maps (bound by reading x)
//   image           C > 1, up to 32 maps, small images: images staged whole, 3xTF32 on mma.sync
//   winograd        sm_90a, K = 3, many channels and maps: F(4x4, 3x3) around gemm_ws's kernel
//   gemm_ws         sm_90a, C > 1, more than 32 maps: implicit GEMM, a producer warp group
//                   splitting the operands of the consumers' wgmma products
//   band            C > 1, up to 32 maps, long sums on large images: bands of rows, 3xTF32
//   gemm            C > 1 elsewhere, and large filters: implicit GEMM, 3xTF32 on mma.sync
//   c1_wgmma        sm_90a, C = 1, 41 to 64 maps a block, K = 5 to 7: wgmma, 3xTF32
//   c1_half         fused, C = 1, K = 5, 25 to 64 maps: three fp16 products of scaled values
//   tiled           K up to 7 on the FMA units: C = 1 with each thread's input patch in
//                   registers, else the channels streamed with the filters in constant memory
//   conv_then_pool  fused, any pool: a plain route into a workspace, then tanh and max-pool
//   fallback        every shape: one thread per output (or per pooled output)
// Shared: best/shared.cuh (sizes, split sums, the GEMM's view of a layer), best/fast_tanh.cuh
// and best/tensor_core_math.cuh (the TF32 split, mma.sync, cp.async, wgmma fences).
//
// Why:
//  - Writing y bounds every unfused kernel on the project's layer; fused, the output is a
//    quarter of it and the products are the bound, which the tensor cores lift.
//  - fp32 accuracy on the tensor cores, so that the counts stay exact: each operand v is split
//    into big = tf32(v) and small = v - big, and a*b taken as small*big + big*small + big*big
//    (3xTF32); the dropped small*small is below fp32's own rounding.
//  - tanh is increasing: the fused kernels take a window's maximum first and one tanh after it,
//    the same values with a quarter of the tanh evaluations.
//  - Few outputs with a long sum leave SMs idle: such sums split into parts on blocks of their
//    own, added after in a fixed order (the same result every call).
// The files are laid out as a team hands in a best of several files: student/final/5_best.cu
// and student/final/best/ (milestones/final/README.md, section '5. Your best kernel').
#include <cuda_runtime_api.h>

#include <cstddef>

#include "best/routes.cuh"
#include "best/shared.cuh"
#include "reference/conv/student_api.hpp"

namespace convlab::solution {
namespace {

using namespace best;

// A way to run a layer: its kernels for the shapes it takes. run enqueues them and returns true
// where the route takes the shape; elsewhere, or without a workspace it needs, it launches
// nothing and returns false.
struct Route {
  const char* name;
  const char* takes;  // the shapes, in words (the route's file says why)
  bool (*run)(float* y, const float* x, const float* k, const ConvShape& s, cudaStream_t stream);
};

// Whether conv_best runs `s` on the tiled FMA kernels (C = 1 up to kMaxK, or the
// channel-streaming kernel), whose fused versions pool in registers. Elsewhere its route is a
// product on the tensor cores, which has no pooling epilogue, or run_pointwise.
bool plain_runs_tiled(const ConvShape& s) {
  return !pointwise_takes(s) && s.K <= kMaxK &&
         (s.C == 1 || (stream_beats_gemm(s, false) && !image_takes(s) && !band_takes(s)));
}

bool run_tiled_where_plain(float* y, const float* x, const float* k, const ConvShape& s,
                           cudaStream_t stream) {
  return plain_runs_tiled(s) && run_tiled_pooled(y, x, k, s, stream);
}

// conv_best's routes, read top to bottom: the first that takes a shape runs it (where two take
// one, the earlier is the faster there). A shape none takes runs the one-thread kernel.
constexpr Route kPlainRoutes[] = {
    {"pointwise", "K = 1, C > 1, up to 16 maps and 768 channels", run_pointwise},
    {"image", "C > 1, 5 to 32 maps (9 or more under 32 terms), an image in 48 KB", run_image},
    {"winograd", "sm_90a: K = 3, 64 to 1024 channels, 64 maps or more, outputs of 4x4 or more",
     run_winograd},
    {"gemm_ws", "sm_90a: C > 1, 33 maps or more, 64 terms or more, grids of half the SMs",
     run_gemm_ws},
    {"band", "C > 1, K > 1, up to 32 maps, 128 terms or more (1, 2, 4 maps from K = 5, 3 from 8)",
     run_band},
    {"gemm",
     "C > 1 where the channel-streaming kernel is slower; filters it cannot take, 5 maps or more",
     run_gemm},
    {"c1_wgmma",
     "sm_90a: C = 1, blocks of 41 to 64 maps, K = 7, or 5, 6 on rows not a multiple of 8",
     run_c1_wgmma},
    {"tiled", "K up to 7: C = 1 with the patch in registers, else the channels streamed",
     run_tiled},
};

// conv_tanh_maxpool_best's routes that pool 2x2 stride-2 windows in their epilogue, read the
// same way. Other pools, and shapes none takes, run a plain route into a workspace and pool
// after it (run_conv_then_pool), or else the one-thread kernel.
constexpr Route kPooledRoutes[] = {
    {"c1_half", "C = 1, K = 5, 25 to 64 maps, an image in 48 KB", run_c1_half},
    {"c1_wgmma", "sm_90a: C = 1, K = 5 to 7, blocks of 41 to 64 maps", run_c1_wgmma_pooled},
    {"image", "as conv_best's image route", run_image_pooled},
    {"tiled", "where conv_best runs the tiled kernels", run_tiled_where_plain},
};

// The first of `routes` that takes `s` runs it; false where none does.
template <std::size_t N>
bool run_first(const Route (&routes)[N], float* y, const float* x, const float* k,
               const ConvShape& s, cudaStream_t stream) {
  for (const Route& route : routes) {
    if (route.run(y, x, k, s, stream)) return true;
  }
  return false;
}

}  // namespace

namespace best {

bool run_plain(float* y, const float* x, const float* k, const ConvShape& s, cudaStream_t stream) {
  return run_first(kPlainRoutes, y, x, k, s, stream);
}

}  // namespace best

void conv_best(float* y, const float* x, const float* k, const ConvShape& shape,
               cudaStream_t stream) {
  shape.validate();
  if (run_plain(y, x, k, shape, stream)) return;
  run_fallback(y, x, k, shape, stream);
}

void conv_tanh_maxpool_best(float* y, const float* x, const float* k, const ConvShape& shape,
                            const PoolShape& pool, cudaStream_t stream) {
  shape.validate();
  pool.validate(shape);
  // K = 1 layers that run_pointwise takes pool after it: it reads x once for all maps.
  if (pool == PoolShape{2, 2} && !pointwise_takes(shape) &&
      run_first(kPooledRoutes, y, x, k, shape, stream)) {
    return;
  }
  if (run_conv_then_pool(y, x, k, shape, pool, stream)) return;
  run_fallback_pooled(y, x, k, shape, pool, stream);
}

}  // namespace convlab::solution
