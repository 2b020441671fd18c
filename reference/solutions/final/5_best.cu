// Staff solution, final step 5: the best kernel, and its fused conv + tanh + max-pool launcher.
//
// Changed from the earlier steps, and from this file's previous version (register blocking
// from a shared-memory slab, 0.70 ms on the project's layer on an H100):
//  - C = 1 (the project's layer): no input staging at all. A thread computes a 4x4 tile of
//    outputs and loads the whole (4+K-1) x (4+K-1) input patch it needs into registers once,
//    straight from global memory (float4 rows; neighbouring patches overlap and come from L1).
//    It then loops over the block's output maps: per map, 16*K*K FMAs on registers and
//    ceil(K*K/4) float4 loads of that map's filter, a broadcast from shared memory (every
//    thread of the block is on the same map). The block copies its maps' filters to shared
//    memory once; the patch loads are issued before that copy and its barrier, so their
//    latencies overlap.
//  - K a template parameter (step 3), 1 to 7, so the patch and tile loops unroll into FMAs.
//  - A block covers 128 consecutive tiles (images follow each other, so no thread idles at an
//    image edge) for all maps, or for slices of 25 maps when fused. Few, long blocks: a
//    block's start costs more than a short last wave (slices of 17 maps or fewer measured
//    5-8% slower; 25 and 50 within 2%; a persistent grid was no faster).
//  - Registers: 4 blocks of 128 threads per SM, at most 128 registers, no spills (fused); 3
//    blocks when plain (4 for K = 6, 7). 2x8 tiles ran as fast; 4x8 tiles need more registers
//    and ran 8-18% slower. Where y's rows take float2 but not float4 stores, 8x2 tiles: each
//    lane then stores whole pairs next to its neighbours' (1.7x on odd-shapes' conv1). Plain,
//    K = 4 and 5: 1x4 tiles on grids too small for 4x4 ones to fill the GPU five times over
//    (always for K = 4), 5-25% faster (row_tiles_faster).
//  - The patch stays in registers up to K = 7 (10x10 values, 168 registers plain): LeNet's
//    conv1 (K = 7) took 1.53 ms in the stream kernel below and takes 0.64 ms so.
//  - C > 1 with 5 to 32 maps, one image in 48 KB and a short enough sum (LeNet's conv2,
//    odd-shapes' and two-conv's conv2): the product on the tensor cores with fp32 accuracy
//    (3xTF32, see run_gemm), its inputs read from whole images staged in shared memory (see
//    run_image). LeNet's conv2 2.49 to 1.32 ms, odd-shapes' 0.40 to 0.19, two-conv's 0.137 to
//    0.067 (H100).
//  - Other C > 1 shapes with more than 16 maps and sums of 32 terms or more (VGG-16's layers,
//    say), or 9 to 16 maps and sums of 256 terms or more: an implicit GEMM on the tensor cores,
//    3xTF32 as well, gathering its inputs from global memory (run_gemm; on Hopper, large grids
//    with more than 32 maps run_gemm_ws: a producer warp group splits each stage once for the
//    warp-group products, a persistent grid). The stream kernel below ran VGG-16 in 1,054 ms
//    against cuDNN's 5.4; the GEMM in 9.8, 8.3 with run_gemm_ws. Grids that would leave most
//    SMs idle with a long sum split it into parts on blocks of their own, added at the end
//    (run_gemm_split): C = 1030, 40 maps on 84 pixels 0.65 to 0.033 ms (cuDNN 0.067, H100).
//  - K = 1 with C > 1 and at most 16 maps: a kernel that reads each input value once for all
//    maps (run_pointwise), where the layer is bound by reading x.
//  - On Hopper, K = 3 with 64 to 1024 channels and 64 maps or more (VGG-16 from conv1-2 on):
//    Winograd's F(4x4, 3x3) around run_gemm_ws's kernel (run_winograd), as cuDNN does there:
//    VGG-16 in 4.36 ms against cuDNN's 5.43, every layer faster (1.08-1.98x, H100).
//  - Other C > 1 shapes: channels stream (the GEMM instead on grids under a quarter of the SMs'
//    worth of blocks, or under half with 4 maps or more and 256 terms or more: see
//    stream_beats_gemm). For 4 maps at a time, each input row of a 2x4 tile
//    is loaded once per channel and feeds all 4; filters come from constant memory (step 4),
//    in chunks of maps that fit, one launch per chunk, or for K = 6, 7 from shared memory.
//    (Holding a channel's patch in registers instead, for 2 to 8 maps at a time, ran within 7%
//    of this on LeNet's conv2: the patch reloads per channel cost what the registers save.)
//  - Stores are float4 (float2) where rows allow; a warp's stores cover whole lines of y.
//  - On Hopper (an sm_90a build), C = 1 with 41 maps or more and K = 5 to 7 runs on the tensor
//    cores (3xTF32, wgmma: run_c1_wgmma below), except up to K = 6 with rows of whole 32-byte
//    sectors, where the FMA kernel above streams y faster (the project's layer: 0.401 against
//    0.437 ms). Elsewhere 1.1 to 1.8 times faster than the FMA kernel.
//  - Few outputs with a long sum (grids of at most half the blocks the SMs hold at once): the
//    channel-streaming kernel (plain) and the one-thread kernel split the sum's channels into
//    parts on blocks of their own, added after in a fixed order (run_channel_parts), and with
//    1 to 3 maps the streaming kernel's split grid takes such layers from the GEMM. 256 images,
//    H100: C = 502, 2 maps, K = 11 on 26x14 3.68 to 0.99 ms (cuDNN 0.67); C = 53, one map, K = 7
//    on 15x46 0.319 to 0.124 (0.131); C = 37, 3 maps, K = 7 on 32x9 0.133 to 0.048 (0.079);
//    C = 135, 2 maps, K = 4 on 9x21 0.151 to 0.068 (0.23).
//  - C > 1 with up to 32 maps, sums of 128 terms or more and images too large for the
//    staged-image kernel: the same 3xTF32 product on tiles of up to 512 outputs (bands of rows,
//    or whole small images) with the channels staged in chunks (run_band). With 1, 2 or 4 maps
//    (from K = 5 on) and 3 maps above 7x7, B's columns hold shifted copies of each filter
//    instead of padding. 256 images, H100, against the routes before it: C = 93, 10 maps,
//    K = 8 on 32x35 1.76 to 0.87 ms (cuDNN's FFT 0.31); C = 67, 8 maps, K = 5 on 36x92 2.14 to
//    0.76 (0.91); C = 502, 2 maps, K = 11 0.99 to 0.50 (0.67); C = 300, 2 maps, K = 7 on 40x40
//    4.51 to 1.06 (1.77). The net of 24 random layers 6.99 to 4.05 ms (cuDNN 5.08).
// Filters above 7x7 run on the implicit GEMM from 5 maps on, C = 1 included (C = 1, 64 maps,
// K = 9: 0.448 to 0.097 ms, H100). Any other shape (K > 7 with at most 4 maps, or with C = 1 on
// a grid that fills at most half the SMs; one map's filter above 64 KB) runs a plain
// one-thread-per-output kernel, so the launcher is correct for every shape.
//
// The fused launcher (conv_tanh_maxpool_best) runs the tiled kernels (C = 1, and the
// channel-streaming kernel) and the staged-image kernel with another epilogue: the thread's conv
// outputs are max-pooled 2x2, passed through tanh and stored; the conv output never goes to
// memory (the staged images: LeNet's conv2 1.74 to 1.35 ms, two-conv's 0.106 to 0.059, against
// pooling after the plain kernel). tanh is increasing, so the max first and one tanh after gives
// the same values with a quarter of the tanh evaluations (tanh from the hardware exp2 and
// reciprocal, absolute error below 1e-6). C = 1 layers with K = 5 and 25 to 64 maps (the
// project's layer) run on the tensor cores instead, with fp32 accuracy from three fp16 products
// of scaled values (run_c1_half); on Hopper (an sm_90a build), other C = 1 layers with 41 maps
// or more and K = 5 to 7 run 3xTF32 with the warp group's wgmma products (run_c1_wgmma).
// Shapes whose plain route is another product on the
// tensor cores, and other pool geometries, run the plain route into a workspace and pool after it
// (run_conv_then_pool: C = 128, 256 maps, K = 3 on 30x30 5.31 to 0.165 ms against the streaming
// kernel, H100); the one-thread-per-pooled-output kernel is left for shapes no faster route
// takes.
//
// Why: writing y is the floor of any unfused kernel on the project's layer (10000 x 50 x 24 x
// 24 floats, 1.15 GB: 0.365 ms for a kernel that only stores, on an H100). The FMA kernel's
// writes alone, a warp's 96-byte row pieces, take 0.430 ms with the FMAs taken out, but their
// order is not the whole gap: row tiles, whose warps store 512 consecutive bytes, were no faster
// with the FMAs in (0.406 ms; docs/performance.md). Fused, the output is a quarter of that and
// the 7.2 G FMAs (0.23 ms at the measured FFMA peak) are the floor on the FMA units, which the
// tensor cores lift.
// Measured effect on an H100 (ece408-high, 10000 images, fastest of 20): kernel alone (CUDA
// events) plain 0.398 ms (previous version 0.684; 1.09x the store-only floor), fused 0.301 ms
// on the FMA units (48 TFLOP/s of 64 for pure FFMA), 0.226 ms with wgmma. Op Time in the
// network: plain 0.411 ms against cuDNN's 1.582, fused 0.232 ms against cuDNN's conv + tanh +
// max-pool 3.075 (milestones/final/README.md, section 5). On an H200, fused: 0.240 ms with
// wgmma, 0.179 to 0.184 with the fp16 products (Op Time).
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
