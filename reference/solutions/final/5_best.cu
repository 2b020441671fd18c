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
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <type_traits>
#include <utility>
#include <vector>

#include "reference/conv/student_api.hpp"
#include "reference/core/cuda_check.hpp"
#include "reference/core/cuda_launch.cuh"

namespace convlab::solution {
namespace {

constexpr int kTileH = 2;            // stream kernel: conv rows per tile
// Stream kernel: conv columns per tile. 8 (where it wasted fewer columns) measured up to 3.9x
// slower with K >= 5 (8 maps, C = 6, K = 7 on 30x30: 4.12 against 1.06 ms) and 11-21% slower
// with K = 3; LeNet's conv2 ran 4 already.
constexpr int kStreamTileW = 4;
constexpr int kMaxK = 7;             // largest K of the tiled kernels
constexpr int kHoldMaxK = 7;         // C = 1: the whole patch stays in registers up to this K
constexpr int kMaxSliceMaps = 256;   // C = 1: maps per block at most (<= 28 KB of filters)
constexpr int kFusedSliceMaps = 25;  // C = 1, fused: maps per block at most
// C = 1 hold kernel launches (measured best on an H100, see run_tiled): threads per block, and
// blocks per SM for plain 4x4 tiles with K <= 5 and 8x2 tiles (room for 168 registers), or for
// fused tiles, 1x4 tiles and plain 4x4 tiles with K >= 6 (128 registers).
constexpr int kHoldThreads = 128;
constexpr int kHoldBlocksPlain = 3;
constexpr int kHoldBlocksWide = 4;
constexpr int kStreamThreads = 256;  // stream kernel block size
constexpr int kStreamBlocksPerSm = 2;  // its __launch_bounds__
constexpr int kStreamMaps = 4;       // maps accumulated at once when channels stream
constexpr int kStreamMapsPerBlock = 2 * kStreamMaps;
// Stream kernel: maps per block for a launch of `maps`, whole groups of kStreamMaps, so that
// little work is wasted on padding.
constexpr int stream_maps_per_block(int maps) {
  return maps < kStreamMapsPerBlock ? (maps + kStreamMaps - 1) / kStreamMaps * kStreamMaps
                                    : kStreamMapsPerBlock;
}
constexpr int kStreamSharedMax = 48 * 1024;  // stream kernel: filters in shared memory up to
constexpr int kStreamSharedMinK = 6;         // ... and from this K on
constexpr int kConstFloats = 64 * 1024 / sizeof(float);
constexpr std::int64_t kFallbackMaxBlocks = std::int64_t{1} << 20;  // grid-stride kernels
constexpr int kFallbackBlocksPerSm = 8;  // of 256 threads: a full SM

// The filters of the maps of one stream launch, k[m0 .. m0+m_count)[C][K][K].
__constant__ float c_best_weights[kConstFloats];

// What a tiled kernel needs to know besides K and the tile (template parameters).
struct Geometry {
  std::int64_t tiles;   // tiles in the batch: B * tiles_per_image
  int tiles_per_image;  // tile rows * tiles_w
  int tiles_w;          // tiles along a row
  int C, H, W;          // input sizes
  int M;                // output maps of the whole layer (y's layout)
  int out_h, out_w;     // one map of y: the conv output, or the pooled output when fused
  int m0, m_count;      // this launch's maps
  int maps_per_block;   // maps one block computes
  int map_blocks;       // blocks per group of tiles: ceil(m_count / maps_per_block)
  int store_width;      // 4 (2): y's rows start 16 (8)-byte aligned and hold a multiple of 4
                        // (2) values; 1 otherwise
  bool vector_loads;    // likewise x's rows
  // Stream kernel, plain: channels per part of a split sum (blockIdx.y a part; C when not split)
  // and the distance between the parts' outputs (run_channel_parts).
  int c_part;
  std::int64_t part_floats;
};
// The tiles of a launch (defined with the tiled kernels' launchers below).
Geometry make_geometry(float* y, const float* x, const ConvShape& s, bool fused, int th, int tw);

// Stream kernel: shared memory for kStreamMapsPerBlock maps' filters (K >= kStreamSharedMinK).
constexpr std::int64_t stream_shared_bytes(int C, int K) {
  return std::int64_t{kStreamMapsPerBlock} * C * K * ((K + 3) / 4) * 16;
}
// Stream kernel: maps of its first launch (all of them where the filters fit in shared memory
// or constant memory, else as many as constant memory holds; 0 where one map's filter does not
// fit), and the blocks of a launch of `maps` maps over `tiles` tiles (0 for no maps).
constexpr int stream_launch_maps(int M, int C, int K) {
  if (K >= kStreamSharedMinK && stream_shared_bytes(C, K) <= kStreamSharedMax) return M;
  return static_cast<int>(std::min<std::int64_t>(M, kConstFloats / (std::int64_t{C} * K * K)));
}
constexpr std::int64_t stream_blocks(std::int64_t tiles, int maps) {
  if (maps == 0) return 0;
  return ceil_div<std::int64_t>(tiles, kStreamThreads) *
         ceil_div(maps, stream_maps_per_block(maps));
}

// tanh(u) = 1 - 2 / (2^(2u log2 e) + 1) with the hardware exp2 and reciprocal: five
// instructions, absolute error below 1e-6 (2^x overflowing to inf gives 1, 0 gives -1).
// tanh_exp2 takes v = u * kTanhExp2Scale, a scale a kernel can fold into its operands.
constexpr float kTanhExp2Scale = 2.8853900817779268f;  // 2 log2(e)
__device__ __forceinline__ float tanh_exp2(float v) {
  float e, r;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(e) : "f"(v));
  asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(e + 1.0f));
  return fmaf(-2.0f, r, 1.0f);
}
__device__ __forceinline__ float tanh_fast(float u) { return tanh_exp2(u * kTanhExp2Scale); }

// Stores n consecutive values of v at out (n a compile-time 1..TW), as float4 or float2 where
// the row allows it (`width`: Geometry::store_width); only columns below `limit` (relative to
// out) are written. Wider stores are fewer instructions and fill whole sectors of y.
template <int N>
__device__ __forceinline__ void store_row(float* out, const float (&v)[N], int limit, int width) {
  if (N % 4 == 0 && width == 4) {
#pragma unroll
    for (int j = 0; j < N; j += 4) {
      if (j < limit)
        *reinterpret_cast<float4*>(out + j) = make_float4(v[j], v[j + 1], v[j + 2], v[j + 3]);
    }
  } else if (N % 2 == 0 && width >= 2) {
#pragma unroll
    for (int j = 0; j < N; j += 2) {
      if (j < limit) *reinterpret_cast<float2*>(out + j) = make_float2(v[j], v[j + 1]);
    }
  } else {
#pragma unroll
    for (int j = 0; j < N; ++j) {
      if (j < limit) out[j] = v[j];
    }
  }
}

// Writes one TH x TW tile of conv outputs, or (kFused) their 2x2 max-pool after tanh (TH/2 x
// TW/2 values). `out` is the tile's first value in y, `pitch` y's row length; rows from
// `rows_left` and columns from `cols_left` on (relative to the tile) lie outside y's map.
template <int TH, int TW, bool kFused>
__device__ __forceinline__ void store_tile(float* __restrict__ out, int pitch, int rows_left,
                                           int cols_left, int width, const float (&acc)[TH][TW]) {
  if constexpr (kFused) {
    static_assert(TH % 2 == 0 && TW % 2 == 0, "a fused tile is whole 2x2 windows");
#pragma unroll
    for (int t = 0; t < TH / 2; ++t) {
      if (t >= rows_left) break;
      // tanh is increasing: the max of the window first, then one tanh.
      float v[TW / 2];
#pragma unroll
      for (int j = 0; j < TW / 2; ++j) {
        v[j] = tanh_fast(fmaxf(fmaxf(acc[2 * t][2 * j], acc[2 * t][2 * j + 1]),
                               fmaxf(acc[2 * t + 1][2 * j], acc[2 * t + 1][2 * j + 1])));
      }
      store_row(out + t * pitch, v, cols_left, width);
    }
  } else {
#pragma unroll
    for (int t = 0; t < TH; ++t) {
      if (t >= rows_left) break;
      store_row(out + t * pitch, acc[t], cols_left, width);
    }
  }
}

// Which tile and which maps this thread computes; false when past the last tile. `out` is the
// tile's first value in y for map m_begin; the next map's is `map_size` further.
struct TileWork {
  std::int64_t b;
  int h0, w0;          // the tile's first conv output
  int m_begin, m_end;  // maps, relative to g.m0
  float* out;
  std::int64_t map_size;
  int rows_left, cols_left;  // of y's map, from the tile's first value
};
template <int TH, int TW, int NT, bool kFused>
__device__ __forceinline__ bool tile_work(float* y, const Geometry& g, TileWork& work) {
  const int slice = static_cast<int>(blockIdx.x % g.map_blocks);
  work.m_begin = slice * g.maps_per_block;
  work.m_end = min(work.m_begin + g.maps_per_block, g.m_count);
  const std::int64_t tile =
      std::int64_t{blockIdx.x / g.map_blocks} * NT + static_cast<int>(threadIdx.x);
  if (tile >= g.tiles) return false;
  work.b = tile / g.tiles_per_image;
  const int r = static_cast<int>(tile - work.b * g.tiles_per_image);
  work.h0 = r / g.tiles_w * TH;
  work.w0 = r % g.tiles_w * TW;
  const int row0 = kFused ? work.h0 / 2 : work.h0, col0 = kFused ? work.w0 / 2 : work.w0;
  work.map_size = std::int64_t{g.out_h} * g.out_w;
  work.out = y + (work.b * g.M + g.m0 + work.m_begin) * work.map_size +
             std::int64_t{row0} * g.out_w + col0;
  work.rows_left = g.out_h - row0;
  work.cols_left = g.out_w - col0;
  return true;
}

// Copies `rows` rows of kLen floats from global to shared memory, each row padded with zeros
// to whole float4s (so a row then loads as float4s), the block's NT threads sharing the work.
template <int kLen, int NT>
__device__ __forceinline__ void stage_padded_rows(float4* dst4, const float* __restrict__ src,
                                                  int rows) {
  constexpr int kPitch = (kLen + 3) / 4 * 4;
  float* dst = reinterpret_cast<float*>(dst4);
  const int n = rows * kPitch;
#pragma unroll 4
  for (int i = threadIdx.x; i < n; i += NT) {
    const int e = i % kPitch, row = i / kPitch;
    dst[i] = e < kLen ? __ldg(src + row * kLen + e) : 0.0f;
  }
}

// The N float4s at src (shared memory) as 4N consecutive floats.
template <int N>
__device__ __forceinline__ void unpack_float4s(float (&dst)[4 * N], const float4* src) {
#pragma unroll
  for (int v = 0; v < N; ++v) {
    const float4 f = src[v];
    dst[4 * v] = f.x;
    dst[4 * v + 1] = f.y;
    dst[4 * v + 2] = f.z;
    dst[4 * v + 3] = f.w;
  }
}

// C = 1, K <= kHoldMaxK. Each thread keeps its whole (TH+K-1) x (TW+K-1) input patch in
// registers for all the block's maps: per map, TH*TW*K*K FMAs on registers. The block's filters
// are copied to shared memory first, each map's K*K values padded to whole float4s, so a map
// costs ceil(K*K/4) broadcast loads. The patch loads are issued before that copy and its
// barrier, so their latency overlaps it; rows of 4-aligned images load as float4s. Rows and
// columns past the image are clamped: they only feed outputs that are not stored.
template <int K, int TH, int TW, bool kFused, int NT, int kMinBlocks>
__global__ void __launch_bounds__(NT, kMinBlocks)
    conv_best_hold_kernel(float* __restrict__ y, const float* __restrict__ x,
                          const float* __restrict__ k, const Geometry g) {
  constexpr int kRows = TH + K - 1, kCols = TW + K - 1;
  constexpr int kVecCols = (kCols + 3) / 4 * 4;  // a row's float4 loads cover this many
  constexpr int kFilter4 = (K * K + 3) / 4;      // float4s per map in shared memory
  extern __shared__ float4 weights4[];           // [maps of the block][kFilter4]
  TileWork w;
  const bool active = tile_work<TH, TW, NT, kFused>(y, g, w);
  float patch[kRows][kCols];
  if (active) {
    const float* xb = x + w.b * g.H * g.W;
    if (g.vector_loads && w.w0 + kVecCols <= g.W) {
#pragma unroll
      for (int i = 0; i < kRows; ++i) {
        const float4* row =
            reinterpret_cast<const float4*>(xb + min(w.h0 + i, g.H - 1) * g.W + w.w0);
#pragma unroll
        for (int v = 0; v < kVecCols / 4; ++v) {
          const float4 f = __ldg(row + v);
          const float e[4] = {f.x, f.y, f.z, f.w};
#pragma unroll
          for (int j = 0; j < 4; ++j) {
            if (4 * v + j < kCols) patch[i][4 * v + j] = e[j];
          }
        }
      }
    } else {
#pragma unroll
      for (int i = 0; i < kRows; ++i) {
        const float* row = xb + min(w.h0 + i, g.H - 1) * g.W;
#pragma unroll
        for (int j = 0; j < kCols; ++j) patch[i][j] = __ldg(row + min(w.w0 + j, g.W - 1));
      }
    }
  }
  stage_padded_rows<K * K, NT>(weights4, k + (std::int64_t{g.m0} + w.m_begin) * (K * K),
                               w.m_end - w.m_begin);
  __syncthreads();
  if (!active) return;

  float* out = w.out;
#pragma unroll 1
  for (int m = w.m_begin; m < w.m_end; ++m, out += w.map_size) {
    float wv[kFilter4 * 4];
    unpack_float4s<kFilter4>(wv, weights4 + (m - w.m_begin) * kFilter4);
    float acc[TH][TW];
#pragma unroll
    for (int t = 0; t < TH; ++t) {
#pragma unroll
      for (int j = 0; j < TW; ++j) acc[t][j] = 0.0f;
    }
#pragma unroll
    for (int p = 0; p < K; ++p) {
#pragma unroll
      for (int q = 0; q < K; ++q) {
#pragma unroll
        for (int t = 0; t < TH; ++t) {
#pragma unroll
          for (int j = 0; j < TW; ++j) {
            acc[t][j] = fmaf(patch[t + p][j + q], wv[p * K + q], acc[t][j]);
          }
        }
      }
    }
    store_tile<TH, TW, kFused>(out, g.out_w, w.rows_left, w.cols_left, g.store_width, acc);
  }
}

// Any C, K <= kMaxK: kStreamMaps maps at a time; for each channel, each of the tile's input
// rows is loaded once and feeds every (output row, map) it contributes to. Filters come from
// shared memory (kShared, rows padded to whole float4s) or from constant memory
// (c_best_weights, one launch per chunk of maps that fits).
template <int K, int TW, bool kFused, bool kShared>
__global__ void __launch_bounds__(kStreamThreads, kStreamBlocksPerSm)
    conv_best_stream_kernel(float* __restrict__ y, const float* __restrict__ x,
                            const float* __restrict__ k, const Geometry g) {
  constexpr int kRows = kTileH + K - 1, kCols = TW + K - 1, kKK = K * K;
  constexpr int kRow4 = (K + 3) / 4;    // kShared: float4s per filter row
  extern __shared__ float4 weights4[];  // kShared: [maps of the block][C][K][kRow4]
  // A split sum's part: channels [c_begin, c_end) into its own copy of y.
  const int c_begin = static_cast<int>(blockIdx.y) * g.c_part;
  const int c_end = min(g.C, c_begin + g.c_part);
  y += blockIdx.y * g.part_floats;
  TileWork w;
  const bool active = tile_work<kTileH, TW, kStreamThreads, kFused>(y, g, w);
  if constexpr (kShared) {
    stage_padded_rows<K, kStreamThreads>(weights4, k + (std::int64_t{g.m0} + w.m_begin) * g.C * kKK,
                                         (w.m_end - w.m_begin) * g.C * K);
    __syncthreads();
  }
  if (!active) return;
  const std::int64_t plane = std::int64_t{g.H} * g.W;
  const float* xb = x + w.b * g.C * plane;
#pragma unroll 1
  for (int mg = w.m_begin; mg < w.m_end; mg += kStreamMaps) {
    float acc[kStreamMaps][kTileH][TW];
#pragma unroll
    for (int i = 0; i < kStreamMaps; ++i) {
#pragma unroll
      for (int t = 0; t < kTileH; ++t) {
#pragma unroll
        for (int j = 0; j < TW; ++j) acc[i][t][j] = 0.0f;
      }
    }
    // Maps past the slice (its last group) reuse its last map's filters; they are not stored.
    const float* wk[kStreamMaps];
    const float4* ws[kStreamMaps];
#pragma unroll
    for (int i = 0; i < kStreamMaps; ++i) {
      const int map = min(mg + i, w.m_end - 1);
      wk[i] = c_best_weights + map * g.C * kKK;
      ws[i] = weights4 + (map - w.m_begin) * g.C * (K * kRow4);
    }
#pragma unroll 1
    for (int c = c_begin; c < c_end; ++c) {
      const float* xc = xb + c * plane;
      // Unrolled for small K and narrow tiles only: then each weight is loaded once per
      // channel. Otherwise the registers do not suffice, and one input row is already up to
      // 2*kStreamMaps*K*TW FMAs of code.
#pragma unroll((K <= 3 && TW == 4) ? kRows : 1)
      for (int rr = 0; rr < kRows; ++rr) {
        float row[kCols];
        const float* src = xc + min(w.h0 + rr, g.H - 1) * g.W;
#pragma unroll
        for (int j = 0; j < kCols; ++j) row[j] = __ldg(src + min(w.w0 + j, g.W - 1));
#pragma unroll
        for (int t = 0; t < kTileH; ++t) {
          const int p = rr - t;  // filter row that maps input row rr onto output row t
          if (p < 0 || p >= K) continue;
#pragma unroll
          for (int i = 0; i < kStreamMaps; ++i) {
            float wv[kRow4 * 4];
            if constexpr (kShared) {
              unpack_float4s<kRow4>(wv, ws[i] + (c * K + p) * kRow4);
            } else {
              const float* wr = wk[i] + c * kKK + p * K;
#pragma unroll
              for (int q = 0; q < K; ++q) wv[q] = wr[q];
            }
#pragma unroll
            for (int q = 0; q < K; ++q) {
#pragma unroll
              for (int j = 0; j < TW; ++j) acc[i][t][j] = fmaf(row[j + q], wv[q], acc[i][t][j]);
            }
          }
        }
      }
    }
#pragma unroll
    for (int i = 0; i < kStreamMaps; ++i) {
      if (mg + i < w.m_end) {
        store_tile<kTileH, TW, kFused>(w.out + (mg + i - w.m_begin) * w.map_size, g.out_w,
                                       w.rows_left, w.cols_left, g.store_width, acc[i]);
      }
    }
  }
}

// C > 1: the implicit GEMM on tensor cores, with fp32 accuracy (3xTF32).
//
// y as a product: Y[m][n] = sum_r A[m][r] * X[r][n], with A = k as an M x C*K*K matrix, n an
// output pixel of the batch (b, h, w) and r = (c, p, q), X[r][n] = x[b][c][h+p][w+q]. The
// gather splits: X[r][n] sits at base(n) + offset(r), base(n) = b*C*H*W + h*W + w and
// offset(r) = c*H*W + p*W + q. A block builds the table of offset(r) once (shared memory), a
// thread its column's base once. Tiles of A and X reach shared memory through a cp.async
// pipeline a few stages deep, and warps multiply 16x8x8 fragments with mma.sync. Each operand
// v is split into big = tf32(v) and small = v - big, and a*b is taken as a_small*b_big +
// a_big*b_small + a_big*b_big (3xTF32): the dropped a_small*b_small is below fp32's own
// rounding, so the sums are as accurate as fp32 FMAs (exact counts). Three tensor-core
// products run about as fast as cuBLAS's fp32 SGEMM (43-55 TFLOP/s of direct-convolution
// work on VGG-16's layers, H100); the split, not the tensor core, limits small M. On Hopper,
// large grids take run_gemm_ws below instead.
constexpr int kGemmMaxR = 8 * 1024;  // longest sum the offset table holds (32 KB): a chunk's

// SMs of the current device.
int multiprocessor_count() {
  int device = 0, sms = 0;
  CUDA_CHECK(cudaGetDevice(&device));
  CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  return sms;
}

struct GemmGeometry {
  int M, R;          // rows of Y (maps) and the sum's length C*K*K
  int K, HW, W;      // filter size, one input plane, x's row length
  int P, W_out;      // output pixels per image and per row
  std::int64_t N;    // columns of Y: B * P
  std::int64_t chw;  // one image of x
  int m_tiles;       // blocks along M for one column tile
  bool vector_a;     // k's rows hold whole aligned float4s (R % 4 == 0, k 16-byte aligned)
  int k_stride;      // floats from one filter to the next: R, or the layer's C*K*K for a chunk
  bool accumulate;   // a later chunk of channels: add to y (for_channel_chunks)
  // run_gemm_ws: `batches` independent products, these floats apart in x, k and y
  int batches;
  std::int64_t batch_x, batch_k, batch_y;
  bool vector_y;  // run_gemm_ws: y's rows of P hold whole aligned float2s
  // run_gemm_split: blockIdx.y's part of the channels, split_channels of them (0: the whole
  // sum), written as its own y, split_y floats after the previous part's
  int split_channels;
  std::int64_t split_y;
};

// The shared-memory address (state space) of a generic pointer into shared memory.
__device__ __forceinline__ unsigned shared_address(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

__device__ __forceinline__ void cp_async4(float* dst, const float* src, bool valid) {
  const unsigned d = shared_address(dst);
  // A source size of 0 fills the 4 bytes with zeros and reads nothing.
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;" ::"r"(d), "l"(src),
               "r"(valid ? 4 : 0));
}
__device__ __forceinline__ void cp_async16(float* dst, const float* src, bool valid) {
  const unsigned d = shared_address(dst);
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(d), "l"(src),
               "r"(valid ? 16 : 0));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;"); }
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;" ::"n"(N));
}

// Stores v at *out, or adds it to *out for a later chunk of channels (g.accumulate).
__device__ __forceinline__ void store_or_add(float* out, float v, const GemmGeometry& g) {
  *out = g.accumulate ? *out + v : v;
}

// Offset in x[b] of term r of a C*K*K sum (channel c, filter row p, column q) from its output's
// first pixel, HW the size of one input plane: the GEMM's table and the image kernel's alike.
__device__ __forceinline__ int sum_term_offset(int r, int K, int W, int HW) {
  const int kk = K * K;
  const int c = r / kk, pq = r - c * kk, p = pq / K;
  return c * HW + p * W + (pq - p * K);
}

// v = big + small: big is v rounded to TF32 (10-bit mantissa; adding half of the dropped
// bits' range rounds half away from zero), small = v - big exactly (|small| <= 2^-12 |v|), of
// which the tensor core reads the top 10 mantissa bits.
__device__ __forceinline__ void split_tf32(float v, std::uint32_t& big, std::uint32_t& small) {
  big = (__float_as_uint(v) + 0x1000u) & 0xffffe000u;
  small = __float_as_uint(v - __uint_as_float(big));
}

// acc += a * b on one 16x8x8 fragment (TF32 in, fp32 accumulate).
__device__ __forceinline__ void mma_tf32(float (&acc)[4], const std::uint32_t (&a)[4],
                                         const std::uint32_t (&b)[2]) {
  asm volatile(
      "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%0,%1,%2,%3};"
      : "+f"(acc[0]), "+f"(acc[1]), "+f"(acc[2]), "+f"(acc[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}
// The same on a 16x8x4 fragment: A's rows g and g + 8 of column t, B's row t of column g.
__device__ __forceinline__ void mma_tf32_k4(float (&acc)[4], const std::uint32_t (&a)[2],
                                            std::uint32_t b) {
  asm volatile(
      "mma.sync.aligned.m16n8k4.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5}, {%6}, "
      "{%0,%1,%2,%3};"
      : "+f"(acc[0]), "+f"(acc[1]), "+f"(acc[2]), "+f"(acc[3])
      : "r"(a[0]), "r"(a[1]), "r"(b));
}

// One pipeline stage in shared memory: A[BM][BK] with rows padded to BK + 4 floats and
// X[BK][BN] with rows padded to BN + 8, so that a warp's fragment loads hit 32 banks
// (BK and BN multiples of 16 and 32).
template <int BM, int BN, int BK, int kStages>
struct GemmStage {
  static constexpr int kAPitch = BK + 4;
  static constexpr int kXPitch = BN + 8;
  static constexpr int kAFloats = BM * kAPitch;
  static constexpr int kFloats = kAFloats + BK * kXPitch;
  // The whole block: kStages stages, then the offset table (R rounded up to whole stages).
  static std::size_t bytes(int R) {
    return sizeof(float) * (std::size_t{kStages} * kFloats +
                            static_cast<std::size_t>(ceil_div(R, BK) * BK));
  }
};

// Block tile BM x BN of Y, WM x WN warps, each warp (BM/WM) x (BN/WN) as 16x8 fragments; the
// sum advances kGemmBK at a time through kGemmStages stages.
// kSplit: blockIdx.y's part of a split sum (run_gemm_split); the other kernels compile as if
// there were no parts.
template <int BM, int BN, int WM, int WN, int kGemmBK, int kGemmStages, int kMinBlocks,
          bool kSplit>
__global__ void __launch_bounds__(WM * WN * 32, kMinBlocks)
    conv_best_gemm_kernel(float* __restrict__ y, const float* __restrict__ x,
                          const float* __restrict__ k, const GemmGeometry geometry) {
  constexpr int NT = WM * WN * 32;
  GemmGeometry g = geometry;
  if constexpr (kSplit) {  // this block's part of the sum: its channels, its own y
    const int kk = g.K * g.K, c0 = static_cast<int>(blockIdx.y) * g.split_channels;
    x += std::int64_t{c0} * g.HW;
    k += c0 * kk;
    y += blockIdx.y * g.split_y;
    g.R = min(g.split_channels, g.R / kk - c0) * kk;
  }
  constexpr int kFragM = BM / WM / 16, kFragN = BN / WN / 8;
  constexpr int kXRowStep = NT / BN;  // a thread loads X rows r, r + kXRowStep, ...
  using Stage = GemmStage<BM, BN, kGemmBK, kGemmStages>;
  static_assert(kFragM >= 1 && kFragN >= 1, "a warp holds whole fragments");
  static_assert(NT % BN == 0 && kGemmBK % kXRowStep == 0, "X tiles split evenly");
  extern __shared__ float4 smem4[];
  float* smem = reinterpret_cast<float*>(smem4);
  int* offsets = reinterpret_cast<int*>(smem + kGemmStages * Stage::kFloats);

  const int tid = static_cast<int>(threadIdx.x);
  const int m0 = static_cast<int>(blockIdx.x % g.m_tiles) * BM;
  const std::int64_t n0 = std::int64_t{blockIdx.x / g.m_tiles} * BN;
  const int r_tiles = ceil_div(g.R, kGemmBK);

  for (int r = tid; r < r_tiles * kGemmBK; r += NT) {
    offsets[r] = r < g.R ? sum_term_offset(r, g.K, g.W, g.HW) : -1;
  }

  // This thread's column of X: base(n), or none past the batch's last pixel.
  const int x_col = tid % BN, x_row = tid / BN;
  const std::int64_t n = n0 + x_col;
  const bool n_valid = n < g.N;
  const float* x_base = x;
  if (n_valid) {
    const std::int64_t b = n / g.P;
    const int pix = static_cast<int>(n - b * g.P), h = pix / g.W_out;
    x_base = x + b * g.chw + std::int64_t{h} * g.W + (pix - h * g.W_out);
  }
  __syncthreads();  // the offset table

  auto load_stage = [&](int stage, int rt) {
    float* a_s = smem + stage * Stage::kFloats;
    float* x_s = a_s + Stage::kAFloats;
    const int r0 = rt * kGemmBK;
    if (g.vector_a) {
#pragma unroll
      for (int i = tid; i < BM * kGemmBK / 4; i += NT) {
        const int row = i / (kGemmBK / 4), col = (i % (kGemmBK / 4)) * 4;
        const bool valid = m0 + row < g.M && r0 + col < g.R;
        const float* src = valid ? k + std::int64_t{m0 + row} * g.k_stride + r0 + col : k;
        cp_async16(a_s + row * Stage::kAPitch + col, src, valid);
      }
    } else {
#pragma unroll
      for (int i = tid; i < BM * kGemmBK; i += NT) {
        const int row = i / kGemmBK, col = i % kGemmBK;
        const bool valid = m0 + row < g.M && r0 + col < g.R;
        const float* src = valid ? k + std::int64_t{m0 + row} * g.k_stride + r0 + col : k;
        cp_async4(a_s + row * Stage::kAPitch + col, src, valid);
      }
    }
#pragma unroll
    for (int i = 0; i < kGemmBK / kXRowStep; ++i) {
      const int row = x_row + i * kXRowStep;
      const int off = offsets[r0 + row];
      const bool valid = n_valid && off >= 0;
      cp_async4(x_s + row * Stage::kXPitch + x_col, valid ? x_base + off : x, valid);
    }
  };

  const int warp = tid / 32, lane = tid % 32;
  const int wm0 = (warp / WN) * (BM / WM), wn0 = (warp % WN) * (BN / WN);
  const int gq = lane / 4, tq = lane % 4;  // a fragment's row group and thread in group
  float acc[kFragM][kFragN][4] = {};

#pragma unroll
  for (int s = 0; s < kGemmStages - 1; ++s) {
    if (s < r_tiles) load_stage(s, s);
    cp_async_commit();
  }
#pragma unroll 1
  for (int rt = 0; rt < r_tiles; ++rt) {
    cp_async_wait<kGemmStages - 2>();
    __syncthreads();  // stage rt has landed; stage rt - 1 is no longer read
    const int next = rt + kGemmStages - 1;
    if (next < r_tiles) load_stage(next % kGemmStages, next);
    cp_async_commit();

    const float* a_s = smem + (rt % kGemmStages) * Stage::kFloats;
    const float* x_s = a_s + Stage::kAFloats;
#pragma unroll
    for (int k8 = 0; k8 < kGemmBK; k8 += 8) {
      std::uint32_t xb[kFragN][2], xs[kFragN][2];
#pragma unroll
      for (int j = 0; j < kFragN; ++j) {
        const float* col = x_s + (k8 + tq) * Stage::kXPitch + wn0 + j * 8 + gq;
        split_tf32(col[0], xb[j][0], xs[j][0]);
        split_tf32(col[4 * Stage::kXPitch], xb[j][1], xs[j][1]);
      }
#pragma unroll
      for (int i = 0; i < kFragM; ++i) {
        const float* row = a_s + (wm0 + i * 16 + gq) * Stage::kAPitch + k8 + tq;
        std::uint32_t ab[4], as[4];
        split_tf32(row[0], ab[0], as[0]);
        split_tf32(row[8 * Stage::kAPitch], ab[1], as[1]);
        split_tf32(row[4], ab[2], as[2]);
        split_tf32(row[8 * Stage::kAPitch + 4], ab[3], as[3]);
#pragma unroll
        for (int j = 0; j < kFragN; ++j) {
          mma_tf32(acc[i][j], as, xb[j]);
          mma_tf32(acc[i][j], ab, xs[j]);
          mma_tf32(acc[i][j], ab, xb[j]);
        }
      }
    }
  }
  cp_async_wait<0>();

  // acc[i][j] holds Y rows wm0 + 16i + gq (+8) and columns wn0 + 8j + 2tq (+1).
#pragma unroll
  for (int j = 0; j < kFragN; ++j) {
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      const std::int64_t col = n0 + wn0 + j * 8 + 2 * tq + e;
      if (col >= g.N) continue;
      const std::int64_t b = col / g.P;
      float* out = y + b * g.M * g.P + (col - b * g.P);
#pragma unroll
      for (int i = 0; i < kFragM; ++i) {
#pragma unroll
        for (int half = 0; half < 2; ++half) {
          const int m = m0 + wm0 + i * 16 + gq + 8 * half;
          if (m < g.M) store_or_add(out + std::int64_t{m} * g.P, acc[i][j][2 * half + e], g);
        }
      }
    }
  }
}

// The GEMM's view of a layer (m_tiles is the launcher's).
GemmGeometry make_gemm_geometry(const ConvShape& s, const float* k) {
  GemmGeometry g{};
  g.M = s.M;
  g.R = s.C * s.K * s.K;
  g.K = s.K;
  g.HW = s.H * s.W;
  g.W = s.W;
  g.P = s.H_out() * s.W_out();
  g.W_out = s.W_out();
  g.N = std::int64_t{s.B} * g.P;
  g.chw = std::int64_t{s.C} * g.HW;
  g.vector_a = g.R % 4 == 0 && reinterpret_cast<std::uintptr_t>(k) % sizeof(float4) == 0;
  g.k_stride = g.R;
  g.batches = 1;
  return g;
}

// Sums longer than the offset table (kGemmMaxR terms) as chunks of whole channels, one
// launch(x, k, geometry) each: every chunk after the first adds its part to y. (C = 1025,
// K = 3 took 735 ms in the stream kernel.)
template <typename Launch>
void for_channel_chunks(const GemmGeometry& g, const float* x, const float* k, Launch launch) {
  const int kk = g.K * g.K, channels = g.R / kk, chunk = kGemmMaxR / kk;
  for (int c0 = 0; c0 < channels; c0 += chunk) {
    GemmGeometry part = g;
    part.R = std::min(chunk, channels - c0) * kk;
    part.accumulate = c0 > 0;
    const float* k_part = k + c0 * kk;
    part.vector_a = part.R % 4 == 0 && part.k_stride % 4 == 0 &&
                    reinterpret_cast<std::uintptr_t>(k_part) % sizeof(float4) == 0;
    launch(x + std::int64_t{c0} * g.HW, k_part, part);
  }
}

// One configuration of the GEMM kernel: its shared memory opted in, then launched.
template <int BM, int BN, int WM, int WN, int BK, int kStages, int kMinBlocks>
bool launch_gemm_config(float* y, const float* x, const float* k, GemmGeometry g,
                        cudaStream_t stream, int parts) {
  g.m_tiles = ceil_div(g.M, BM);
  const std::int64_t blocks = g.m_tiles * ceil_div<std::int64_t>(g.N, BN);
  if (blocks > INT_MAX) return false;
  const int R = g.split_channels > 0 ? g.split_channels * g.K * g.K : g.R;  // the longest part
  const std::size_t smem = GemmStage<BM, BN, BK, kStages>::bytes(R);
  const auto launch = [&](auto* kernel) {
    allow_dynamic_shared_memory(kernel, static_cast<std::int64_t>(smem), "conv_best");
    kernel<<<dim3(static_cast<unsigned>(blocks), parts), WM * WN * 32, smem, stream>>>(y, x, k,
                                                                                      g);
  };
  if (g.split_channels > 0) {
    launch(conv_best_gemm_kernel<BM, BN, WM, WN, BK, kStages, kMinBlocks, true>);
  } else {
    launch(conv_best_gemm_kernel<BM, BN, WM, WN, BK, kStages, kMinBlocks, false>);
  }
  CUDA_CHECK_LAUNCH();
  return true;
}

// The GEMM path for a plain conv; false (nothing launched) for the shapes the tiled kernels run
// faster: C = 1, short sums (C*K*K < 32) and few maps (M <= 8, or M <= 16 with sums of at most 512
// terms: a split operand then feeds too few products to pay for its split). Sums longer than the
// offset table run in chunks of channels (for_channel_chunks). Tiles (launch_gemm) measured on an
// H100 (VGG-16 and small-M layers): 16x128 with 16-row steps and 4 stages for M <= 16, then 3
// stages: 32x128 for M <= 32, 64x128 for M <= 64, 128x128 with two blocks per SM (it spills 84
// bytes, still the fastest) when that grid fills the GPU twice, else 64x64 with four blocks per SM.
// For 9 to 16 maps the stream kernel ran faster up to 400 terms (C = 16, K = 5 on 20x20: 1.34
// against 1.55 ms; LeNet's conv2: 2.66 against 3.76), as fast at 432, and slower at 576 (C = 64, K
// = 3, 1000 images: 0.357 against 0.289).
// launch_gemm's tile height up to 64 maps (more maps: 128 or 64 rows, by the grid's size).
constexpr int gemm_tile_rows(int M) { return M <= 16 ? 16 : M <= 32 ? 32 : 64; }

bool launch_gemm(float* y, const float* x, const float* k, const GemmGeometry& g,
                 cudaStream_t stream, int parts = 1) {
  const int rows = gemm_tile_rows(g.M);
  if (rows == 16) return launch_gemm_config<16, 128, 1, 4, 16, 4, 4>(y, x, k, g, stream, parts);
  if (rows == 32) return launch_gemm_config<32, 128, 1, 4, 32, 3, 1>(y, x, k, g, stream, parts);
  if (g.M <= 64) return launch_gemm_config<64, 128, 2, 4, 32, 3, 2>(y, x, k, g, stream, parts);
  const int sms = multiprocessor_count();
  if (ceil_div(g.M, 128) * ceil_div<std::int64_t>(g.N, 128) >= 2 * sms) {
    return launch_gemm_config<128, 128, 2, 4, 16, 3, 2>(y, x, k, g, stream, parts);
  }
  return launch_gemm_config<64, 64, 2, 2, 32, 3, 4>(y, x, k, g, stream, parts);
}

// A workspace of `bytes` from the device's stream-ordered pool, which keeps what it holds
// between calls (so that only the first call pays for the memory); nullptr without memory pools
// or without the memory (the caller then runs another path). Freed with cudaFreeAsync.
void* pool_workspace(std::size_t bytes, cudaStream_t stream) {
  int device = 0;
  cudaMemPool_t pool = nullptr;
  std::uint64_t keep = UINT64_MAX;
  void* workspace = nullptr;
  if (cudaGetDevice(&device) != cudaSuccess ||
      cudaDeviceGetDefaultMemPool(&pool, device) != cudaSuccess ||
      cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep) != cudaSuccess ||
      cudaMallocAsync(&workspace, bytes, stream) != cudaSuccess) {
    (void)cudaGetLastError();
    return nullptr;
  }
  return workspace;
}

// y = the sum of `parts` partial outputs of n floats each, `stride` floats apart, in order (the
// same result every call).
__global__ void conv_best_sum_parts_kernel(float* __restrict__ y, const float* __restrict__ parts,
                                           int count, std::int64_t n, std::int64_t stride) {
  for (std::int64_t i = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x; i < n;
       i += std::int64_t{gridDim.x} * blockDim.x) {
    float sum = parts[i];
    for (int p = 1; p < count; ++p) sum += parts[p * stride + i];
    y[i] = sum;
  }
}

// Runs launch(partial) into `parts` copies of y (n floats each, `stride` floats apart) from the
// stream-ordered pool, then adds them into y in order (the same result every call). False where
// the workspace cannot be had or launch launched nothing (it returns false).
template <typename Launch>
bool run_parts(float* y, std::int64_t n, int parts, std::int64_t stride, cudaStream_t stream,
               Launch&& launch) {
  auto* partial = static_cast<float*>(
      pool_workspace(static_cast<std::size_t>(parts * stride) * sizeof(float), stream));
  if (partial == nullptr) return false;
  const bool launched = launch(partial);
  if (launched) {
    conv_best_sum_parts_kernel<<<grid_stride_blocks(n, 256, 4 * multiprocessor_count()), 256, 0,
                                 stream>>>(y, partial, parts, n, stride);
    CUDA_CHECK_LAUNCH();
  }
  CUDA_CHECK(cudaFreeAsync(partial, stream));
  return launched;
}

// Grids that leave most SMs idle with a long sum (few pixels, many channels: C = 1030 on 84
// pixels took 0.64 ms on one block per chunk): the channels split into parts of at least
// kSplitMinTerms terms, each part's product on its own blocks (blockIdx.y) into its own copy of
// y in a pooled workspace, then one kernel adds the parts. False (nothing launched) where the
// grid is large enough, the sum too short, or the workspace cannot be had.
constexpr int kSplitMinTerms = 256;
constexpr int kSplitMaxParts = 32;
// Blocks of launch_gemm's grid, or fewer (its tiles are smaller above 64 maps).
std::int64_t gemm_grid_blocks(const GemmGeometry& g) {
  return ceil_div(g.M, gemm_tile_rows(g.M)) * ceil_div<std::int64_t>(g.N, 128);
}

bool run_gemm_split(float* y, const float* x, const float* k, GemmGeometry g,
                    cudaStream_t stream) {
  const int sms = multiprocessor_count(), kk = g.K * g.K, channels = g.R / kk;
  const std::int64_t blocks = gemm_grid_blocks(g);
  if (2 * blocks > sms) return false;
  const int by_grid = static_cast<int>(ceil_div<std::int64_t>(sms, blocks));
  const int by_sum = g.R / kSplitMinTerms, by_table = ceil_div(g.R, kGemmMaxR);
  const int wanted = std::min({by_grid, by_sum, kSplitMaxParts});
  if (wanted < 2 || wanted < by_table) return false;
  g.split_channels = std::min(ceil_div(channels, wanted), kGemmMaxR / kk);  // table-bounded
  const int parts = ceil_div(channels, g.split_channels);
  if (parts < 2) return false;  // one channel: nothing to split
  g.split_y = g.N * g.M;
  // A part's filters start at c0 * K*K floats: float4 loads need that a multiple of 4.
  g.vector_a = g.vector_a && g.split_channels * kk % 4 == 0;
  return run_parts(y, g.split_y, parts, g.split_y, stream,
                   [&](float* partial) { return launch_gemm(partial, x, k, g, stream, parts); });
}

// The FMA kernels' split sums (the channel-streaming kernel, plain, and the one-thread kernel):
// grids of at most half the blocks the SMs hold at once, with a long sum, split its channels
// into parts of kSplitMinTerms terms or more, enough to fill the SMs, each part on blocks of
// its own (blockIdx.y) into its own copy of y, added after in order. 1: no split.
int channel_parts(int C, int K, std::int64_t blocks, int blocks_per_sm) {
  const std::int64_t room = std::int64_t{blocks_per_sm} * multiprocessor_count();
  if (blocks <= 0 || 2 * blocks > room) return 1;
  const int by_grid = static_cast<int>(ceil_div<std::int64_t>(room, blocks));
  const int by_sum = C * K * K / kSplitMinTerms;
  return std::max(1, std::min({by_grid, by_sum, C, kSplitMaxParts}));
}

// Runs launch(partial, parts, c_part, stride) for a sum split into `parts` parts of c_part
// channels (a multiple of `granule`), part p's y at partial + p * stride (whole float4s apart),
// then adds the parts into y (n floats). False (nothing launched) without the workspace.
template <typename Launch>
bool run_channel_parts(float* y, std::int64_t n, int C, int parts, cudaStream_t stream,
                       Launch&& launch, int granule = 1) {
  const int c_part = ceil_div(ceil_div(C, parts), granule) * granule;
  parts = ceil_div(C, c_part);
  const std::int64_t stride = ceil_div<std::int64_t>(n, 4) * 4;
  return run_parts(y, n, parts, stride, stream, [&](float* partial) {
    launch(partial, parts, c_part, stride);
    return true;
  });
}

// Blocks of the channel-streaming kernel's first launch for a plain layer; 0 where one map's
// filter is too large for it (the GEMM then takes the layer).
std::int64_t stream_grid_blocks(const ConvShape& s) {
  const Geometry g = make_geometry(nullptr, nullptr, s, false, kTileH, kStreamTileW);
  return stream_blocks(g.tiles, stream_launch_maps(s.M, s.C, s.K));
}

// Layers with C > 1 and K <= kMaxK: whether the channel-streaming kernel runs them faster than
// the GEMM, whose 16-row tiles are mostly padding with few maps. Measured on an H100 (fastest
// of 10, L2 flushed):
//  - Short sums (under 32 terms), up to 8 maps, and 9 to 16 maps with sums under 256 terms:
//    the streaming kernel (64 images of 64x64, 16 maps, 100 terms: 0.040 against 0.057 ms; 200
//    terms 0.079 against 0.088), but from 300 terms on 9 to 16 maps ran faster on the GEMM (16
//    maps, 300 terms: 0.140 against 0.120; 500 terms 0.298 against 0.191; 12 maps 0.215
//    against 0.192).
//  - Not where its grid would be under a quarter of the SMs: there the GEMM's many smaller
//    blocks wait less (grids of 2 to 30 streaming blocks: C = 16, one map, K = 3 on 16 images
//    of 32x32 0.023 to 0.014 ms; C = 2, 6 maps, K = 2 on 128 images 0.0098 to 0.0074; C = 4, 4
//    maps, K = 5 on 48 images 0.022 to 0.015; from 39 blocks on the streaming kernel was
//    faster: C = 4, 4 maps, K = 5 on 100 images 0.022 against 0.025, 10,000 images 0.30
//    against 1.43).
//  - Nor, with 4 maps or more, for sums of 256 terms or more on grids under half the SMs,
//    which leave SMs idle for longer (39 to 47 blocks: 8 maps, C = 300, K = 5 on 64 images of
//    40x40 4.49 to 1.07 ms, cuDNN 1.36; C = 16, K = 5 on 100 images of 32x32 0.103 to 0.069; 4
//    maps, C = 300 2.25 to 1.07; with 1 to 3 maps the streaming kernel stays faster: 3 maps,
//    392 terms 0.048 against 0.068).
//  - `split` (the plain launcher): with 1 to 3 maps, the grid counts the parts the streaming
//    kernel splits a long sum into (channel_parts), so small grids stay on it (256 images:
//    C = 37, 3 maps, K = 7 on 32x9 0.133 on the GEMM, 0.048 split; C = 200, 3 maps, K = 3 on
//    10x10 0.108 to 0.049; C = 64, 2 maps, K = 5 on 12x12 0.096 to 0.056).
bool stream_beats_gemm(const ConvShape& s, bool split) {
  const int R = s.C * s.K * s.K;
  std::int64_t blocks = stream_grid_blocks(s);
  const int sms = multiprocessor_count();
  // Plain, 1 to 3 maps: the grid the split sum gives (launch_stream), where the GEMM's tiles
  // are mostly padding.
  if (split && s.M < 4 && s.K <= kMaxK && stream_launch_maps(s.M, s.C, s.K) == s.M) {
    blocks *= channel_parts(s.C, s.K, blocks, kStreamBlocksPerSm);
  }
  const bool few_maps = s.M <= 8 || (s.M <= 16 && R < 256);
  const bool long_sum_small_grid = s.M >= 4 && R >= 256 && 2 * blocks < sms;
  return s.C > 1 && s.K <= kMaxK && (R < 32 || few_maps) && !long_sum_small_grid &&
         4 * blocks >= sms;
}

bool run_gemm(float* y, const float* x, const float* k, const ConvShape& s, cudaStream_t stream) {
  const GemmGeometry g = make_gemm_geometry(s, k);
  // Filters larger than every tiled kernel's (K > kMaxK, or C > 1 with one map's filter above
  // the streaming kernel's constant memory) have only the one-thread-per-output kernel left,
  // which the GEMM beats from 5 maps on, C = 1 included (H100: C = 1, 64 maps, K = 9 0.448 to
  // 0.097 ms; 16 maps 0.232 to 0.081; C = 3, 16 maps, K = 11 0.128 to 0.044). Not with 4 maps
  // or fewer, three quarters of its columns or more padding (2 maps, K = 15: 0.031 against 0.071
  // ms; 2 maps, C = 400, K = 7 on 64 images of 40x40: 2.23 against 3.00), nor with C = 1 on
  // grids that fill at most half the SMs, whose sum cannot be split by channels (64 maps, K =
  // 23, 18x18 outputs: 0.030 against 0.048).
  const int sms = multiprocessor_count();
  const bool only_fallback_left = s.K > kMaxK || stream_launch_maps(s.M, s.C, s.K) == 0;
  const bool declined = only_fallback_left
                            ? s.M <= 4 || (s.C == 1 && 2 * gemm_grid_blocks(g) <= sms)
                            : s.C == 1 || stream_beats_gemm(s, true);
  if (declined || s.K * s.K > kGemmMaxR) return false;
  if (run_gemm_split(y, x, k, g, stream)) return true;
  bool launched = true;  // false when the first chunk's grid was too large: nothing launched
  auto launch = [&](const float* x_part, const float* k_part, const GemmGeometry& part) {
    launched = launched && launch_gemm(y, x_part, k_part, part, stream);
  };
  for_channel_chunks(g, x, k, launch);
  return launched;
}

// C > 1 with at most 32 maps and sums of up to a few hundred terms (LeNet's conv2, odd-shapes'
// conv2): the same 3xTF32 product, but X comes from whole images staged in shared memory
// instead of a per-term gather from global memory (each input value feeds K*K terms: the
// gather loads it K*K times, the staged image once). A block stages a chunk of consecutive
// images (one contiguous copy, cp.async, the next chunk's while this one is multiplied); a
// warp task is 32 consecutive outputs of the chunk, two 16-row A fragments whose rows are
// outputs and columns the sum's terms, read straight from the image at the output's offset
// plus the term's. B holds 8 maps per fragment; the filters are split into big and small once
// per block and kept in shared memory in fragment order, so that a lane's four values for a
// step and a map fragment are one 16-byte load. The outputs' offsets (in the chunk and in y)
// are a table built once per block: they are the same for every chunk. Fused with tanh and the
// 2x2 max-pool, the table orders the outputs by window, so that a lane holds whole windows.
constexpr int kImageWarps = 8, kImageThreads = 32 * kImageWarps;
constexpr int kImageMaxMapFrags = 4;          // 32 maps
constexpr int kImageChunkFloats = 12 * 1024;  // images per chunk: 48 KB at most
constexpr int kImageFilterBytes = 64 * 1024;  // the split filters at most
constexpr int kImageSharedMax = 110 * 1024;   // two blocks per SM
// 16-output A fragments per warp task (4 measured 0-5% slower with up to 16 maps).
constexpr int kImageFrags = 2;

struct ImageGeometry {
  int M, R, steps;        // maps, the sum's length C*K*K, steps of 8 terms
  int steps8;             // steps of 8 terms; the last one has 4 or fewer when steps8 < steps
  int K, H, W, W_out, P;  // P: output pixels per image
  int PY, OWY;            // one map of y: its pixels and row length (pooled: a quarter of P)
  int image;              // C*H*W, one image of x
  int B, group;           // images, and images per chunk
  int chunks;             // ceil(B / group)
  int chunk_floats;       // group * image, rounded up to whole float4s
  int outputs;            // A rows of a full chunk: group * P, or pooled, 4 per window of
                          // y (group * PY) rounded up to whole tasks of 8 windows

  // Shared memory: split filters [steps][NT][32] (uint4), term offsets [steps][4] (int2), the
  // outputs' offsets in the chunk and in y (int each), then two chunk buffers.
  __host__ __device__ int filter_bytes(int NT) const { return steps * NT * 32 * 16; }
  __host__ __device__ int table_bytes() const {
    return steps * 4 * 8 + (outputs * 2 * 4 + 15) / 16 * 16;
  }
  int bytes(int NT) const {
    return filter_bytes(NT) + table_bytes() + 2 * chunk_floats * static_cast<int>(sizeof(float));
  }
};

// Copies n floats from global to shared memory, 16 bytes at a time where both allow it (one
// cp.async group).
__device__ __forceinline__ void copy_chunk(float* dst, const float* src, int n) {
  const int tid = static_cast<int>(threadIdx.x);
  if (n % 4 == 0 && reinterpret_cast<std::uintptr_t>(src) % 16 == 0) {
    for (int i = 4 * tid; i < n; i += 4 * kImageThreads) cp_async16(dst + i, src + i, true);
  } else {
    for (int i = tid; i < n; i += kImageThreads) cp_async4(dst + i, src + i, true);
  }
  cp_async_commit();
}

// The float at byte `address` of shared memory: a 32-bit address, so one add per load.
__device__ __forceinline__ float load_shared(unsigned address) {
  float v;
  asm volatile("ld.shared.f32 %0, [%1];" : "=f"(v) : "r"(address));
  return v;
}

// acc[f][n] += A_f x B[n] for one step of 8 terms on F fragments of A, 3xTF32: fragment f's
// rows g and g + 8 are the staged inputs at shared addresses rows[f][0] and rows[f][1] plus
// the terms' byte offsets o.x (terms t) and o.y (t + 4), split here; b[n] the step's split
// filters of map fragment n. Products outermost: consecutive products into one accumulator
// are F * NT apart, so a warp has that many independent products to issue between them (F = 4
// against one fragment at a time in the band kernel, H100: C = 48, 12 maps, K = 9 on 20x20
// 0.143 to 0.123 ms; C = 300, 2 maps, K = 7 on 40x40 1.054 to 0.971). Each accumulator takes
// the same products in the same order whatever F is.
template <int F, int NT>
__device__ __forceinline__ void staged_step_3xtf32(float (&acc)[F][NT][4],
                                                   const unsigned (&rows)[F][2], int2 o,
                                                   const uint4 (&b)[NT]) {
  std::uint32_t ab[F][4], as[F][4];
#pragma unroll
  for (int f = 0; f < F; ++f) {
    split_tf32(load_shared(rows[f][0] + o.x), ab[f][0], as[f][0]);
    split_tf32(load_shared(rows[f][1] + o.x), ab[f][1], as[f][1]);
    split_tf32(load_shared(rows[f][0] + o.y), ab[f][2], as[f][2]);
    split_tf32(load_shared(rows[f][1] + o.y), ab[f][3], as[f][3]);
  }
  // small x big, big x small, then big x big: the small products first, as everywhere.
#pragma unroll
  for (int product = 0; product < 3; ++product) {
#pragma unroll
    for (int f = 0; f < F; ++f) {
#pragma unroll
      for (int n = 0; n < NT; ++n) {
        const std::uint32_t bb[2] = {b[n].x, b[n].y}, bs[2] = {b[n].z, b[n].w};
        mma_tf32(acc[f][n], product == 0 ? as[f] : ab[f], product == 1 ? bs : bb);
      }
    }
  }
}

// A rows of `images` images (ImageGeometry::outputs), conv + tanh + 2x2 max-pool when `pool`.
__host__ __device__ inline int image_rows(const ImageGeometry& g, int images, bool pool) {
  return pool ? (images * g.PY + 7) / 8 * 32 : images * g.P;
}

// kPool: conv + tanh + 2x2 max-pool. A task's 32 rows are then 8 windows, row 16f + 8h + g
// the corner 2f + h of window g: the lane that holds a row's accumulators holds the window's
// other three corners too, and pools them with no shuffle.
template <int NT, bool kPool>
__global__ void __launch_bounds__(kImageThreads, 2)
    conv_best_image_kernel(float* __restrict__ y, const float* __restrict__ x,
                           const float* __restrict__ k, const ImageGeometry g) {
  static_assert(!kPool || kImageFrags == 2, "a window's four corners are two fragments' rows");
  // Steps unrolled: measured per map fragments (H100; unrolled by 2, not unrolled): 1, M = 8,
  // C = 6, K = 7 on 30x30: 0.77 against 0.83 ms; 2, LeNet's conv2: 1.37 against 1.33; 3,
  // odd-shapes' conv2: 0.195 against 0.199; 4, M = 32, C = 16, K = 3 on 16x16: 0.372 against
  // 0.370.
  constexpr int kStepUnroll = NT % 2 == 0 ? 1 : 2;
  extern __shared__ float4 smem4[];
  auto* filters = reinterpret_cast<uint4*>(smem4);
  auto* terms = reinterpret_cast<int2*>(filters + g.steps * NT * 32);
  int* in_chunk = reinterpret_cast<int*>(terms + g.steps * 4);  // bytes from the chunk's start
  int* in_y = in_chunk + g.outputs;                             // floats from the chunk's y
  float* buffers = reinterpret_cast<float*>(smem4) + g.table_bytes() / 4 + g.filter_bytes(NT) / 4;

  const int tid = static_cast<int>(threadIdx.x);
  const auto chunk_at = [&](int chunk) { return x + std::int64_t{chunk} * g.group * g.image; };
  const auto chunk_size = [&](int chunk) {
    return std::min(g.group, g.B - chunk * g.group) * g.image;
  };
  int chunk = static_cast<int>(blockIdx.x);
  if (chunk < g.chunks) copy_chunk(buffers, chunk_at(chunk), chunk_size(chunk));
  // While the first chunk is on its way: the split filters, the terms and the outputs.
  for (int i = tid; i < g.steps * NT * 32; i += kImageThreads) {
    const int lane = i % 32, n = i / 32 % NT, s = i / (32 * NT);
    const int m = n * 8 + lane / 4, r = s * 8 + lane % 4;
    const bool map = m < g.M;
    const float* row = k + std::int64_t{m} * g.R;
    uint4 f;
    split_tf32(map && r < g.R ? __ldg(row + r) : 0.0f, f.x, f.z);
    split_tf32(map && r + 4 < g.R ? __ldg(row + r + 4) : 0.0f, f.y, f.w);
    filters[i] = f;
  }
  const auto term = [&](int r) {  // past the sum: the output's own pixel, times a zero filter
    return r < g.R ? 4 * sum_term_offset(r, g.K, g.W, g.H * g.W) : 0;
  };
  for (int i = tid; i < g.steps * 4; i += kImageThreads) {
    const int r = i / 4 * 8 + i % 4;
    terms[i] = {term(r), term(r + 4)};
  }
  for (int q = tid; q < g.outputs; q += kImageThreads) {
    if constexpr (kPool) {  // past the chunk's windows: its first pixel, never stored
      const int window = q / 32 * 8 + q % 8, corner = q % 32 / 8;
      const int b = window / g.PY, p = window - b * g.PY, ph = p / g.OWY;
      const int h = 2 * ph + corner / 2, w = 2 * (p - ph * g.OWY) + corner % 2;
      in_chunk[q] = b < g.group ? 4 * (b * g.image + h * g.W + w) : 0;
      in_y[q] = b * g.M * g.PY + p;
    } else {
      const int b = q / g.P, p = q - b * g.P, h = p / g.W_out;
      in_chunk[q] = 4 * (b * g.image + h * g.W + p - h * g.W_out);
      in_y[q] = b * g.M * g.P + p;
    }
  }

  const int warp = tid / 32, lane = tid % 32, gq = lane / 4, tq = lane % 4;
  for (int buffer = 0; chunk < g.chunks; chunk += gridDim.x, buffer ^= 1) {
    const int next = chunk + static_cast<int>(gridDim.x);
    if (next < g.chunks) {
      copy_chunk(buffers + (buffer ^ 1) * g.chunk_floats, chunk_at(next), chunk_size(next));
      cp_async_wait<1>();
    } else {
      cp_async_wait<0>();
    }
    __syncthreads();  // this chunk (and, the first time, the tables) are in
    const unsigned img = shared_address(buffers + buffer * g.chunk_floats);
    const int images = chunk_size(chunk) / g.image;
    const int outputs = image_rows(g, images, kPool);
    float* const y_chunk = y + std::int64_t{chunk} * g.group * g.M * g.PY;

    for (int task = warp; task * 16 * kImageFrags < outputs; task += kImageWarps) {
      // This lane's A rows: outputs q and q + 8 of each fragment (past the chunk: its last).
      const int first = task * 16 * kImageFrags;  // the task's first output
      unsigned rows[kImageFrags][2];
#pragma unroll
      for (int f = 0; f < kImageFrags; ++f) {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          rows[f][h] = img + in_chunk[std::min(first + 16 * f + 8 * h + gq, outputs - 1)];
        }
      }
      float acc[kImageFrags][NT][4] = {};
      const uint4* f_step = filters + lane;
#pragma unroll kStepUnroll
      for (int s = 0; s < g.steps8; ++s, f_step += NT * 32) {
        const int2 o = terms[4 * s + tq];
        uint4 b[NT];
#pragma unroll
        for (int n = 0; n < NT; ++n) b[n] = f_step[n * 32];
        staged_step_3xtf32(acc, rows, o, b);
      }
      if (g.steps8 < g.steps) {  // a last step of 4 terms or fewer: half the products
        const int o = terms[4 * g.steps8 + tq].x;
#pragma unroll
        for (int f = 0; f < kImageFrags; ++f) {
          std::uint32_t ab[2], as[2];
          split_tf32(load_shared(rows[f][0] + o), ab[0], as[0]);
          split_tf32(load_shared(rows[f][1] + o), ab[1], as[1]);
#pragma unroll
          for (int n = 0; n < NT; ++n) {
            const uint4 b = f_step[n * 32];
            mma_tf32_k4(acc[f][n], as, b.x);
            mma_tf32_k4(acc[f][n], ab, b.z);
            mma_tf32_k4(acc[f][n], ab, b.x);
          }
        }
      }
      // acc[f][n]: outputs q (elements 0, 1) and q + 8 (2, 3) of maps 8n + 2tq (+1).
      if constexpr (kPool) {  // the max of the window's corners, then one tanh
        if (first / 4 + gq < images * g.PY) {
          float* out = y_chunk + in_y[first + gq];
#pragma unroll
          for (int n = 0; n < NT; ++n) {
            const int m = 8 * n + 2 * tq;
            const float* a = acc[0][n];
            const float* c = acc[1][n];
            const float v0 = fmaxf(fmaxf(a[0], a[2]), fmaxf(c[0], c[2]));
            const float v1 = fmaxf(fmaxf(a[1], a[3]), fmaxf(c[1], c[3]));
            if (m < g.M) out[std::int64_t{m} * g.PY] = tanh_fast(v0);
            if (m + 1 < g.M) out[std::int64_t{m + 1} * g.PY] = tanh_fast(v1);
          }
        }
      } else {
#pragma unroll
        for (int f = 0; f < kImageFrags; ++f) {
#pragma unroll
          for (int h = 0; h < 2; ++h) {
            const int q = first + 16 * f + 8 * h + gq;
            if (q >= outputs) continue;
            float* out = y_chunk + in_y[q];
#pragma unroll
            for (int n = 0; n < NT; ++n) {
              const int m = 8 * n + 2 * tq;
              if (m < g.M) out[std::int64_t{m} * g.P] = acc[f][n][2 * h];
              if (m + 1 < g.M) out[std::int64_t{m + 1} * g.P] = acc[f][n][2 * h + 1];
            }
          }
        }
      }
    }
    __syncthreads();  // this buffer is no longer read: the copy after next may go into it
  }
}

// The image kernel with NT fragments of 8 maps, one block per chunk up to two per SM.
template <int NT, bool kPool>
void launch_image(float* y, const float* x, const float* k, const ImageGeometry& g,
                  cudaStream_t stream) {
  const auto kernel = conv_best_image_kernel<NT, kPool>;
  allow_dynamic_shared_memory(kernel, g.bytes(NT), kPool ? "conv_tanh_maxpool_best" : "conv_best");
  const int sms = multiprocessor_count();
  const int blocks = std::min(g.chunks, 2 * sms);
  kernel<<<blocks, kImageThreads, static_cast<std::size_t>(g.bytes(NT)), stream>>>(y, x, k, g);
  CUDA_CHECK_LAUNCH();
}

// The image path's geometry for a plain conv; group 0 where the path does not take the shape:
// where it does not fit (C = 1, more than 32 maps, or an image, a sum or a table too large for
// its shared memory) or where the stream kernel measured faster on an H100: up to 4 maps (half
// of B's columns or more are padding: M = 4, C = 4, K = 5 on 32x32, 0.30 against 0.38 ms;
// M = 2, 0.26 against 0.43) and up to 8 maps with sums under 32 terms (M = 8, C = 2, K = 3 on
// 28x28: 0.139 against 0.156).
ImageGeometry image_geometry(const ConvShape& s, bool pool = false) {
  ImageGeometry g{};
  g.M = s.M;
  g.R = s.C * s.K * s.K;
  g.steps = ceil_div(g.R, 8);
  g.steps8 = g.R % 8 != 0 && g.R % 8 <= 4 ? g.steps - 1 : g.steps;
  g.K = s.K;
  g.H = s.H;
  g.W = s.W;
  g.W_out = s.W_out();
  g.P = s.H_out() * s.W_out();
  g.OWY = pool ? s.W_out() / 2 : s.W_out();  // PoolShape{2, 2}.out(n) is n / 2
  g.PY = pool ? s.H_out() / 2 * g.OWY : g.P;
  g.image = s.C * s.H * s.W;
  g.B = s.B;
  const int NT = ceil_div(s.M, 8);
  if (s.M <= 4 || (s.M <= 8 && g.R < 32)) return g;
  if (s.C == 1 || NT > kImageMaxMapFrags || g.image > kImageChunkFloats || g.PY == 0 ||
      g.filter_bytes(NT) > kImageFilterBytes) {
    return g;
  }
  // Images per chunk: of those that fit, the fewest that keep the warps' last round of tasks
  // the fullest.
  constexpr int task = 16 * kImageFrags;
  double best_use = 0.0;
  for (int group = 1; group <= std::min(s.B, kImageChunkFloats / g.image); ++group) {
    ImageGeometry t = g;
    t.chunk_floats = ceil_div(group * g.image, 4) * 4;
    t.outputs = image_rows(g, group, pool);
    if (t.bytes(NT) > kImageSharedMax) break;
    const int tasks = ceil_div(t.outputs, task);
    const double use = static_cast<double>(pool ? 4 * group * g.PY : t.outputs) /
                       (ceil_div(tasks, kImageWarps) * kImageWarps * task);
    if (use > best_use + 1e-3) best_use = use, g.group = group;
  }
  if (g.group == 0) return g;
  g.chunks = ceil_div(s.B, g.group);
  g.chunk_floats = ceil_div(g.group * g.image, 4) * 4;
  g.outputs = image_rows(g, g.group, pool);
  return g;
}

// Calls f(std::integral_constant<int, NT>{}) with NT = nt for nt from kFirst to kLast - 1, and
// NT = kLast otherwise: kernels that take their fragments of 8 maps as a template parameter.
template <int kFirst, int kLast, typename F>
void dispatch_frags(int nt, F&& f) {
  if constexpr (kFirst < kLast) {
    if (nt == kFirst) {
      f(std::integral_constant<int, kFirst>{});
    } else {
      dispatch_frags<kFirst + 1, kLast>(nt, f);
    }
  } else {
    f(std::integral_constant<int, kLast>{});
  }
}

// 1 to kImageMaxMapFrags fragments (the geometries decline more): the staged-image and band
// kernels.
template <typename F>
void dispatch_map_frags(int nt, F&& f) {
  dispatch_frags<1, kImageMaxMapFrags>(nt, f);
}

// The image path for a plain conv; false (nothing launched) where image_geometry declines.
template <bool kPool>
bool run_image(float* y, const float* x, const float* k, const ConvShape& s, cudaStream_t stream) {
  const ImageGeometry g = image_geometry(s, kPool);
  if (g.group == 0) return false;
  dispatch_map_frags(ceil_div(s.M, 8), [&](auto frags) {
    launch_image<decltype(frags)::value, kPool>(y, x, k, g, stream);
  });
  return true;
}

// ---- C > 1, few maps, images too large to stage whole: tiles of outputs, channels in chunks --
//
// The staged-image product above (3xTF32, pixels as A's rows, 8 maps per B fragment) for
// images over its 48 KB, or sums whose split filters do not fit in shared memory: a block
// takes a tile of up to kBandOutputs consecutive outputs (a band of whole output rows of one
// image, or several whole images where an image has few outputs) and walks the sum's channels
// in chunks. Each chunk's input rows (the band's rows plus K - 1 below, every column) and its
// split filters come to shared memory by cp.async, the next chunk's while this one is
// multiplied; the accumulators stay in registers across chunks, two tasks of 32 rows of A a
// warp. The filters are split into big and small once per call, into a workspace in the
// fragment order of the staged-image kernel, chunk after chunk, so a block copies a chunk's
// filters with 16-byte loads and splits nothing. Before it, these layers ran the gathering
// GEMM, the channel-streaming kernel or, above 7x7 with few maps, the one-thread kernel (256
// images, H100, fastest of 10, the same run; cuDNN's fastest fp32 algorithm beside):
//   C = 19, 13 maps, K = 4 on 58x83      0.514 to 0.419 ms (cuDNN 0.359)
//   C = 93, 10 maps, K = 8 on 32x35      1.774 to 0.881 (0.315)
//   C = 67, 8 maps, K = 5 on 36x92       2.112 to 0.758 (0.902)
//   C = 300, 8 maps, K = 5 on 40x40      5.817 to 1.305 (1.783)
//   C = 16, 16 maps, K = 5 on 100x100    1.383 to 0.747 (0.803)
//   C = 32, 24 maps, K = 3 on 64x64      0.556 to 0.291 (0.611)
//   C = 8, 32 maps, K = 7 on 64x64       0.681 to 0.409 (0.336)
//   C = 48, 12 maps, K = 9 on 20x20      0.308 to 0.143 (0.105)
// One measured shape is slower than the GEMM it replaced: C = 128, 32 maps, K = 3 on 30x30,
// 0.424 to 0.499 ms (its 28-row outputs fill 77% of the tiles' rows; cuDNN 0.24).
//
// With 4 maps or fewer, most of B's 8 columns would be padding; they hold `shift` copies of
// each map's filter instead, copy j moved j columns right (shift = 8, 4, 2 for 1, 2, 3-4
// maps): a row of A is then `shift` consecutive outputs of a row of y, its terms K x (K +
// shift - 1) per channel, and column (m, j) gives output w + j of map m. A staged channel ends
// in zeros, so that a last row's terms past the image read zeros. Against the routes before
// it (same run): C = 502, 2 maps, K = 11 on 26x14 0.987 to 0.502 ms (cuDNN 0.670); C = 300,
// 2 maps, K = 7 on 40x40 4.513 to 1.055 (1.769); C = 64, 4 maps, K = 5 on 64x64 1.087 to
// 0.517 (0.928); C = 53, one map, K = 7 on 15x46 0.137 to 0.100 (0.129); C = 12, 3 maps, K = 8
// 0.085 to 0.039 (0.138). Slower up to K = 4 (C = 135, 2 maps, K = 4 on 9x21 0.079 against
// 0.068; C = 32, one map, K = 3 on 100x100 0.299 against 0.248) and with 3 maps up to 7x7,
// where 2 of the 8 columns stay padding (C = 37, K = 7 on 32x9 0.051 against 0.048; C = 48,
// K = 6 on 20x11 0.049 against 0.046): those keep the earlier routes.
constexpr int kBandWarps = 8, kBandThreads = 32 * kBandWarps;
constexpr int kBandTasks = 2;  // tasks of 32 rows of A per warp (the kernel's step assumes 2)
constexpr int kBandOutputs = 32 * kBandTasks * kBandWarps;  // rows of A per tile at most
constexpr int kBandSharedMax = 100 * 1024;                  // two blocks per SM
constexpr int kBandMaxChunk = 64;                           // channels per chunk at most
constexpr int kBandMinTerms = 128;                          // shorter sums: other routes
// Terms of one accumulator chain at most: longer sums split into parts added in fp32. The
// tensor core aligns its products to the accumulator and drops their low bits, a bias that
// grows with the chain (C = 300, 2 maps, K = 7, 21,000 terms in one chain: errors up to 0.031
// on outputs of about 100).
constexpr int kBandMaxTerms = 4096;

struct BandGeometry {
  int B, C, M, K, H, W, H_out, W_out, P;  // P: output pixels per image
  int shift;         // outputs per row of A (B's columns per map): 1, or 2 to 8 for 1 to 4 maps
  int shift_log;     // log2(shift): the epilogue's column (m, j) without a division
  int KW;            // terms per filter row: K + shift - 1
  int W_rows;        // rows of A per output row: ceil(W_out / shift)
  int images;        // whole images per tile where an image has few outputs, else 1
  int rows_out;      // output rows per tile (H_out with whole images)
  int rows_in;       // staged input rows per channel: rows_out + K - 1
  int bands;         // tiles per image: ceil(H_out / rows_out)
  int tile_rows;     // rows of A per tile: images * rows_out * W_rows
  std::int64_t tiles;
  int cc, steps;     // channels per chunk, and its steps of 8 terms (the last one padded)
  int plane;         // a staged channel: rows_in * W, then 8 zeros when shift > 1
  int stage_floats;  // one chunk's staged input: images * cc * plane, whole float4s
  bool vector_copy;  // rows of whole float4s on 16-byte boundaries
  int c_part;        // a split sum's channels per part (a multiple of cc; C when not split)
  std::int64_t part_floats;

  // Fragments of 8 columns of B (maps times shifts), and the terms of a chunk's sum.
  __host__ __device__ int frags() const { return (M * shift + 7) / 8; }
  __host__ __device__ int chunk_terms() const { return cc * K * KW; }
  // Shared memory: two chunks' split filters [steps][NT][32] (uint4) and two staged inputs,
  // then the terms' offsets [steps][4] (int2) and the rows' (in the staged chunk, in y, and
  // the outputs left in y's row).
  __host__ __device__ int filter_bytes(int NT) const { return steps * NT * 32 * 16; }
  __host__ __device__ int stage_offset(int NT) const { return 2 * filter_bytes(NT); }
  __host__ __device__ int table_offset(int NT) const {
    return stage_offset(NT) + 2 * stage_floats * 4;
  }
  int bytes(int NT) const { return table_offset(NT) + steps * 4 * 8 + tile_rows * 3 * 4; }
};

// Term r of a chunk (c, p, q: channel, filter row, column of the K x KW row) as an offset in a
// staged chunk.
__host__ __device__ __forceinline__ int band_term_offset(int r, const BandGeometry& g) {
  const int per_channel = g.K * g.KW;
  const int c = r / per_channel, pq = r - c * per_channel, p = pq / g.KW;
  return c * g.plane + p * g.W + (pq - p * g.KW);
}

// The filters split for the band kernel: [chunk][step][NT][32] uint4, as the staged-image
// kernel builds them in shared memory (lane: column 8n + lane / 4, terms r and r + 4 of the
// step, r = 8s + lane % 4, chunk-local; big in x, y and small in z, w). Column (m, j) holds map
// m's filter moved j columns right. Past the sum, the maps or the filter's row: 0.
__global__ void conv_best_band_filters_kernel(uint4* __restrict__ out, const float* __restrict__ k,
                                              const BandGeometry g, int NT, std::int64_t total) {
  const int per_channel = g.K * g.KW, chunk_terms = g.chunk_terms();
  for (std::int64_t i = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x; i < total;
       i += std::int64_t{gridDim.x} * blockDim.x) {
    const int lane = static_cast<int>(i % 32), n = static_cast<int>(i / 32 % NT);
    const std::int64_t step = i / (32 * NT);
    const int s = static_cast<int>(step % g.steps), chunk = static_cast<int>(step / g.steps);
    const int column = 8 * n + lane / 4, m = column / g.shift, j = column - m * g.shift;
    const auto value = [&](int r) {
      const int cl = r / per_channel, pq = r - cl * per_channel, p = pq / g.KW;
      const int q = pq - p * g.KW - j, c = chunk * g.cc + cl;
      return m < g.M && r < chunk_terms && c < g.C && q >= 0 && q < g.K
                 ? __ldg(k + ((std::int64_t{m} * g.C + c) * g.K + p) * g.K + q)
                 : 0.0f;
    };
    const int r = 8 * s + lane % 4;
    uint4 f;
    split_tf32(value(r), f.x, f.z);
    split_tf32(value(r + 4), f.y, f.w);
    out[i] = f;
  }
}

template <int NT>
__global__ void __launch_bounds__(kBandThreads, 2)
    conv_best_band_kernel(float* __restrict__ y, const float* __restrict__ x,
                          const uint4* __restrict__ split_filters, const BandGeometry g) {
  extern __shared__ float4 smem4[];
  auto* smem = reinterpret_cast<unsigned char*>(smem4);
  auto* filters = reinterpret_cast<uint4*>(smem);
  auto* stages = reinterpret_cast<float*>(smem + g.stage_offset(NT));
  auto* terms = reinterpret_cast<int2*>(smem + g.table_offset(NT));
  int* in_stage = reinterpret_cast<int*>(terms + g.steps * 4);  // bytes from the chunk's start
  int* in_y = in_stage + g.tile_rows;                            // floats from the tile's y
  int* room = in_y + g.tile_rows;                                // outputs left in y's row
  const int tid = static_cast<int>(threadIdx.x);

  // This tile: images [b0, b0 + images) from output row h0, its first `rows` rows of A.
  const int tile = static_cast<int>(blockIdx.x);
  const int b0 = tile / g.bands * g.images, h0 = tile % g.bands * g.rows_out;
  const int images = min(g.images, g.B - b0), out_rows = min(g.rows_out, g.H_out - h0);
  const int rows = images * out_rows * g.W_rows, rows_in = out_rows + g.K - 1;
  // This part's channels.
  const int c_begin = static_cast<int>(blockIdx.y) * g.c_part;
  const int chunks = ceil_div(min(g.C, c_begin + g.c_part) - c_begin, g.cc);
  const int chunk0 = c_begin / g.cc;  // the first chunk's index in split_filters
  y += blockIdx.y * g.part_floats + (std::int64_t{b0} * g.M * g.P + std::int64_t{h0} * g.W_out);

  const int chunk_floats = g.steps * NT * 32 * 4, staged = rows_in * g.W;
  const int segment = g.shift > 1 ? g.plane : staged;  // with the zeros after the rows
  const auto issue = [&](int j) {
    const int buffer = j & 1;
    const float* f_src = reinterpret_cast<const float*>(split_filters) +
                         std::int64_t{chunk0 + j} * chunk_floats;
    float* f_dst = reinterpret_cast<float*>(filters) + buffer * chunk_floats;
    for (int i = 4 * tid; i < chunk_floats; i += 4 * kBandThreads) {
      cp_async16(f_dst + i, f_src + i, true);
    }
    // Staged: [image][channel of the chunk][plane]; channels past C are zeros.
    float* s_dst = stages + buffer * g.stage_floats;
    const int c0 = c_begin + j * g.cc, total = images * g.cc * segment;
    const int step = g.vector_copy ? 4 : 1;
    for (int i = step * tid; i < total; i += step * kBandThreads) {
      const int seg = i / segment, at = i - seg * segment;
      const int image = seg / g.cc, c = c0 + seg - image * g.cc;
      const bool valid = c < g.C && at < staged;
      const float* src = valid ? x + (std::int64_t{b0 + image} * g.C + c) * g.H * g.W +
                                     std::int64_t{h0} * g.W + at
                               : x;
      float* dst = s_dst + seg * g.plane + at;
      if (g.vector_copy) {
        cp_async16(dst, src, valid);
      } else {
        cp_async4(dst, src, valid);
      }
    }
    cp_async_commit();
  };
  issue(0);
  // While it is on its way: the terms and the rows of A. Past the chunk's terms: the row's own
  // pixel, times a zero filter.
  for (int i = tid; i < g.steps * 4; i += kBandThreads) {
    const auto term = [&](int r) { return r < g.chunk_terms() ? 4 * band_term_offset(r, g) : 0; };
    const int r = i / 4 * 8 + i % 4;
    terms[i] = {term(r), term(r + 4)};
  }
  for (int q = tid; q < g.tile_rows; q += kBandThreads) {
    const int per_image = g.rows_out * g.W_rows;
    const int image = q / per_image, a = q - image * per_image, h = a / g.W_rows;
    const int w = (a - h * g.W_rows) * g.shift;
    in_stage[q] = 4 * (image * g.cc * g.plane + h * g.W + w);
    in_y[q] = image * g.M * g.P + h * g.W_out + w;
    room[q] = g.W_out - w;
  }

  const int warp = tid / 32, lane = tid % 32, gq = lane / 4, tq = lane % 4;
  // Task t of this warp: rows first[t] + 16f + 8h + gq of A (past the tile: its last row,
  // computed and not stored).
  int first[kBandTasks];
#pragma unroll
  for (int t = 0; t < kBandTasks; ++t) first[t] = (t * kBandWarps + warp) * 32;
  // The tile's row of A that this lane's fragment f of task t holds in its half h.
  const auto row = [&](int t, int f, int h) { return first[t] + 16 * f + 8 * h + gq; };
  float acc[kBandTasks][2][NT][4] = {};
  for (int j = 0; j < chunks; ++j) {
    if (j + 1 < chunks) {
      issue(j + 1);
      cp_async_wait<1>();
    } else {
      cp_async_wait<0>();
    }
    __syncthreads();  // chunk j (and, the first time, the tables) are in
    const unsigned stage = shared_address(stages + (j & 1) * g.stage_floats);
    unsigned at[kBandTasks][2][2];
#pragma unroll
    for (int t = 0; t < kBandTasks; ++t) {
#pragma unroll
      for (int f = 0; f < 2; ++f) {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          at[t][f][h] = stage + in_stage[min(row(t, f, h), rows - 1)];
        }
      }
    }
    const uint4* f_step = filters + (j & 1) * (g.steps * NT * 32) + lane;
#pragma unroll 1
    for (int s = 0; s < g.steps; ++s, f_step += NT * 32) {
      const int2 o = terms[4 * s + tq];
      uint4 b[NT];
#pragma unroll
      for (int n = 0; n < NT; ++n) b[n] = f_step[n * 32];
      // Both tasks' fragments in one step, or the first task's alone on a short tile whose
      // second task is past its rows (the warp as one).
      if (first[1] < rows) {
        staged_step_3xtf32(reinterpret_cast<float(&)[2 * kBandTasks][NT][4]>(acc),
                           reinterpret_cast<const unsigned(&)[2 * kBandTasks][2]>(at), o, b);
      } else if (first[0] < rows) {
        staged_step_3xtf32(acc[0], at[0], o, b);
      }
    }
    __syncthreads();  // this buffer is no longer read: chunk j + 2 may go into it
  }
  // acc[t][f][n]: rows q (elements 0, 1) and q + 8 (2, 3) of columns 8n + 2tq (+1), column
  // (m, j) output w + j of map m.
#pragma unroll
  for (int t = 0; t < kBandTasks; ++t) {
#pragma unroll
    for (int f = 0; f < 2; ++f) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int q = row(t, f, h);
        if (q >= rows) continue;
        float* out = y + in_y[q];
        const int left = room[q];
#pragma unroll
        for (int n = 0; n < NT; ++n) {
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            const int column = 8 * n + 2 * tq + e, m = column >> g.shift_log;
            const int j = column & (g.shift - 1);
            if (m < g.M && j < left) out[std::int64_t{m} * g.P + j] = acc[t][f][n][2 * h + e];
          }
        }
      }
    }
  }
}

// Tiles of `images` whole images (of bands of rows when 1 and an image has too many rows of A),
// and the most channels per chunk that fit beside them: cc and steps, tiles 0 where none does.
BandGeometry band_tiles(BandGeometry g, int images) {
  const int rows_per_image = g.H_out * g.W_rows;
  g.images = images;
  g.rows_out = images > 1 || 2 * rows_per_image <= kBandOutputs
                   ? g.H_out
                   : std::min(g.H_out, kBandOutputs / g.W_rows);
  g.rows_in = g.rows_out + g.K - 1;
  g.bands = ceil_div(g.H_out, g.rows_out);
  g.tile_rows = images * g.rows_out * g.W_rows;
  g.tiles = std::int64_t{ceil_div(g.B, images)} * g.bands;
  g.plane = g.rows_in * g.W + (g.shift > 1 ? 8 : 0);
  // The most channels per chunk that fit (a chunk's sum at most kBandMaxTerms), then as many
  // chunks of as even a size (a last chunk of a few channels would pad its steps with zeros).
  g.c_part = g.C;
  const int most = std::min({g.C, kBandMaxChunk, std::max(1, kBandMaxTerms / (g.K * g.KW))});
  for (int c = most; c >= 1; --c) {
    g.cc = ceil_div(g.C, ceil_div(g.C, c));
    g.steps = ceil_div(g.chunk_terms(), 8);
    g.stage_floats = ceil_div(images * g.cc * g.plane, 4) * 4;
    if (g.bytes(g.frags()) <= kBandSharedMax) return g;
  }
  g.tiles = 0;
  return g;
}

// The band route's geometry; tiles 0 where it does not take the shape: C = 1 (the C = 1
// kernels), K = 1 (run_pointwise), more than 32 maps (the GEMMs), sums under kBandMinTerms
// terms, rows wider than a tile, and up to 4 maps where the shifted filters measured slower
// (K up to 4, or 3 maps up to 7x7).
BandGeometry band_geometry(const ConvShape& s) {
  BandGeometry g{};
  g.B = s.B;
  g.C = s.C;
  g.M = s.M;
  g.K = s.K;
  g.H = s.H;
  g.W = s.W;
  g.H_out = s.H_out();
  g.W_out = s.W_out();
  g.P = g.H_out * g.W_out;
  g.shift_log = s.M == 1 ? 3 : s.M == 2 ? 2 : s.M <= 4 ? 1 : 0;
  g.shift = 1 << g.shift_log;
  g.KW = s.K + g.shift - 1;
  g.W_rows = ceil_div(g.W_out, g.shift);
  // Up to 4 maps with filters the tiled kernels take: from K = 5 on, with B's columns full
  // (1, 2 or 4 maps); otherwise the earlier routes measured faster (see the kernel).
  const bool stream_faster = s.M <= 4 && s.K <= kMaxK && (s.K < 5 || s.M == 3);
  if (s.C == 1 || s.K == 1 || g.frags() > kImageMaxMapFrags || s.C * s.K * s.K < kBandMinTerms ||
      g.W_rows > kBandOutputs || stream_faster) {
    return g;
  }
  // Whole images per tile where two or more fit, else bands of rows. Of the image counts
  // tried (the most, then halves), the one that keeps the most work between two barriers:
  // the tile's rows of A (its warps' use) times its chunk's terms, each up to kBandOutputs.
  const int rows_per_image = g.H_out * g.W_rows;
  const int most_images = 2 * rows_per_image <= kBandOutputs
                              ? std::min(s.B, kBandOutputs / rows_per_image)
                              : 1;
  BandGeometry best = g;
  best.tiles = 0;
  double best_work = 0.0;
  for (int images = most_images; images >= 1; images /= 2) {
    const BandGeometry t = band_tiles(g, images);
    const double work = static_cast<double>(std::min(t.tile_rows, kBandOutputs)) *
                        std::min(t.chunk_terms(), kBandOutputs);
    if (t.tiles > 0 && work > best_work) best = t, best_work = work;
  }
  return best;
}

bool band_takes(const ConvShape& s) { return band_geometry(s).tiles > 0; }

template <int NT>
void launch_band(float* y, const float* x, const uint4* filters, const BandGeometry& g,
                 int parts, cudaStream_t stream) {
  const auto kernel = conv_best_band_kernel<NT>;
  allow_dynamic_shared_memory(kernel, g.bytes(NT), "conv_best");
  kernel<<<dim3(static_cast<unsigned>(g.tiles), parts), kBandThreads,
           static_cast<std::size_t>(g.bytes(NT)), stream>>>(y, x, filters, g);
  CUDA_CHECK_LAUNCH();
}

// The band route for a plain conv; false (nothing launched) where band_geometry declines or the
// filters' workspace cannot be had. Grids under two blocks per SM split the sum by chunks of
// channels (run_channel_parts).
bool run_band(float* y, const float* x, const float* k, const ConvShape& s, cudaStream_t stream) {
  BandGeometry g = band_geometry(s);
  if (g.tiles == 0) return false;
  const int NT = g.frags(), chunks = ceil_div(s.C, g.cc);
  const std::int64_t quads = std::int64_t{chunks} * g.steps * NT * 32;
  auto* filters =
      static_cast<uint4*>(pool_workspace(static_cast<std::size_t>(quads) * sizeof(uint4), stream));
  if (filters == nullptr) return false;
  conv_best_band_filters_kernel<<<grid_stride_blocks(quads, 256, kFallbackMaxBlocks), 256, 0,
                                  stream>>>(filters, k, g, NT, quads);
  CUDA_CHECK_LAUNCH();
  g.vector_copy = s.W % 4 == 0 && reinterpret_cast<std::uintptr_t>(x) % 16 == 0;
  const auto launch = [&](float* out, int parts, int c_part, std::int64_t stride) {
    BandGeometry part = g;
    part.c_part = c_part;
    part.part_floats = stride;
    dispatch_map_frags(NT, [&](auto frags) {
      launch_band<decltype(frags)::value>(out, x, filters, part, parts, stream);
    });
  };
  // Parts: to fill the SMs where the grid is small, and to keep each chain of products at
  // most kBandMaxTerms long.
  const int chain_chunks = std::max(1, kBandMaxTerms / g.chunk_terms());
  const int parts = std::min(
      std::max(channel_parts(s.C, s.K, g.tiles, 2), ceil_div(chunks, chain_chunks)), chunks);
  if (parts < 2 || !run_channel_parts(y, s.y_elements(), s.C, parts, stream, launch, g.cc)) {
    launch(y, 1, s.C, 0);
  }
  CUDA_CHECK(cudaFreeAsync(filters, stream));
  return true;
}

// ---- C = 1 on Hopper: the warp group's products (wgmma) --------------------------------------
// The project's layer (C = 1), fused with the 2x2 max-pool or plain, as a product on the tensor
// cores with fp32 accuracy (3xTF32, as run_gemm): rows are conv outputs, columns maps, the sum
// runs over the K*K terms. A block is one warp group (4 warps) issuing wgmma.mma_async, the
// Hopper product of a whole warp group: one instruction multiplies 64 outputs by up to 64 maps
// by 8 terms, up to 32 times the work of an mma.sync. A, the inputs, comes from registers:
// each lane loads its values from the image staged in shared memory and splits them. B, the
// filters, is read by the tensor cores from shared memory, split once per block in the layout
// of the instruction's matrix descriptor, so no register holds a filter. Fused, a lane's two
// rows are the left and right output of one row of a pooling window; the window's other row
// is 4 lanes away: the pool is two fmaxf and one shuffle per map. Plain, a tile's 64 rows are
// 64 consecutive outputs, which go through shared memory so that a warp's stores are whole
// lines of y (float4s).
// Measured on an H100 (fastest of 20, L2 flushed): the project's layer 0.304 to 0.226 ms; M =
// 64, K = 7 on 40x40, 0.342 to 0.273. The warps are latency-bound at 4 per scheduler (about
// 300 instructions per tile, the epilogue's pool, tanh and stores a third; tensor pipe 47%):
// with one product per step instead of three it took 0.181 ms, not 40% of the time.
// Fewer maps lose: M = 27 to 33 ran 1-3% slower than the FMA kernel, so 41 maps at least; K
// under 5 lose more (M = 64, K = 3: 0.24 against 0.20 ms), the sum then being mostly padding.
// Plain (fastest of 10, L2 flushed, against the FMA kernel): M = 50, K = 7 on 31x31 0.84 to
// 0.47 ms, K = 6 on 32x32 0.91 to 0.52, M = 200, K = 7 on 30x30 0.55 to 0.37, M = 64, K = 5 on
// 32x32 0.48 to 0.39. The warps wait on the stores (DRAM 78% busy, 13 cycles per instruction
// issued): on rows of whole sectors the FMA kernel, which writes longer runs of y, stays 3-9%
// faster up to K = 6 (the project's layer 0.401 against 0.437 ms) and keeps them.
// Fused, K = 5 with up to 64 maps (the project's layer) has since moved to run_c1_half below:
// fp16 products on whole windows per lane, 0.184 against 0.232 ms on an H200.
// wgmma is an sm_90a instruction: other builds compile an empty kernel and never launch it.
constexpr int kWgThreads = 128;      // one warp group
constexpr int kWgMinMaps = 41;       // maps per block at least ...
constexpr int kWgMaxMaps = 64;       // ... and at most (8 fragments of 8)
constexpr int kWgSharedMax = 112 * 1024;  // two blocks per SM at least
constexpr int kWgBlocksPerSm = 4;    // at most (128 registers a thread); shared memory may
                                     // allow fewer
// A map's 64 outputs in the plain tile's staging, padded so that the lanes' writes (8 rows of
// 4 maps 2 apart per instruction) fall in 32 different banks: 2 * 68 = 8 (mod 32).
constexpr int kWgStagePitch = 68;

// True in the device code of an sm_90a build (the only one with wgmma).
__device__ bool g_best_wgmma_built =
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    true;
#else
    false;
#endif

struct WgGeometry {
  int B, M, H, W, K;
  int OW, P;           // columns of the output (pooled or plain), values per map
  float inverse_OW;    // 1 / OW: q / OW is (q + 0.5) / OW rounded down, exact for q < 2^21
  int maps;            // maps per block (blockIdx.y's slice), at most 8 * NF
  int image_floats;    // H * W rounded up to 4
  bool vector_x;       // images start 16-byte aligned and hold a multiple of 4 values
  bool vector_y;       // plain: y 16-byte aligned and P a multiple of 4 (float4 stores)
  // Shared memory of a block: `tiles` B tiles of 8 x NF maps, three image buffers and, plain,
  // a tile's outputs (8 * NF maps of kWgStagePitch).
  int bytes(int NF, int tiles, bool pool) const {
    return 4 * (tiles * NF * 64 + 3 * image_floats + (pool ? 0 : 8 * NF * kWgStagePitch));
  }
};

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
// The matrix descriptor of an 8-term B tile at `tile` in shared memory, K-major without
// swizzle: 8x4-float core matrices of 128 contiguous bytes, the two of a row group (terms 0-3,
// 4-7) 128 bytes apart (leading offset), row groups of 8 maps 256 bytes apart (stride offset).
__device__ __forceinline__ std::uint64_t wgmma_descriptor(const float* tile) {
  const std::uint32_t address = shared_address(tile);
  constexpr std::uint64_t kLeading = 128 >> 4, kStride = 256 >> 4;
  return ((address & 0x3ffff) >> 4) | kLeading << 16 | kStride << 32;
}

// d = a * B (+ d if `accumulate`), 64 outputs x 8*NF maps (NF = 6 to 8) x 8 terms for the warp
// group: a holds this warp's 16 rows in the m16n8k8 layout, d this warp's outputs in the m16n8
// layout, one fragment per 8 maps.
template <int NF>
__device__ __forceinline__ void wgmma_tf32(float (&d)[4 * NF], const std::uint32_t (&a)[4],
                                           std::uint64_t desc, bool accumulate) {
  if constexpr (NF == 6) {
    asm volatile("{ .reg .pred p; setp.ne.b32 p, %29, 0; "
                 "wgmma.mma_async.sync.aligned.m64n48k8.f32.tf32.tf32 "
                 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17,"
                 " %18, %19, %20, %21, %22, %23}, "
                 "{%24, %25, %26, %27}, %28, p, 1, 1; }"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]),
                    "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]),
                    "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]),
                    "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc),
                   "r"(static_cast<int>(accumulate)));
  } else if constexpr (NF == 7) {
    asm volatile("{ .reg .pred p; setp.ne.b32 p, %33, 0; "
                 "wgmma.mma_async.sync.aligned.m64n56k8.f32.tf32.tf32 "
                 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17,"
                 " %18, %19, %20, %21, %22, %23, %24, %25, %26, %27}, "
                 "{%28, %29, %30, %31}, %32, p, 1, 1; }"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]),
                    "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]),
                    "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]),
                    "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
                    "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc),
                   "r"(static_cast<int>(accumulate)));
  } else if constexpr (NF == 8) {
    asm volatile("{ .reg .pred p; setp.ne.b32 p, %37, 0; "
                 "wgmma.mma_async.sync.aligned.m64n64k8.f32.tf32.tf32 "
                 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17,"
                 " %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, "
                 "{%32, %33, %34, %35}, %36, p, 1, 1; }"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]),
                    "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]),
                    "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]),
                    "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
                    "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]),
                    "+f"(d[30]), "+f"(d[31])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc),
                   "r"(static_cast<int>(accumulate)));
  }
}

// Orders the products after the registers they read were written, and the reads of d after
// the products finished (the asm statements alone do not tie d to the wait).
__device__ __forceinline__ void wgmma_fence() {
  asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
}
// The products read shared memory through the async proxy: this thread's earlier stores to it
// become visible to them (before the barrier that publishes them to the block).
__device__ __forceinline__ void fence_shared_for_wgmma() {
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
}
__device__ __forceinline__ void wgmma_commit() {
  asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
}
// Waits until at most kPending committed groups of products are still running.
template <int kPending, int N>
__device__ __forceinline__ void wgmma_wait(float (&d)[N]) {
  asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(kPending) : "memory");
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+f"(d[i])::"memory");
}
template <int N>
__device__ __forceinline__ void wgmma_commit_and_wait(float (&d)[N]) {
  wgmma_commit();
  wgmma_wait<0>(d);
}
#endif

// The sum's K*K terms as steps of 8: kFull whole steps of three products each, then kTail
// steps that pack the three products of the last r = K*K % 8 terms side by side (columns
// big x big, big x small, small x big of each term: 3r columns, so one step where r <= 2).
// The project's K = 5: 3 whole steps and 1 packed, 10 products per tile instead of 12.
template <int kFull, int kTail>
struct WgSum {
  static constexpr int kTiles = 2 * kFull + kTail;  // B tiles: big, small, then packed
};

// Blocks loop over images (blockIdx.y picks the slice of maps); the next image is copied while
// this one is multiplied. Shared memory: the split filters as B tiles in descriptor order
// (big [kFull], small [kFull], packed [kTail]), three image buffers (a copy may start into one
// while the warps still read the other two, so one barrier per image suffices).
template <int NF, int kFull, int kTail, bool kPool>
__global__ void __launch_bounds__(kWgThreads, kWgBlocksPerSm)
    conv_c1_wgmma_kernel(float* __restrict__ y, const float* __restrict__ x,
                         const float* __restrict__ k, WgGeometry g) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  extern __shared__ __align__(128) float smem[];
  constexpr int kTile = NF * 64;  // floats of one 8-term B tile
  float* filters = smem;
  float* images = smem + WgSum<kFull, kTail>::kTiles * kTile;
  float* outputs = images + 3 * g.image_floats;  // plain: a tile's outputs
  const int tid = threadIdx.x, terms = g.K * g.K, rest = terms - 8 * kFull, pixels = g.H * g.W;
  const int m0 = blockIdx.y * g.maps, maps = min(g.maps, g.M - m0);

  // B[n][c] of tile i: column c of its 8 is term 8i + c of a whole step (big, small), or of
  // the packed steps product c / rest of term 8 * kFull + c % rest.
  for (int i = tid; i < WgSum<kFull, kTail>::kTiles * kTile; i += kWgThreads) {
    const int tile = i / kTile, j = i % kTile / 64, half = i % 64 / 32, row = i % 32 / 4;
    const int n = 8 * j + row, c = 4 * half + i % 4;
    int term = 0, part = 0;  // part: 0 big, 1 small
    bool used = n < maps;
    if (tile < 2 * kFull) {
      term = 8 * (tile % kFull) + c;
      part = tile / kFull;
    } else {
      const int column = 8 * (tile - 2 * kFull) + c;
      term = 8 * kFull + column % max(rest, 1);
      part = column / max(rest, 1) == 1;
      used = used && column < 3 * rest;
    }
    std::uint32_t big = 0, small = 0;
    // Fused, filters carry tanh's exp2 scale (tanh_exp2 below): one multiply less per value.
    const float scale = kPool ? kTanhExp2Scale : 1.0f;
    split_tf32(used ? scale * k[(m0 + n) * terms + term] : 0.0f, big, small);
    filters[i] = __uint_as_float(part ? small : big);
  }
  fence_shared_for_wgmma();  // the image loop's first barrier publishes them
  const auto stage = [&](float* dst, int b) {
    const float* src = x + static_cast<std::int64_t>(b) * pixels;
    if (g.vector_x) {
      for (int i = 4 * tid; i < pixels; i += 4 * kWgThreads) cp_async16(dst + i, src + i, true);
    } else {
      for (int i = tid; i < pixels; i += kWgThreads) cp_async4(dst + i, src + i, true);
    }
  };

  // This lane's rows: g and g + 8 of its warp's 16. Fused, the left and right output of row
  // (g & 1) of window 4 * warp + g / 2 of a tile of 16 windows; plain, outputs 16 * warp + g
  // and + 8 of a tile of 64. Its columns: t and t + 4 of each step.
  const int warp = tid / 32, lane = tid % 32, gq = lane / 4, t = lane % 4;
  int full_offset[kFull + 1][2];  // (+ 1: no zero-length arrays)
  // A packed column takes the big part, the small part or (past the sum) neither: masks.
  int tail_offset[kTail + 1][2];
  std::uint32_t tail_big[kTail + 1][2], tail_small[kTail + 1][2];
#pragma unroll
  for (int h = 0; h < 2; ++h) {
#pragma unroll
    for (int s = 0; s < kFull; ++s) {
      full_offset[s][h] = sum_term_offset(8 * s + t + 4 * h, g.K, g.W, pixels);
    }
#pragma unroll
    for (int s = 0; s < kTail; ++s) {
      const int column = 8 * s + t + 4 * h;
      const int product = column < 3 * rest ? column / rest : 3;  // 2: small x big
      tail_big[s][h] = product < 2 ? ~0u : 0u;
      tail_small[s][h] = product == 2 ? ~0u : 0u;
      tail_offset[s][h] =
          product < 3 ? sum_term_offset(8 * kFull + column % rest, g.K, g.W, pixels) : 0;
    }
  }
  const std::uint64_t desc = wgmma_descriptor(filters);
  constexpr std::uint64_t kDescTile = kTile * 4 / 16;  // a tile's size in descriptor units
  const int tiles = ceil_div(g.P, kPool ? 16 : 64);

  int it = 0;
  if (blockIdx.x < g.B) stage(images, blockIdx.x);
  cp_async_commit();
  for (int b = blockIdx.x; b < g.B; b += gridDim.x, ++it) {
    const float* image = images + it % 3 * g.image_floats;
    float* out = y + (static_cast<std::int64_t>(b) * g.M + m0) * g.P;
    if (b + gridDim.x < g.B) stage(images + (it + 1) % 3 * g.image_floats, b + gridDim.x);
    cp_async_commit();
    cp_async_wait<1>();
    __syncthreads();  // this image (and, the first time, the filters) in shared memory

    for (int tile = 0; tile < tiles; ++tile) {
      // q_raw: the lane's window (fused) or first output (plain); rows past the end compute
      // value 0. in, in_hi: the inputs of the lane's two rows at term 0.
      const int q_raw = kPool ? tile * 16 + 4 * warp + gq / 2 : tile * 64 + 16 * warp + gq;
      const int q = q_raw < g.P ? q_raw : 0;
      const int qy = __float2int_rz((q + 0.5f) * g.inverse_OW), qx = q - qy * g.OW;
      const float* in = kPool ? image + (2 * qy + (gq & 1)) * g.W + 2 * qx : image + qy * g.W + qx;
      const float* in_hi = in + 1;
      if constexpr (!kPool) {
        const int q8 = q_raw + 8 < g.P ? q_raw + 8 : 0;
        const int q8y = __float2int_rz((q8 + 0.5f) * g.inverse_OW);
        in_hi = image + q8y * g.W + q8 - q8y * g.OW;
      }
      std::uint32_t a_big[kFull + 1][4], a_small[kFull + 1][4], a_tail[kTail + 1][4];
#pragma unroll
      for (int h = 0; h < 2; ++h) {
#pragma unroll
        for (int s = 0; s < kFull; ++s) {
          const float* p = in + full_offset[s][h];
          split_tf32(p[0], a_big[s][2 * h], a_small[s][2 * h]);
          split_tf32(kPool ? p[1] : in_hi[full_offset[s][h]], a_big[s][2 * h + 1],
                     a_small[s][2 * h + 1]);
        }
#pragma unroll
        for (int s = 0; s < kTail; ++s) {
#pragma unroll
          for (int side = 0; side < 2; ++side) {
            std::uint32_t big, small;
            split_tf32((side == 0 ? in : in_hi)[tail_offset[s][h]], big, small);
            a_tail[s][2 * h + side] = (big & tail_big[s][h]) | (small & tail_small[s][h]);
          }
        }
      }
      float acc[4 * NF];
      wgmma_fence();
#pragma unroll
      for (int s = 0; s < kFull; ++s) {
        wgmma_tf32<NF>(acc, a_big[s], desc + s * kDescTile, s > 0);
        wgmma_tf32<NF>(acc, a_big[s], desc + (kFull + s) * kDescTile, true);
        wgmma_tf32<NF>(acc, a_small[s], desc + s * kDescTile, true);
      }
#pragma unroll
      for (int s = 0; s < kTail; ++s) {
        wgmma_tf32<NF>(acc, a_tail[s], desc + (2 * kFull + s) * kDescTile, kFull > 0 || s > 0);
      }
      wgmma_commit_and_wait(acc);
      // acc[4j..4j+3]: maps 8j + 2t and + 1 of rows g and g + 8. Only the last fragment can
      // pass `maps`.
      if constexpr (kPool) {
        const int map = 2 * t + (gq & 1);
        float* column = out + map * g.P + q;
#pragma unroll
        for (int j = 0; j < NF; ++j) {
          float even = fmaxf(acc[4 * j], acc[4 * j + 2]);
          float odd = fmaxf(acc[4 * j + 1], acc[4 * j + 3]);
          even = fmaxf(even, __shfl_xor_sync(0xffffffffu, even, 4));
          odd = fmaxf(odd, __shfl_xor_sync(0xffffffffu, odd, 4));
          // The window's top row stores the even map.
          if (q_raw < g.P && (j < NF - 1 || 8 * j + map < maps)) {
            column[j * 8 * g.P] = tanh_exp2(gq & 1 ? odd : even);
          }
        }
      } else {
        // Through shared memory: a map's 64 outputs are contiguous in y. The first barrier
        // waits for the previous tile's reads, the second for this tile's writes.
        float* row = outputs + 2 * t * kWgStagePitch + 16 * warp + gq;
        __syncthreads();
#pragma unroll
        for (int j = 0; j < NF; ++j) {
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            row[(8 * j + e) * kWgStagePitch] = acc[4 * j + e];
            row[(8 * j + e) * kWgStagePitch + 8] = acc[4 * j + 2 + e];
          }
        }
        __syncthreads();
        const int first = tile * 64, count = min(64, g.P - first);
        if (g.vector_y) {  // 16 float4s a map, 8 maps per pass
#pragma unroll
          for (int r = 0; r < NF; ++r) {
            const int map = 8 * r + tid / 16, c = 4 * (tid % 16);
            if ((r < NF - 1 || map < maps) && c < count) {
              *reinterpret_cast<float4*>(out + map * g.P + first + c) =
                  *reinterpret_cast<const float4*>(outputs + map * kWgStagePitch + c);
            }
          }
        } else {  // 64 floats a map, 2 maps per pass
          for (int i = tid; i < 64 * maps; i += kWgThreads) {
            const int map = i / 64, c = i % 64;
            if (c < count) out[map * g.P + first + c] = outputs[map * kWgStagePitch + c];
          }
        }
      }
    }
  }
#endif
}

// Whether this build has the sm_90a kernel for the current device: asked once per device.
bool wgmma_built() {
  static thread_local std::vector<std::pair<int, bool>> known;
  int device = 0;
  CUDA_CHECK(cudaGetDevice(&device));
  for (const auto& [d, built] : known) {
    if (d == device) return built;
  }
  int major = 0, minor = 0;
  CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device));
  bool built = false;
  if (major == 9 && minor == 0) {
    CUDA_CHECK(cudaMemcpyFromSymbol(&built, g_best_wgmma_built, sizeof built));
  }
  known.emplace_back(device, built);
  return built;
}

template <int NF, int kFull, int kTail, bool kPool>
void launch_c1_wgmma(float* y, const float* x, const float* k, const WgGeometry& g, int slices,
                     cudaStream_t stream) {
  const auto kernel = conv_c1_wgmma_kernel<NF, kFull, kTail, kPool>;
  const int bytes = g.bytes(NF, WgSum<kFull, kTail>::kTiles, kPool);
  allow_dynamic_shared_memory(kernel, bytes, kPool ? "conv_tanh_maxpool_best" : "conv_best");
  const int sms = multiprocessor_count();
  // An sm_90 SM has 228 KB of shared memory, of which each block's reservation takes 1 KB.
  const int per_sm = std::clamp(228 * 1024 / (bytes + 1024), 1, kWgBlocksPerSm);
  const int images = std::clamp(ceil_div(sms * per_sm, slices), 1, g.B);
  kernel<<<dim3(images, slices), kWgThreads, bytes, stream>>>(y, x, k, g);
  CUDA_CHECK_LAUNCH();
}

template <int kFull, int kTail, bool kPool>
void launch_c1_wgmma_frags(float* y, const float* x, const float* k, const WgGeometry& g,
                           int slices, cudaStream_t stream) {
  switch (ceil_div(g.maps, 8)) {  // 6 to 8: 41 to 64 maps
    case 6:
      return launch_c1_wgmma<6, kFull, kTail, kPool>(y, x, k, g, slices, stream);
    case 7:
      return launch_c1_wgmma<7, kFull, kTail, kPool>(y, x, k, g, slices, stream);
    default:
      return launch_c1_wgmma<8, kFull, kTail, kPool>(y, x, k, g, slices, stream);
  }
}

// The wgmma path for conv + tanh + 2x2 max-pool (kPool) or conv; false (nothing launched)
// unless C = 1, blocks of 41 to 64 maps, K = 5 to 7 (see the section's header), and the build
// has the sm_90a kernel for this device.
template <bool kPool>
bool run_c1_wgmma(float* y, const float* x, const float* k, const ConvShape& s,
                  cudaStream_t stream) {
  if (s.C != 1 || s.M < kWgMinMaps || s.K < 5 || s.K > 7) return false;
  // Plain, up to K = 6 with rows of whole 32-byte sectors, the FMA kernel streams y faster.
  if (!kPool && s.K <= 6 && s.W_out() % 8 == 0) return false;
  WgGeometry g{};
  g.B = s.B;
  g.M = s.M;
  g.H = s.H;
  g.W = s.W;
  g.K = s.K;
  g.OW = kPool ? s.W_out() / 2 : s.W_out();
  g.P = (kPool ? s.H_out() / 2 : s.H_out()) * g.OW;
  g.inverse_OW = 1.0f / static_cast<float>(std::max(g.OW, 1));
  const int slices = ceil_div(s.M, kWgMaxMaps);
  g.maps = ceil_div(s.M, slices);  // as even as possible
  g.image_floats = ceil_div(s.H * s.W, 4) * 4;
  g.vector_x = (s.H * s.W) % 4 == 0 && reinterpret_cast<std::uintptr_t>(x) % 16 == 0;
  g.vector_y = g.P % 4 == 0 && reinterpret_cast<std::uintptr_t>(y) % 16 == 0;
  const int most_tiles = 2 * 6 + 1;  // K = 7
  if (g.maps < kWgMinMaps || g.P == 0 || g.P >= (1 << 21) ||
      g.bytes(kWgMaxMaps / 8, most_tiles, kPool) > kWgSharedMax || !wgmma_built()) {
    return false;
  }
  switch (s.K) {  // 25, 36, 49 terms: whole steps and packed steps
    case 5:
      launch_c1_wgmma_frags<3, 1, kPool>(y, x, k, g, slices, stream);
      break;
    case 6:
      launch_c1_wgmma_frags<4, 2, kPool>(y, x, k, g, slices, stream);
      break;
    default:
      launch_c1_wgmma_frags<6, 1, kPool>(y, x, k, g, slices, stream);
      break;
  }
  return true;
}

// ---- C = 1 fused, 25 to 64 maps, K = 5: three fp16 products on mma.sync ---------------------
// The project's fused layer with fp32 accuracy in fp16 products, which the tensor cores run at
// twice the TF32 rate: every value v is split into v's fp16 rounding and the fp16 rounding
// of the rest (11 + 11 bits, as 3xTF32), and big x big + big x small + small x big are
// accumulated in fp32. fp16's range is narrow, so the values are scaled by powers of two first
// (exact): each image so that its largest magnitude lies in [2^14, 2^15), the filters likewise,
// and the epilogue scales the pooled maximum back (with tanh's exp2 scale: one multiply).
// fp16 pairs are 4-byte units, so a block stages an image (cp.async) and writes it as two planes
// of pairs, plane[i] = (v[i], v[i + 1]) for the big and the small parts: a lane's A register, two
// horizontally adjacent terms of its output, is one 4-byte load at any offset. The sum's terms
// go by pairs of columns of a filter row (K = 5: 3 pairs a row, the last with one term and a
// zero filter; 15 pairs, 2 steps of 16 terms). The rest is tensor_cores' image kernel: every
// filter as fragments in registers (both parts), a warp's tile 8 windows whose top and bottom
// rows are two products, a lane holding whole windows, so the pool is three maxima.
// Measured on an H200 (kernel alone, CUDA events, L2 flushed, fastest of 20), against the wgmma
// kernel (3xTF32: operands split per tile, warp groups pooling across lanes) for 41 maps or
// more and the FMA kernel below that: the project's layer 0.232 to 0.184 ms (Op Time 0.240 to
// 0.192); 48 maps on 2,000 images of 44x44 0.123 to 0.100; 56 maps, 23x19 0.072 to 0.059; 64
// maps 0.256 to 0.207; 40 maps 0.245 to 0.148 and 25 maps 0.159 to 0.128 (FMA). The largest
// error against a float64 sum, after tanh: 6e-7 to 7e-7 (3xTF32: 8e-7 to 9e-7). Not adopted:
// both parts of a pair in one 8-byte load (0.191 to 0.210 ms); four blocks per SM (128
// registers, spills: 0.206 to 0.223 with the generic sizes); six warps a block, 3 tiles each
// (0.194 to 0.202); one barrier an image, the next image split (two sets of planes) by the
// warps with a tile fewer while the others finish theirs (0.185 to 0.189; 14x30 11% faster,
// 54x54 22% slower at 70 KB a block); blocks of 1 or 2 warps (0.173 and 0.175, but 56 maps on
// 23x19 0.059 to 0.137 and 0.083).
// At least 12 warps an SM (146 to 168 registers; 16 with 32 maps or fewer), in blocks of 3 or 4
// (run_c1_half).
constexpr int kHalfWarpsPerSm = 12;
constexpr int kHalfMinMaps = 25, kHalfMaxMaps = 64;
constexpr int kHalfSharedMax = 48 * 1024;
// Scales beyond 2^+-60 are not taken (images or filters whose largest magnitude is under
// 2^-45): their parts then lose low bits, far below fp32's rounding of the sum.
constexpr int kHalfExponentMax = 60;

struct HalfGeometry {
  int B, M, H, W;
  int PW, items;     // pooled columns, windows per image
  float inverse_PW;  // 1 / PW: j / PW is (j + 0.5) / PW rounded down, exact for j < 2^21
  int image;         // H * W
  int words;         // floats of a staged image and words of a plane: image + a zero, by 4
  bool vector_x;     // images start 16-byte aligned and hold a multiple of 4 values
  int bytes() const { return 4 * 4 * words; }  // two staging buffers, two planes
};

// e such that m * 2^e lies in [2^14, 2^15); 0 (no scaling) for 0, inf and NaN.
__device__ __forceinline__ int half_exponent(float m) {
  if (!(m > 0.0f) || isinf(m)) return 0;
  int e = 0;
  frexpf(m, &e);
  return min(max(15 - e, -kHalfExponentMax), kHalfExponentMax);
}

// v = big + small + (below fp32's rounding of the sums): both fp16, packed as the pair's half.
__device__ __forceinline__ void split_half(float v, unsigned short& big, unsigned short& small) {
  const __half b = __float2half_rn(v);
  big = __half_as_ushort(b);
  small = __half_as_ushort(__float2half_rn(v - __half2float(b)));
}
__device__ __forceinline__ std::uint32_t half_pair(unsigned short lo, unsigned short hi) {
  return std::uint32_t{lo} | std::uint32_t{hi} << 16;
}

// mma.sync m16n8k16, fp16 inputs, fp32 accumulators: lane l (g = l / 4, t = l % 4) holds A's
// rows g and g + 8 at columns 2t, 2t + 1 (a[0], a[1]) and 2t + 8, 2t + 9 (a[2], a[3]), B's
// rows 2t, 2t + 1 (b0) and 2t + 8, 2t + 9 (b1) of column g, C as the TF32 m16n8k8.
__device__ __forceinline__ void mma_f16(float (&c)[4], const std::uint32_t (&a)[4],
                                        std::uint32_t b0, std::uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
      "{%8, %9}, {%0, %1, %2, %3};"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// The largest magnitude of n values, for every thread of the block (NaN ignored). `scratch`
// (kWarps floats) may be written again after the block's next barrier.
template <int kWarps>
__device__ float block_max_abs(const float* v, int n, float* scratch) {
  const int tid = static_cast<int>(threadIdx.x);
  float m = 0.0f;
  for (int i = tid; i < n; i += 32 * kWarps) m = fmaxf(m, fabsf(v[i]));
  for (int o = 16; o > 0; o /= 2) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
  if (tid % 32 == 0) scratch[tid / 32] = m;
  __syncthreads();
  m = scratch[0];
  for (int w = 1; w < kWarps; ++w) m = fmaxf(m, scratch[w]);
  return m;
}

// kH, kW: the images' size where it is known at compile time (0: g's).
template <int kK, int NT, int kH, int kW, int kWarps>
__global__ void __launch_bounds__(32 * kWarps, kHalfWarpsPerSm / kWarps)
    conv_c1_half_kernel(float* __restrict__ y, const float* __restrict__ x,
                        const float* __restrict__ k, HalfGeometry g) {
  constexpr int kRowPairs = (kK + 1) / 2, kPairs = kK * kRowPairs, kSteps = (kPairs + 7) / 8;
  const int W = kW > 0 ? kW : g.W, PW = kW > 0 ? (kW - kK + 1) / 2 : g.PW;
  const int items = kH > 0 ? (kH - kK + 1) / 2 * PW : g.items;
  extern __shared__ __align__(128) float smem[];  // two staging buffers, then the two planes
  std::uint32_t* const big = reinterpret_cast<std::uint32_t*>(smem + 2 * g.words);
  std::uint32_t* const small = big + g.words;
  __shared__ float scratch[kWarps];
  __shared__ float unscale;
  constexpr int kThreads = 32 * kWarps;
  const int tid = static_cast<int>(threadIdx.x), lane = tid % 32, warp = tid / 32;
  const int gq = lane / 4, t = lane % 4;
  // Past the image, the staging buffers hold zeros (read by the last pairs, times a zero
  // filter); the copies never write there. Published by the loop's first barrier.
  for (int i = g.image + tid; i < g.words; i += kThreads) smem[i] = smem[g.words + i] = 0.0f;

  // Column c of the sum: pair c / 2 (row c / 2 / kRowPairs, columns q0 and q0 + 1); the term
  // of the filter, or -1 for padding.
  const auto term = [](int c) {
    const int j = c / 2, q = 2 * (j % kRowPairs) + c % 2;
    return j < kPairs && q < kK ? j / kRowPairs * kK + q : -1;
  };
  const int fe = half_exponent(block_max_abs<kWarps>(k, g.M * kK * kK, scratch));
  const float fscale = ldexpf(1.0f, fe);
  std::uint32_t fbig[NT][kSteps][2], fsmall[NT][kSteps][2];
#pragma unroll
  for (int n = 0; n < NT; ++n) {
    const int m = 8 * n + gq;
#pragma unroll
    for (int s = 0; s < kSteps; ++s) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int c = 16 * s + 8 * h + 2 * t, r0 = term(c), r1 = term(c + 1);
        unsigned short b0, s0, b1, s1;
        split_half(m < g.M && r0 >= 0 ? fscale * k[m * kK * kK + r0] : 0.0f, b0, s0);
        split_half(m < g.M && r1 >= 0 ? fscale * k[m * kK * kK + r1] : 0.0f, b1, s1);
        fbig[n][s][h] = half_pair(b0, b1);
        fsmall[n][s][h] = half_pair(s0, s1);
      }
    }
  }
  // This lane's pairs t and t + 4 of each step, as plane offsets from the output's pixel.
  int pair_offset[kSteps][2];
#pragma unroll
  for (int s = 0; s < kSteps; ++s) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int j = 8 * s + 4 * h + t;
      pair_offset[s][h] = j < kPairs ? j / kRowPairs * W + 2 * (j % kRowPairs) : 0;
    }
  }
  // This lane's maps 2t and 2t + 1 of fragment n exist for every n but the last.
  const bool last0 = (NT - 1) * 8 + 2 * t < g.M, last1 = (NT - 1) * 8 + 2 * t + 1 < g.M;
  const int tiles = ceil_div(items, 8);

  const auto stage = [&](float* dst, int b) {
    const float* src = x + static_cast<std::int64_t>(b) * g.image;
    if (g.vector_x) {
      for (int i = 4 * tid; i < g.image; i += 4 * kThreads) cp_async16(dst + i, src + i, true);
    } else {
      for (int i = tid; i < g.image; i += kThreads) cp_async4(dst + i, src + i, true);
    }
    cp_async_commit();
  };
  int buffer = 0;
  if (static_cast<int>(blockIdx.x) < g.B) stage(smem, static_cast<int>(blockIdx.x));
  for (int b = static_cast<int>(blockIdx.x); b < g.B; b += static_cast<int>(gridDim.x)) {
    const float* raw = smem + buffer * g.words;
    // The next image goes into the other buffer, free since this loop's last planes.
    if (b + static_cast<int>(gridDim.x) < g.B) {
      stage(smem + (buffer ^ 1) * g.words, b + static_cast<int>(gridDim.x));
      cp_async_wait<1>();
    } else {
      cp_async_wait<0>();
    }
    __syncthreads();  // this image in; every warp done with the last planes
    const int xe = half_exponent(block_max_abs<kWarps>(raw, g.image, scratch));
    const float xscale = ldexpf(1.0f, xe);
    // Fused, tanh's exp2 scale goes with the scales' undoing: one multiply a pooled value. In
    // shared memory: a register held across the tiles makes the kernel spill.
    if (tid == 0) unscale = ldexpf(ldexpf(kTanhExp2Scale, -xe), -fe);
    // Four words a thread, each value split once (words is a multiple of 4): 0.1756 to 0.1731
    // ms on the project's layer against a word a thread.
    for (int i = 4 * tid; i < g.words; i += 4 * kThreads) {
      const float4 v = *reinterpret_cast<const float4*>(raw + i);
      const float in[5] = {v.x, v.y, v.z, v.w, i + 4 < g.words ? raw[i + 4] : 0.0f};
      unsigned short bh[5], sh[5];
#pragma unroll
      for (int e = 0; e < 5; ++e) split_half(xscale * in[e], bh[e], sh[e]);
      *reinterpret_cast<uint4*>(big + i) = make_uint4(
          half_pair(bh[0], bh[1]), half_pair(bh[1], bh[2]), half_pair(bh[2], bh[3]),
          half_pair(bh[3], bh[4]));
      *reinterpret_cast<uint4*>(small + i) = make_uint4(
          half_pair(sh[0], sh[1]), half_pair(sh[1], sh[2]), half_pair(sh[2], sh[3]),
          half_pair(sh[3], sh[4]));
    }
    __syncthreads();  // the planes are in
    buffer ^= 1;

    for (int tile = warp; tile < tiles; tile += kWarps) {
      const int j = tile * 8 + gq;  // this lane's window; past the output, the last one's
      const int jr = j < items ? j : items - 1;
      const int r =
          kW > 0 ? jr / PW : __float2int_rz((static_cast<float>(jr) + 0.5f) * g.inverse_PW);
      const int pixel = 2 * (r * W + jr - r * PW);
      float acc[NT][4], top[NT][2];
#pragma unroll
      for (int row = 0; row < 2; ++row) {  // the windows' top row, then their bottom row
        const int left = pixel + row * W;
#pragma unroll
        for (int n = 0; n < NT; ++n) acc[n][0] = acc[n][1] = acc[n][2] = acc[n][3] = 0.0f;
#pragma unroll
        for (int s = 0; s < kSteps; ++s) {
          // Rows g and g + 8 of A: the window's left and right output.
          const int p0 = left + pair_offset[s][0], p1 = left + pair_offset[s][1];
          const std::uint32_t ab[4] = {big[p0], big[p0 + 1], big[p1], big[p1 + 1]};
          const std::uint32_t as[4] = {small[p0], small[p0 + 1], small[p1], small[p1 + 1]};
#pragma unroll
          for (int n = 0; n < NT; ++n) {
            mma_f16(acc[n], ab, fbig[n][s][0], fbig[n][s][1]);
            mma_f16(acc[n], ab, fsmall[n][s][0], fsmall[n][s][1]);
            mma_f16(acc[n], as, fbig[n][s][0], fbig[n][s][1]);
          }
        }
        if (row == 0) {
#pragma unroll
          for (int n = 0; n < NT; ++n) {
            top[n][0] = fmaxf(acc[n][0], acc[n][2]);
            top[n][1] = fmaxf(acc[n][1], acc[n][3]);
          }
        }
      }
      if (j < items) {
        const float f = unscale;
        float* out = y + (static_cast<std::int64_t>(b) * g.M + 2 * t) * items + j;
#pragma unroll
        for (int n = 0; n < NT; ++n, out += 8 * items) {
          const float v0 = fmaxf(top[n][0], fmaxf(acc[n][0], acc[n][2]));
          const float v1 = fmaxf(top[n][1], fmaxf(acc[n][1], acc[n][3]));
          if (n + 1 < NT || last0) out[0] = tanh_exp2(f * v0);
          if (n + 1 < NT || last1) out[items] = tanh_exp2(f * v1);
        }
      }
    }
  }
}

template <int kK, int NT, int kWarps>
void launch_c1_half(float* y, const float* x, const float* k, const HalfGeometry& g,
                    cudaStream_t stream) {
  // The course's images (Fashion-MNIST) are 28x28: their sizes as constants take the address
  // arithmetic of a tile off the warps (the project's layer 0.206 to 0.191 ms).
  const auto kernel = g.H == 28 && g.W == 28 ? conv_c1_half_kernel<kK, NT, 28, 28, kWarps>
                                             : conv_c1_half_kernel<kK, NT, 0, 0, kWarps>;
  allow_dynamic_shared_memory(kernel, g.bytes(), "conv_tanh_maxpool_best");
  // Nothing is read twice through L1: all of it as shared memory, and the grid as many blocks
  // as then fit (four blocks of 4 warps up to 32 maps): 32 maps on 44x44 8% faster.
  CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout,
                                  cudaSharedmemCarveoutMaxShared));
  const auto blocks = static_cast<unsigned>(std::min<std::int64_t>(
      resident_blocks(reinterpret_cast<const void*>(kernel), 32 * kWarps, g.bytes()), g.B));
  kernel<<<blocks, 32 * kWarps, g.bytes(), stream>>>(y, x, k, g);
  CUDA_CHECK_LAUNCH();
}

// conv + tanh + 2x2 max-pool for C = 1, K = 5 and 25 to 64 maps on images that fit the block's
// 48 KB; false (nothing launched) elsewhere.
bool run_c1_half(float* y, const float* x, const float* k, const ConvShape& s,
                 cudaStream_t stream) {
  if (s.C != 1 || s.K != 5 || s.M < kHalfMinMaps || s.M > kHalfMaxMaps) return false;
  HalfGeometry g{};
  g.B = s.B;
  g.M = s.M;
  g.H = s.H;
  g.W = s.W;
  g.PW = s.W_out() / 2;
  g.items = s.H_out() / 2 * g.PW;
  g.inverse_PW = 1.0f / static_cast<float>(std::max(g.PW, 1));
  g.image = s.H * s.W;
  g.words = ceil_div(g.image + 1, 4) * 4;
  g.vector_x = g.image % 4 == 0 && reinterpret_cast<std::uintptr_t>(x) % 16 == 0;
  if (g.items == 0 || g.items >= (1 << 21) || g.bytes() > kHalfSharedMax) return false;
  if (g.B == 0) return true;
  // Blocks of 3 warps where they share an image's tiles evenly and 4 would not (the project's
  // 18 tiles of 8 windows: 6 + 6 + 6 rather than 5 + 5 + 4 + 4, 0.184 to 0.175 ms), otherwise
  // 4: warps idle at the barrier between images are the loss. Not with fewer images than
  // blocks of 3 warps: then 4 warps an image keep more at work (300 images: 0.017 against
  // 0.015 ms).
  const int sms = multiprocessor_count(), tiles = ceil_div(g.items, 8);
  const bool three = tiles % 3 == 0 && tiles % 4 != 0 && g.B >= sms * (kHalfWarpsPerSm / 3);
  // kHalfMinMaps to kHalfMaxMaps maps, in fragments of 8.
  dispatch_frags<ceil_div(kHalfMinMaps, 8), ceil_div(kHalfMaxMaps, 8)>(
      ceil_div(s.M, 8), [&](auto frags) {
        constexpr int kFrags = decltype(frags)::value;
        if (three) {
          launch_c1_half<5, kFrags, 3>(y, x, k, g, stream);
        } else {
          launch_c1_half<5, kFrags, 4>(y, x, k, g, stream);
        }
      });
  return true;
}

// ---- C > 1 on Hopper: the implicit GEMM with a producer warp group ----------------------------
// run_gemm's product (3xTF32) on wgmma, both operands read by the tensor cores from shared
// memory. A block is one producer warp group and one or two consumer warp groups of 64 maps
// each, 128 pixels. The producer loads a stage (16 terms of the filters and of the gathered
// inputs) into registers, splits every value once into its TF32 parts and stores both parts in
// the descriptors' K-major layout; the consumers only issue products. Barriers in shared memory
// (mbarrier) hand the stages over, a full and an empty one per stage, so that neither side
// waits for the whole block. The grid is persistent (as many blocks as fit at once, each taking
// tiles in turn), and the producer's loads run 2 or 3 stages ahead of its stores, across tiles:
// a block's start, its pipeline's fill and its outputs' stores no longer leave the tensor cores
// idle. Outputs are stored as pairs (float2) where y's rows allow.
// Measured on an H100 (VGG-16 at batch 16, fastest of 10, L2 flushed): against run_gemm 10-22%
// faster on every layer from C = 64 on (conv4-2 1.16 to 0.92 ms, conv1-2 1.31 to 1.16), then
// persistent, loads ahead and paired stores 0.92 to 0.79 (conv4-2), 1.16 to 1.01 (conv1-2),
// 0.167 to 0.133 (M = 128, C = 16, K = 5, 64 images of 40x40). Shared memory bounded the first
// version (84% busy: the three products read both operands' parts, and the producer writes
// them). A first version without the producer, every thread splitting the values it had
// copied between the block's barriers, ran 12-35% slower than run_gemm: 200 registers, one
// block of 8 warps per SM, latency-bound on each stage's gather, split and barrier.
constexpr int kWsPixels = 128;  // the products' N: pixels per block
constexpr int kWsTerms = 16;    // terms per stage
constexpr int kWsStages = 4;
// Stages the producer's loads run ahead of the one it stores: as many as its registers allow
// (one block of two consumer groups per SM, two blocks of one: 128 registers a thread).
template <int CWG>
constexpr int kWsAhead = CWG == 1 ? 2 : 3;

template <int CWG>  // consumer warp groups, 64 maps each
struct WsLayout {
  static constexpr int kMaps = 64 * CWG;
  static constexpr int kAFloats = kMaps * kWsTerms;     // one of A big, A small
  static constexpr int kXFloats = kWsPixels * kWsTerms;  // one of X big, X small
  static constexpr int kStageFloats = 2 * kAFloats + 2 * kXFloats;
  static constexpr int kBarrierFloats = 4 * kWsStages;  // full and empty, 8 bytes each
  // Barriers, the stages, then the offset table (R rounded up to whole stages).
  static std::size_t bytes(int R) {
    return sizeof(float) * (std::size_t{kBarrierFloats} + std::size_t{kWsStages} * kStageFloats +
                            static_cast<std::size_t>(ceil_div(R, kWsTerms) * kWsTerms));
  }
};

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
// Row `row` (of `rows`), term r of a stage operand in the descriptor layout: 8-term tiles of
// `rows` x 8, row groups of 8 256 bytes apart, terms 0-3 and 4-7 128 bytes apart. r % 4 == 0
// here: four terms are one float4.
__device__ __forceinline__ int ws_index(int row, int r, int rows) {
  return (r >> 3) * (rows * 8) + (row >> 3) * 64 + ((r >> 2) & 1) * 32 + (row & 7) * 4;
}

__device__ __forceinline__ void mbarrier_init(std::uint64_t* bar, int count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(shared_address(bar)), "r"(count)
               : "memory");
}
__device__ __forceinline__ void mbarrier_arrive(std::uint64_t* bar) {
  asm volatile("{ .reg .b64 state; mbarrier.arrive.shared::cta.b64 state, [%0]; }" ::"r"(
                   shared_address(bar))
               : "memory");
}
// Waits until the barrier's phase of this parity has completed.
__device__ __forceinline__ void mbarrier_wait(std::uint64_t* bar, int parity) {
  unsigned done = 0;
  do {
    asm volatile("{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2; "
                 "selp.u32 %0, 1, 0, p; }"
                 : "=r"(done)
                 : "r"(shared_address(bar)), "r"(parity)
                 : "memory");
  } while (!done);
}

// d += A * B, 64 rows x 128 columns x 8 terms, both operands read from shared memory.
__device__ __forceinline__ void wgmma_tf32_ss(float (&d)[64], std::uint64_t desc_a,
                                              std::uint64_t desc_b) {
  asm volatile("{ .reg .pred p; setp.ne.b32 p, 1, 0; "
               "wgmma.mma_async.sync.aligned.m64n128k8.f32.tf32.tf32 "
               "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, "
               "%17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
               "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, "
               "%47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, "
               "%62, %63}, "
               "%64, %65, p, 1, 1; }"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]),
                 "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]),
                 "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]),
                 "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
                 "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]),
                 "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]),
                 "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]),
                 "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
                 "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]),
                 "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]),
                 "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
               : "l"(desc_a), "l"(desc_b));
}

// Splits four values and stores the big parts at big[i], the small parts at small[i].
__device__ __forceinline__ void store_split4(float* big, float* small, int i, const float (&v)[4]) {
  std::uint32_t b[4], s[4];
#pragma unroll
  for (int j = 0; j < 4; ++j) split_tf32(v[j], b[j], s[j]);
  *reinterpret_cast<uint4*>(big + i) = make_uint4(b[0], b[1], b[2], b[3]);
  *reinterpret_cast<uint4*>(small + i) = make_uint4(s[0], s[1], s[2], s[3]);
}

// store_or_add for a pair of outputs.
__device__ __forceinline__ void store_or_add(float2* out, float2 v, const GemmGeometry& g) {
  if (g.accumulate) {
    const float2 before = *out;
    v.x += before.x;
    v.y += before.y;
  }
  *out = v;
}
#endif

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
// One tile of the persistent GEMM: tile `index` of the grid's sequence, in product `batch`.
struct WsTile {
  int index, tiles_per_batch, m_tiles, maps;
  int batch = 0, m0 = 0, n0 = 0;
  __device__ WsTile(unsigned i, int per_batch, int m_tiles_, int maps_)
      : index(static_cast<int>(i)), tiles_per_batch(per_batch), m_tiles(m_tiles_), maps(maps_) {
    locate();
  }
  __device__ void advance(unsigned step) {
    index += static_cast<int>(step);
    locate();
  }
  __device__ void locate() {
    batch = index / tiles_per_batch;
    const int rest = index - batch * tiles_per_batch;
    m0 = rest % m_tiles * maps;
    n0 = rest / m_tiles * kWsPixels;
  }
};
#endif

template <int CWG>
__global__ void __launch_bounds__(128 * (CWG + 1), CWG == 1 ? 2 : 1)
    conv_best_gemm_ws_kernel(float* __restrict__ y, const float* __restrict__ x,
                             const float* __restrict__ k, const GemmGeometry g) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  using L = WsLayout<CWG>;
  constexpr int NT = 128 * (CWG + 1);
  extern __shared__ float4 smem4[];
  float* smem = reinterpret_cast<float*>(smem4);
  auto* full = reinterpret_cast<std::uint64_t*>(smem);
  std::uint64_t* empty = full + kWsStages;
  float* stages = smem + L::kBarrierFloats;
  int* offsets = reinterpret_cast<int*>(stages + kWsStages * L::kStageFloats);

  const int tid = static_cast<int>(threadIdx.x);
  // The batch's pixels fit an int here (run_gemm_ws).
  const int pixels = static_cast<int>(g.N);
  const int r_tiles = ceil_div(g.R, kWsTerms);
  const int tiles_per_batch = g.m_tiles * ceil_div(pixels, kWsPixels);
  const int tiles = tiles_per_batch * g.batches;
  for (int r = tid; r < r_tiles * kWsTerms; r += NT) {
    offsets[r] = r < g.R ? sum_term_offset(r, g.K, g.W, g.HW) : -1;
  }
  if (tid == 0) {
    for (int s = 0; s < kWsStages; ++s) {
      mbarrier_init(&full[s], 128);        // the producer's threads
      mbarrier_init(&empty[s], 128 * CWG);  // the consumers' threads
    }
  }
  __syncthreads();  // the table and the barriers

  // The block's tiles in turn (m fastest, then pixels, then the batch of products), the stages
  // of all of them in one ring: the producer fills the next tile's while the consumers store
  // the last one's outputs. Stage `it` of the block uses buffer it % kWsStages.
  const WsTile first{blockIdx.x, tiles_per_batch, g.m_tiles, L::kMaps};
  if (tid < 128) {
    const bool has_map = tid < L::kMaps;
    // The loads run kWsAhead stages ahead of the stores, across tiles: `next` is the tile of
    // the next stage to load, `next_kt` its stage, and these its pixel's and map's rows.
    WsTile next = first;
    int next_kt = 0;
    bool n_valid = false, m_valid = false;
    const float* x_base = x;
    const float* a_row = k;
    auto find_rows = [&] {  // pixel n0 + tid of X, map m0 + tid of A (when the block has it)
      const int n = next.n0 + tid;
      const bool in_grid = next.index < tiles;
      n_valid = in_grid && n < pixels;
      x_base = x + next.batch * g.batch_x;
      if (n_valid) {
        const int b = n / g.P, pix = n - b * g.P, h = pix / g.W_out;
        x_base += b * g.chw + std::int64_t{h} * g.W + (pix - h * g.W_out);
      }
      m_valid = in_grid && has_map && next.m0 + tid < g.M;
      a_row = k + next.batch * g.batch_k + std::int64_t{m_valid ? next.m0 + tid : 0} * g.k_stride;
    };
    find_rows();
    using Terms = float[kWsTerms];
    // The next stage's values into registers (zeros past the sum, the pixels, the maps or the
    // block's last tile).
    auto load = [&](Terms& xv, Terms& av) {
      const int r0 = next_kt * kWsTerms;
#pragma unroll
      for (int r = 0; r < kWsTerms; ++r) {
        const int off = offsets[r0 + r];
        xv[r] = n_valid && off >= 0 ? x_base[off] : 0.0f;
      }
      if (g.vector_a) {
#pragma unroll
        for (int r = 0; r < kWsTerms; r += 4) {
          const float4 v = m_valid && r0 + r < g.R
                               ? *reinterpret_cast<const float4*>(a_row + r0 + r)
                               : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
          av[r] = v.x;
          av[r + 1] = v.y;
          av[r + 2] = v.z;
          av[r + 3] = v.w;
        }
      } else {
#pragma unroll
        for (int r = 0; r < kWsTerms; ++r) av[r] = m_valid && r0 + r < g.R ? a_row[r0 + r] : 0.0f;
      }
      if (++next_kt == r_tiles) {
        next_kt = 0;
        next.advance(gridDim.x);
        find_rows();
      }
    };
    // Splits the block's stage `it` into its buffer once the consumers have freed it.
    auto store = [&](int it, const Terms& xv, const Terms& av) {
      const int s = it % kWsStages;
      if (it >= kWsStages) mbarrier_wait(&empty[s], (it / kWsStages - 1) & 1);
      float* a_big = stages + s * L::kStageFloats;
      float* a_small = a_big + L::kAFloats;
      float* x_big = a_small + L::kAFloats;
      float* x_small = x_big + L::kXFloats;
#pragma unroll
      for (int r = 0; r < kWsTerms; r += 4) {
        const float v[4] = {xv[r], xv[r + 1], xv[r + 2], xv[r + 3]};
        store_split4(x_big, x_small, ws_index(tid, r, kWsPixels), v);
        if (has_map) {
          const float w[4] = {av[r], av[r + 1], av[r + 2], av[r + 3]};
          store_split4(a_big, a_small, ws_index(tid, r, L::kMaps), w);
        }
      }
      fence_shared_for_wgmma();
      mbarrier_arrive(&full[s]);
    };
    // The loads of the next kAhead stages are in flight while one is split and stored: a
    // register ring of kAhead + 1 stages, unrolled so that its indices are constants.
    constexpr int kAhead = kWsAhead<CWG>, kRing = kAhead + 1;
    float xv[kRing][kWsTerms], av[kRing][kWsTerms];
    const int my_tiles = first.index < tiles ? (tiles - 1 - first.index) / gridDim.x + 1 : 0;
    const int stages_total = my_tiles * r_tiles;
#pragma unroll
    for (int i = 0; i < kAhead; ++i) load(xv[i], av[i]);
#pragma unroll 1
    for (int it0 = 0; it0 < stages_total; it0 += kRing) {
#pragma unroll
      for (int i = 0; i < kRing; ++i) {
        if (it0 + i >= stages_total) break;
        load(xv[(i + kAhead) % kRing], av[(i + kAhead) % kRing]);
        store(it0 + i, xv[i], av[i]);
      }
    }
    return;
  }

  // Consumer warp group cw: maps m0 + 64 cw ... + 63.
  const int cw = tid / 128 - 1, warp = tid / 32 % 4, lane = tid % 32, gq = lane / 4, t = lane % 4;
  constexpr std::uint64_t kATile = L::kMaps * 8 * 4 / 16, kXTile = kWsPixels * 8 * 4 / 16;
  int it0 = 0;
#pragma unroll 1
  for (WsTile tile = first; (tile.index < tiles); tile.advance(gridDim.x)) {
    float acc[64];
#pragma unroll
    for (int i = 0; i < 64; ++i) acc[i] = 0.0f;
#pragma unroll 1
    for (int kt = 0; kt < r_tiles; ++kt) {
      const int it = it0 + kt, s = it % kWsStages;
      mbarrier_wait(&full[s], (it / kWsStages) & 1);
      const float* a_big = stages + s * L::kStageFloats + cw * 512;  // this group's row groups
      const std::uint64_t a_big_desc = wgmma_descriptor(a_big);
      const std::uint64_t a_small_desc = wgmma_descriptor(a_big + L::kAFloats);
      const float* x_big = stages + s * L::kStageFloats + 2 * L::kAFloats;
      const std::uint64_t x_big_desc = wgmma_descriptor(x_big);
      const std::uint64_t x_small_desc = wgmma_descriptor(x_big + L::kXFloats);
      wgmma_fence();
#pragma unroll
      for (int j = 0; j < kWsTerms / 8; ++j) {
        wgmma_tf32_ss(acc, a_small_desc + j * kATile, x_big_desc + j * kXTile);
        wgmma_tf32_ss(acc, a_big_desc + j * kATile, x_small_desc + j * kXTile);
        wgmma_tf32_ss(acc, a_big_desc + j * kATile, x_big_desc + j * kXTile);
      }
      wgmma_commit();
      wgmma_wait<1>(acc);  // the previous stage's products are done: free it
      if (kt > 0) mbarrier_arrive(&empty[(it - 1) % kWsStages]);
    }
    wgmma_wait<0>(acc);
    it0 += r_tiles;
    mbarrier_arrive(&empty[(it0 - 1) % kWsStages]);

    // acc[4j..4j+3]: maps row and row + 8, pixels 8j + 2t and + 1.
    float* y_batch = y + tile.batch * g.batch_y;
    const int row = 64 * cw + 16 * warp + gq;
#pragma unroll
    for (int j = 0; j < 16; ++j) {
      const int col = tile.n0 + 8 * j + 2 * t;
      if (g.vector_y && col < pixels) {  // both pixels in one image: pairs as float2s
        const int b = col / g.P;
        float* out = y_batch + std::int64_t{b} * g.M * g.P + (col - b * g.P);
#pragma unroll
        for (int half = 0; half < 2; ++half) {
          const int m = tile.m0 + row + 8 * half;
          if (m < g.M) {
            store_or_add(reinterpret_cast<float2*>(out + std::int64_t{m} * g.P),
                         make_float2(acc[4 * j + 2 * half], acc[4 * j + 2 * half + 1]), g);
          }
        }
        continue;
      }
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        if (col + e >= pixels) continue;
        const int b = (col + e) / g.P;
        float* out = y_batch + std::int64_t{b} * g.M * g.P + (col + e - b * g.P);
#pragma unroll
        for (int half = 0; half < 2; ++half) {
          const int m = tile.m0 + row + 8 * half;
          if (m < g.M) store_or_add(out + std::int64_t{m} * g.P, acc[4 * j + 2 * half + e], g);
        }
      }
    }
  }
#endif
}

// `batches` products, g.batch_* floats apart: as many blocks as fit on the GPU at once, or
// one per tile when there are fewer tiles.
template <int CWG>
void launch_gemm_ws(float* y, const float* x, const float* k, GemmGeometry g,
                    cudaStream_t stream, int batches = 1) {
  g.m_tiles = ceil_div(g.M, 64 * CWG);
  g.batches = batches;
  g.vector_y = g.P % 2 == 0 && g.batch_y % 2 == 0 &&
               reinterpret_cast<std::uintptr_t>(y) % sizeof(float2) == 0;
  const std::int64_t tiles = std::int64_t{g.m_tiles} * ceil_div<std::int64_t>(g.N, kWsPixels) *
                             batches;
  const std::size_t smem = WsLayout<CWG>::bytes(g.R);
  auto* kernel = conv_best_gemm_ws_kernel<CWG>;
  allow_dynamic_shared_memory(kernel, static_cast<std::int64_t>(smem), "conv_best");
  const std::int64_t blocks = std::min<std::int64_t>(
      tiles, resident_blocks(reinterpret_cast<const void*>(kernel), 128 * (CWG + 1),
                             static_cast<int>(smem)));
  kernel<<<static_cast<unsigned>(blocks), 128 * (CWG + 1), smem, stream>>>(y, x, k, g);
  CUDA_CHECK_LAUNCH();
}

// Consumer warp groups for M maps: one up to 64 maps, else two.
int ws_consumer_groups(int M) { return M <= 64 ? 1 : 2; }

// launch_gemm_ws with ws_consumer_groups(g.M) consumer groups.
void launch_gemm_ws_for_maps(float* y, const float* x, const float* k, const GemmGeometry& g,
                             cudaStream_t stream, int batches = 1) {
  if (ws_consumer_groups(g.M) == 1) {
    launch_gemm_ws<1>(y, x, k, g, stream, batches);
  } else {
    launch_gemm_ws<2>(y, x, k, g, stream, batches);
  }
}

// The producer-consumer GEMM for C > 1 with more than 32 maps, sums of 64 terms or more and a
// grid of half the SMs or more; false (nothing launched) otherwise, or without the sm_90a
// kernel for this device. From 33 maps run_gemm's tiles are 64 maps wide too, and its
// `mma.sync` products were slower (H100, 32 images: C = 44, 59 maps, K = 6 on 34x98 0.441 to
// 0.345 ms; C = 128, 40 maps, K = 5 on 32x32 0.286 to 0.226; C = 8, 40 maps, K = 3 0.0164 to
// 0.0142); with 32 maps it was faster (C = 16, K = 5 on 40x40: 0.044 against 0.055).
constexpr int kWsMinMaps = 33;
bool run_gemm_ws(float* y, const float* x, const float* k, const ConvShape& s,
                 cudaStream_t stream) {
  const GemmGeometry g = make_gemm_geometry(s, k);
  if (s.C == 1 || s.M < kWsMinMaps || g.R < 64 || s.K * s.K > kGemmMaxR || !wgmma_built()) {
    return false;
  }
  if (g.N > INT_MAX - kWsPixels || ceil_div<std::int64_t>(g.N, kWsPixels) * g.M > INT_MAX) {
    return false;
  }
  // One block per SM: grids of fewer blocks than half the SMs ran faster on run_gemm's smaller
  // tiles (M = 200, C = 24, 3 images of 11x13: 0.016 against 0.025 ms).
  const std::int64_t blocks =
      ceil_div<std::int64_t>(g.N, kWsPixels) * ceil_div(g.M, 64 * ws_consumer_groups(g.M));
  if (2 * blocks < multiprocessor_count()) return false;
  auto launch = [&](const float* x_part, const float* k_part, const GemmGeometry& part) {
    launch_gemm_ws_for_maps(y, x_part, k_part, part, stream);
  };
  for_channel_chunks(g, x, k, launch);
  return true;
}

// K = 3 with 64 to 1024 channels and 64 maps or more (VGG-16's layers from conv1-2 on), on
// Hopper: Winograd's F(4x4, 3x3) around the producer-consumer GEMM above.
//
// A 4x4 tile of outputs is A^T [sum_c (G g_c G^T) . (B^T d_c B)] A, d_c the tile's 6x6 input
// patch in channel c, g_c its 3x3 filter and . the element-wise product: 36 products per
// channel and tile where the direct sum takes 144. The layer becomes 36 independent GEMMs, one
// per position t of the 6x6 transform: Z[t][m][p] = sum_c U[t][m][c] V[t][c][p], U the
// transformed filters, V the transformed input tiles and p a tile of the batch. Two kernels
// transform filters and inputs into a workspace, run_gemm_ws's kernel multiplies (a 1x1 conv
// of one image of P pixels per product, still 3xTF32), and a third kernel transforms Z back
// into y. The workspace (U, V and Z: about 4.5 times x and y) comes from the stream-ordered
// pool. cuDNN's fp32 class runs this algorithm on VGG-16 too (WINOGRAD_NONFUSED); the direct
// GEMM, with 2.25 times the multiplies, stayed 0.52-0.88 times cuDNN's speed on those layers.
// Accuracy: the input transform scales values by up to 100 and the output transform cancels
// what it adds, so the sums lose more to rounding than a direct one: on VGG-16's layers the
// worst error is 1.4 to 3.6 times the direct GEMM's, 0.16 to 0.42 of the fp32 class's bound
// (the bench's check), as cuDNN's Winograd. Points 0, 1, -1, 2, -2 (1/2 and -1/2 measured no
// more exact). The exact-count models have no such layer.
// Measured on an H100 (VGG-16 at batch 16, fastest of 10, L2 flushed): conv4-2 0.91 ms with the
// direct GEMM, 0.34 so (cuDNN 0.48); conv1-2 1.16 to 0.91 (cuDNN 1.01), where the transforms
// take half the time at 78-86% of DRAM bandwidth.
constexpr int kWinoTile = 4;                  // outputs per tile side
constexpr int kWinoPatch = kWinoTile + 2;     // inputs per patch side
constexpr int kWinoT = kWinoPatch * kWinoPatch;  // products per channel and tile
constexpr int kWinoThreads = 256;
// Channels at most: the worst error grows about as sqrt(C) times the bound (0.18 of it at
// C = 128, 0.30 at 256, 0.42 at 512), so past this the direct GEMM's sums are safer.
constexpr int kWinoMaxC = 1024;

// The transforms' matrices, as function objects so that unrolled code folds them into
// constants.
struct WinoBt {  // B^T, 6 x 6
  __device__ __forceinline__ float operator()(int i, int j) const {
    constexpr float kBt[kWinoPatch][kWinoPatch] = {{4, 0, -5, 0, 1, 0},  {0, -4, -4, 1, 1, 0},
                                                   {0, 4, -4, -1, 1, 0}, {0, -2, -1, 2, 1, 0},
                                                   {0, 2, -1, -2, 1, 0}, {0, 4, 0, -5, 0, 1}};
    return kBt[i][j];
  }
};
struct WinoG {  // G, 6 x 3
  __device__ __forceinline__ float operator()(int i, int j) const {
    constexpr float kG[kWinoPatch][3] = {{1.0f / 4, 0, 0},
                                         {-1.0f / 6, -1.0f / 6, -1.0f / 6},
                                         {-1.0f / 6, 1.0f / 6, -1.0f / 6},
                                         {1.0f / 24, 1.0f / 12, 1.0f / 6},
                                         {1.0f / 24, -1.0f / 12, 1.0f / 6},
                                         {0, 0, 1}};
    return kG[i][j];
  }
};
struct WinoAt {  // A^T, 4 x 6
  __device__ __forceinline__ float operator()(int i, int j) const {
    constexpr float kAt[kWinoTile][kWinoPatch] = {
        {1, 1, 1, 1, 1, 0}, {0, 1, -1, 2, -2, 0}, {0, 1, 1, 4, 4, 0}, {0, 1, -1, 8, -8, 1}};
    return kAt[i][j];
  }
};
// out = L in L^T for a constant L (kRows x kCols, given by `l`) and a kCols x kCols `in`.
template <int kRows, int kCols, typename Matrix>
__device__ __forceinline__ void wino_sandwich(float (&out)[kRows][kRows],
                                              const float (&in)[kCols][kCols], Matrix l) {
  float half[kRows][kCols];
#pragma unroll
  for (int i = 0; i < kRows; ++i) {
#pragma unroll
    for (int j = 0; j < kCols; ++j) {
      float s = 0.0f;
#pragma unroll
      for (int e = 0; e < kCols; ++e) {
        if (l(i, e) != 0.0f) s = fmaf(l(i, e), in[e][j], s);
      }
      half[i][j] = s;
    }
  }
#pragma unroll
  for (int i = 0; i < kRows; ++i) {
#pragma unroll
    for (int j = 0; j < kRows; ++j) {
      float s = 0.0f;
#pragma unroll
      for (int e = 0; e < kCols; ++e) {
        if (l(j, e) != 0.0f) s = fmaf(half[i][e], l(j, e), s);
      }
      out[i][j] = s;
    }
  }
}

struct WinoGeometry {
  int M, C, H, W, H_out, W_out;
  int tiles_h, tiles_w;  // tiles per image column and row
  int P;                 // tiles in the batch: B * tiles_h * tiles_w
  bool vector_y;         // y 16-byte aligned and W_out a multiple of 4: rows of tiles as float4s

  // Tile p of the batch: its image and its first output's row and column.
  struct Origin {
    int b, h0, w0;
  };
  __device__ Origin origin(int p) const {
    const int per_image = tiles_h * tiles_w;
    const int b = p / per_image, tile = p - b * per_image;
    return {b, tile / tiles_w * kWinoTile, tile % tiles_w * kWinoTile};
  }
};

// U[t][m][c] = (G g G^T)[t], g = k[m][c]: one thread per (m, c).
__global__ void __launch_bounds__(kWinoThreads)
    conv_best_wino_filters(float* __restrict__ u, const float* __restrict__ k, int M, int C) {
  const std::int64_t mc = std::int64_t{blockIdx.x} * kWinoThreads + threadIdx.x;
  const std::int64_t count = std::int64_t{M} * C;
  if (mc >= count) return;
  float g[3][3];
#pragma unroll
  for (int i = 0; i < 9; ++i) g[i / 3][i % 3] = k[mc * 9 + i];
  float t[kWinoPatch][kWinoPatch];
  wino_sandwich<kWinoPatch, 3>(t, g, WinoG{});
#pragma unroll
  for (int i = 0; i < kWinoT; ++i) u[i * count + mc] = t[i / kWinoPatch][i % kWinoPatch];
}

// V[t][c][p] = (B^T d B)[t], d the 6x6 patch of tile p in channel c (zeros past the image):
// one thread per (c, p), p fastest, so each of the 36 stores is coalesced.
__global__ void __launch_bounds__(kWinoThreads)
    conv_best_wino_inputs(float* __restrict__ v, const float* __restrict__ x, WinoGeometry g) {
  const std::int64_t cp = std::int64_t{blockIdx.x} * kWinoThreads + threadIdx.x;
  const std::int64_t count = std::int64_t{g.C} * g.P;
  if (cp >= count) return;
  const int c = static_cast<int>(cp / g.P);
  const auto [b, h0, w0] = g.origin(static_cast<int>(cp - std::int64_t{c} * g.P));
  const float* plane = x + (std::int64_t{b} * g.C + c) * g.H * g.W;
  float d[kWinoPatch][kWinoPatch];
#pragma unroll
  for (int i = 0; i < kWinoPatch; ++i) {
#pragma unroll
    for (int j = 0; j < kWinoPatch; ++j) {
      const bool inside = h0 + i < g.H && w0 + j < g.W;
      d[i][j] = inside ? __ldg(plane + (h0 + i) * g.W + w0 + j) : 0.0f;
    }
  }
  float t[kWinoPatch][kWinoPatch];
  wino_sandwich<kWinoPatch, kWinoPatch>(t, d, WinoBt{});
#pragma unroll
  for (int i = 0; i < kWinoT; ++i) v[i * count + cp] = t[i / kWinoPatch][i % kWinoPatch];
}

// y's tile p of map m = (A^T Z A), Z[t] = z[t][m][p]: one thread per (m, p), p fastest.
__global__ void __launch_bounds__(kWinoThreads)
    conv_best_wino_outputs(float* __restrict__ y, const float* __restrict__ z, WinoGeometry g) {
  const std::int64_t mp = std::int64_t{blockIdx.x} * kWinoThreads + threadIdx.x;
  const std::int64_t count = std::int64_t{g.M} * g.P;
  if (mp >= count) return;
  float zt[kWinoPatch][kWinoPatch];
#pragma unroll
  for (int i = 0; i < kWinoT; ++i) zt[i / kWinoPatch][i % kWinoPatch] = z[i * count + mp];
  float out[kWinoTile][kWinoTile];
  wino_sandwich<kWinoTile, kWinoPatch>(out, zt, WinoAt{});
  const int m = static_cast<int>(mp / g.P);
  const auto [b, h0, w0] = g.origin(static_cast<int>(mp - std::int64_t{m} * g.P));
  float* map = y + (std::int64_t{b} * g.M + m) * g.H_out * g.W_out;
#pragma unroll
  for (int i = 0; i < kWinoTile; ++i) {
    if (h0 + i >= g.H_out) break;
    float* row = map + (h0 + i) * g.W_out + w0;
    if (g.vector_y) {
      *reinterpret_cast<float4*>(row) = make_float4(out[i][0], out[i][1], out[i][2], out[i][3]);
      continue;
    }
#pragma unroll
    for (int j = 0; j < kWinoTile; ++j) {
      if (w0 + j < g.W_out) row[j] = out[i][j];
    }
  }
}

// The Winograd path; false (nothing launched) for other shapes (outputs narrower than a tile
// would waste most of it), without the sm_90a GEMM, or when the workspace cannot be allocated.
bool run_winograd(float* y, const float* x, const float* k, const ConvShape& s,
                  cudaStream_t stream) {
  if (s.K != 3 || s.C < 64 || s.M < 64 || s.C > kWinoMaxC || s.H_out() < kWinoTile ||
      s.W_out() < kWinoTile || !wgmma_built()) {
    return false;
  }
  WinoGeometry g{s.M, s.C, s.H, s.W, s.H_out(), s.W_out(), 0, 0, 0, false};
  g.vector_y = g.W_out % kWinoTile == 0 && reinterpret_cast<std::uintptr_t>(y) % 16 == 0;
  g.tiles_h = ceil_div(g.H_out, kWinoTile);
  g.tiles_w = ceil_div(g.W_out, kWinoTile);
  const std::int64_t tiles = std::int64_t{s.B} * g.tiles_h * g.tiles_w;
  // The GEMM's offsets into one product's V (c * P) are ints.
  if (tiles > INT_MAX - kWsPixels || tiles * s.C > INT_MAX) return false;
  g.P = static_cast<int>(tiles);
  const std::int64_t u_floats = std::int64_t{kWinoT} * s.M * s.C;
  const std::int64_t v_floats = std::int64_t{kWinoT} * s.C * g.P;
  const std::int64_t z_floats = std::int64_t{kWinoT} * s.M * g.P;
  if (ceil_div<std::int64_t>(std::int64_t{s.M} * g.P, kWinoThreads) > INT_MAX ||
      ceil_div<std::int64_t>(std::int64_t{s.C} * g.P, kWinoThreads) > INT_MAX ||
      ceil_div<std::int64_t>(g.P, kWsPixels) * s.M * kWinoT > INT_MAX) {
    return false;
  }
  // (Without the workspace: the direct GEMM instead.)
  void* workspace = pool_workspace(
      static_cast<std::size_t>(u_floats + v_floats + z_floats) * sizeof(float), stream);
  if (workspace == nullptr) return false;
  float* u = static_cast<float*>(workspace);
  float* v = u + u_floats;
  float* z = v + v_floats;
  conv_best_wino_filters<<<static_cast<unsigned>(ceil_div<std::int64_t>(
                               std::int64_t{s.M} * s.C, kWinoThreads)),
                           kWinoThreads, 0, stream>>>(u, k, s.M, s.C);
  CUDA_CHECK_LAUNCH();
  conv_best_wino_inputs<<<static_cast<unsigned>(ceil_div<std::int64_t>(
                              std::int64_t{s.C} * g.P, kWinoThreads)),
                          kWinoThreads, 0, stream>>>(v, x, g);
  CUDA_CHECK_LAUNCH();
  // Each product as a 1x1 conv of C channels on one image of 1 x P pixels.
  GemmGeometry gg = make_gemm_geometry(ConvShape{1, s.M, s.C, 1, g.P, 1}, u);
  gg.batch_k = std::int64_t{s.M} * s.C;
  gg.batch_x = std::int64_t{s.C} * g.P;
  gg.batch_y = std::int64_t{s.M} * g.P;
  launch_gemm_ws_for_maps(z, v, u, gg, stream, kWinoT);
  conv_best_wino_outputs<<<static_cast<unsigned>(ceil_div<std::int64_t>(
                               std::int64_t{s.M} * g.P, kWinoThreads)),
                           kWinoThreads, 0, stream>>>(y, z, g);
  CUDA_CHECK_LAUNCH();
  CUDA_CHECK(cudaFreeAsync(workspace, stream));
  return true;
}

// Every other shape: one thread per output, grid-stride over all of y; a split sum's part
// (blockIdx.y) sums channels [c_begin, c_end) into its own copy of y.
__global__ void conv_best_fallback_kernel(float* __restrict__ y, const float* __restrict__ x,
                                          const float* __restrict__ k, int M, int C, int H, int W,
                                          int K, std::int64_t total, int c_part,
                                          std::int64_t part_floats) {
  const int c_begin = static_cast<int>(blockIdx.y) * c_part, c_end = min(C, c_begin + c_part);
  y += blockIdx.y * part_floats;
  const int H_out = H - K + 1;
  const int W_out = W - K + 1;
  for (std::int64_t i = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x; i < total;
       i += std::int64_t{gridDim.x} * blockDim.x) {
    const int w = static_cast<int>(i % W_out);
    const int h = static_cast<int>(i / W_out % H_out);
    const int m = static_cast<int>(i / (std::int64_t{W_out} * H_out) % M);
    const std::int64_t b = i / (std::int64_t{W_out} * H_out * M);
    float acc = 0.0f;
    for (int c = c_begin; c < c_end; ++c) {
      const float* xc = x + ((b * C + c) * H + h) * W + w;
      const float* kc = k + (std::int64_t{m} * C + c) * K * K;
      for (int p = 0; p < K; ++p) {
        for (int q = 0; q < K; ++q)
          acc += __ldg(xc + std::int64_t{p} * W + q) * __ldg(kc + p * K + q);
      }
    }
    y[i] = acc;
  }
}

// Fused, every other shape or pool: one thread per pooled output, grid-stride over all of y.
__global__ void conv_tanh_maxpool_best_fallback_kernel(float* __restrict__ y,
                                                       const float* __restrict__ x,
                                                       const float* __restrict__ k, int M, int C,
                                                       int H, int W, int K, int pool, int stride,
                                                       int out_h, int out_w, std::int64_t total) {
  for (std::int64_t i = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x; i < total;
       i += std::int64_t{gridDim.x} * blockDim.x) {
    const int pw = static_cast<int>(i % out_w);
    const int ph = static_cast<int>(i / out_w % out_h);
    const int m = static_cast<int>(i / (std::int64_t{out_w} * out_h) % M);
    const std::int64_t b = i / (std::int64_t{out_w} * out_h * M);
    float best = -INFINITY;
    for (int u = 0; u < pool; ++u) {
      for (int v = 0; v < pool; ++v) {
        const int h = ph * stride + u, w = pw * stride + v;
        float acc = 0.0f;
        for (int c = 0; c < C; ++c) {
          const float* xc = x + ((b * C + c) * H + h) * W + w;
          const float* kc = k + (std::int64_t{m} * C + c) * K * K;
          for (int p = 0; p < K; ++p) {
            for (int q = 0; q < K; ++q)
              acc += __ldg(xc + std::int64_t{p} * W + q) * __ldg(kc + p * K + q);
          }
        }
        best = fmaxf(best, acc);
      }
    }
    y[i] = tanh_fast(best);
  }
}

// tanh and max-pool over a conv output `full` (B x M planes of H_out x W_out): one thread per
// pooled value, grid-stride; the max first, then one tanh (tanh is increasing), as the fused
// kernels do.
__global__ void conv_best_tanh_maxpool_kernel(float* __restrict__ y, const float* __restrict__ full,
                                              int H_out, int W_out, int pool, int stride,
                                              int out_h, int out_w, std::int64_t total) {
  for (std::int64_t i = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x; i < total;
       i += std::int64_t{gridDim.x} * blockDim.x) {
    const int pw = static_cast<int>(i % out_w);
    const int ph = static_cast<int>(i / out_w % out_h);
    const std::int64_t plane = i / (std::int64_t{out_w} * out_h);
    const float* window = full + (plane * H_out + ph * stride) * W_out + pw * stride;
    float best = -INFINITY;
    for (int u = 0; u < pool; ++u) {
      for (int v = 0; v < pool; ++v) best = fmaxf(best, __ldg(window + u * W_out + v));
    }
    y[i] = tanh_fast(best);
  }
}

// The tiles of a launch: TH x TW conv outputs per thread (fused: TH/2 x TW/2 pooled values).
Geometry make_geometry(float* y, const float* x, const ConvShape& s, bool fused, int th, int tw) {
  Geometry g{};
  g.C = s.C;
  g.H = s.H;
  g.W = s.W;
  g.M = s.M;
  g.out_h = fused ? s.H_out() / 2 : s.H_out();  // PoolShape{2, 2}.out(n) is n / 2
  g.out_w = fused ? s.W_out() / 2 : s.W_out();
  const int tiles_h = ceil_div(g.out_h, fused ? th / 2 : th);
  g.tiles_w = ceil_div(g.out_w, fused ? tw / 2 : tw);
  const std::int64_t per_image = std::int64_t{tiles_h} * g.tiles_w;
  g.tiles_per_image = static_cast<int>(std::min<std::int64_t>(per_image, INT_MAX));
  g.tiles = per_image * s.B;
  // Tiles start at even columns (2, 4 or 8 conv columns, 2 or 4 pooled), so an even row length
  // keeps every tile's pairs aligned and whole.
  const auto y_at = reinterpret_cast<std::uintptr_t>(y);
  g.store_width = g.out_w % 4 == 0 && y_at % sizeof(float4) == 0   ? 4
                  : g.out_w % 2 == 0 && y_at % sizeof(float2) == 0 ? 2
                                                                   : 1;
  // float4 loads of x's rows need tiles that start at multiples of 4 columns as well.
  g.vector_loads = tw % 4 == 0 && g.W % 4 == 0 &&
                   reinterpret_cast<std::uintptr_t>(x) % sizeof(float4) == 0;
  g.c_part = s.C;
  return g;
}

// C = 1, plain, K = 4 or 5 on rows of float4s (g: the 4x4 tiles' geometry): whether 1x4 tiles
// (a warp stores 512 consecutive bytes of a map) run faster than 4x4 ones. Measured on an H100:
// K = 4 always (50 maps on 31x31: 0.075 to 0.059 ms at 1000 images, 0.463 to 0.346 at 6000);
// K = 5 while the 4x4 grid is under five waves (the project's layer: 5-7% faster at 1000 to
// 5000 images, as fast at 7000, 1.2% slower at 10000; 12 or 16 maps at 10000 images 3-5%
// slower). K = 2 and 3 measured mixed (-9% to +12%), K = 7 21-29% slower; K = 1 and 6 were not
// tried, so only K = 4 and 5 have the 1x4 kernel (kHasRowTiles).
template <int K>
constexpr bool kHasRowTiles = K == 4 || K == 5;
template <int K>
bool row_tiles_faster(const Geometry& g) {
  if (!kHasRowTiles<K> || g.store_width != 4) return false;
  const std::int64_t blocks =
      ceil_div<std::int64_t>(g.tiles, kHoldThreads) * ceil_div(g.M, kMaxSliceMaps);
  return K == 4 || blocks < std::int64_t{5} * kHoldBlocksPlain * multiprocessor_count();
}

// The C = 1 kernel on all maps: one block per NT tiles and per slice of at most kMaxSliceMaps
// maps (one slice for the project's layer: fewer, longer blocks measured faster). Returns false
// (nothing launched) when the grid would be too large.
template <int K, int TH, int TW, bool kFused, int NT, int kMinBlocks>
bool launch_hold(float* y, const float* x, const float* k, Geometry g, cudaStream_t stream,
                 int slice_maps_max = kMaxSliceMaps) {
  g.m0 = 0;
  g.m_count = g.M;
  g.map_blocks = ceil_div(g.m_count, std::min(slice_maps_max, kMaxSliceMaps));
  g.maps_per_block = ceil_div(g.m_count, g.map_blocks);  // as even as possible
  const std::int64_t blocks = ceil_div<std::int64_t>(g.tiles, NT) * g.map_blocks;
  if (g.tiles_per_image == INT_MAX || blocks > INT_MAX) return false;
  const auto smem = static_cast<std::size_t>(g.maps_per_block) * ((K * K + 3) / 4) * 16;
  conv_best_hold_kernel<K, TH, TW, kFused, NT, kMinBlocks>
      <<<static_cast<unsigned>(blocks), NT, smem, stream>>>(y, x, k, g);
  CUDA_CHECK_LAUNCH();
  return true;
}

// Plain 1x4 tiles where they are compiled (kHasRowTiles); false (nothing launched) elsewhere.
template <int K>
bool launch_row_tiles(float* y, const float* x, const float* k, const ConvShape& s,
                      cudaStream_t stream) {
  if constexpr (kHasRowTiles<K>) {
    return launch_hold<K, 1, 4, false, kHoldThreads, kHoldBlocksWide>(
        y, x, k, make_geometry(y, x, s, false, 1, 4), stream, kMaxSliceMaps);
  } else {
    return false;
  }
}

// The stream kernel: for K >= kStreamSharedMinK, one launch with each block's filters in
// shared memory when they fit; else one launch per chunk of maps whose filters fit in
// constant memory. False (nothing launched) when one map's filter does not fit in constant
// memory or the grid would be too large.
template <int K, int TW, bool kFused>
bool launch_stream(float* y, const float* x, const float* k, Geometry g, cudaStream_t stream) {
  // Two float4 loads bring a 7-long filter row that takes 7 constant loads: LeNet's conv2
  // 2.65 to 2.48 ms, 8 maps, C = 6, K = 7 on 30x30 1.05 to 0.92 (H100). With K = 5 shared
  // memory measured the same as constant memory, with K = 3 3-10% slower.
  const int maps_per_launch = stream_launch_maps(g.M, g.C, K);
  if (maps_per_launch == 0 || g.tiles_per_image == INT_MAX ||
      stream_blocks(g.tiles, maps_per_launch) > INT_MAX) {
    return false;
  }
  const auto set_maps = [&g](int m0, int count) {
    g.m0 = m0;
    g.m_count = count;
    g.maps_per_block = stream_maps_per_block(count);
    g.map_blocks = ceil_div(count, g.maps_per_block);
  };
  // Every launch of the layer into `out`, `parts` parts of the sum (g.c_part channels each).
  const auto launch_all = [&](float* out, int parts) {
    if constexpr (K >= kStreamSharedMinK) {
      const std::int64_t shared = stream_shared_bytes(g.C, K);
      if (shared <= kStreamSharedMax) {
        set_maps(0, g.M);
        conv_best_stream_kernel<K, TW, kFused, true>
            <<<dim3(static_cast<unsigned>(stream_blocks(g.tiles, g.M)), parts), kStreamThreads,
               static_cast<std::size_t>(shared), stream>>>(out, x, k, g);
        CUDA_CHECK_LAUNCH();
        return;
      }
    }
    const std::int64_t filter = std::int64_t{g.C} * K * K;  // one map's filter
    for (int m0 = 0; m0 < g.M; m0 += maps_per_launch) {
      set_maps(m0, std::min(maps_per_launch, g.M - m0));
      // Stream order: this copy lands after the previous chunk's kernel has read the filters.
      CUDA_CHECK(cudaMemcpyToSymbolAsync(
          c_best_weights, k + m0 * filter,
          static_cast<std::size_t>(g.m_count * filter) * sizeof(float), 0,
          cudaMemcpyDeviceToDevice, stream));
      conv_best_stream_kernel<K, TW, kFused, false>
          <<<dim3(static_cast<unsigned>(stream_blocks(g.tiles, g.m_count)), parts),
             kStreamThreads, 0, stream>>>(out, x, k, g);
      CUDA_CHECK_LAUNCH();
    }
  };
  if constexpr (!kFused) {
    // A grid too small for the SMs with a long sum: its channels in parts (one launch only).
    const int parts = maps_per_launch == g.M
                          ? channel_parts(g.C, K, stream_blocks(g.tiles, g.M), kStreamBlocksPerSm)
                          : 1;
    const std::int64_t n = g.tiles / g.tiles_per_image * g.M * g.out_h * g.out_w;
    if (parts > 1 && run_channel_parts(y, n, g.C, parts, stream,
                                       [&](float* partial, int count, int c_part,
                                           std::int64_t stride) {
                                         g.c_part = c_part;
                                         g.part_floats = stride;
                                         launch_all(partial, count);
                                       })) {
      return true;
    }
  }
  launch_all(y, 1);
  return true;
}

// The tiled path for conv (kFused false) or conv + tanh + 2x2 stride-2 max-pool (kFused true).
// Returns false, launching nothing, when the shape needs the fallback kernel.
template <bool kFused>
bool run_tiled(float* y, const float* x, const float* k, const ConvShape& s, cudaStream_t stream) {
  if (s.K > kMaxK) return false;
  bool launched = false;
  dispatch_filter_size<kMaxK>(s.K, [&](auto filter_size) {
    constexpr int kK = decltype(filter_size)::value;
    if constexpr (kK > 0) {  // 1 <= K <= kMaxK here
      if constexpr (kK <= kHoldMaxK) {
        if (s.C == 1) {
          // 128 threads per block. Measured best on an H100 (see the header): fused, 4x4
          // tiles (2x2 pooled values), 4 blocks per SM (<= 128 registers) and slices of <= 25
          // maps. Plain, one slice and 4x4 tiles, 3 blocks per SM (4 for K >= 6: 8% faster on
          // LeNet's conv1), except where y's rows take float2 but not float4 stores: then 8x2
          // tiles, so a warp's stores are whole consecutive pairs (4x4 tiles write every other
          // pair per instruction: 0.295 against 0.170 ms on odd-shapes' conv1), and 1x4 tiles
          // where row_tiles_faster says so.
          constexpr int kT = kHoldThreads;
          if constexpr (kFused) {
            launched = launch_hold<kK, 4, 4, true, kT, kHoldBlocksWide>(
                y, x, k, make_geometry(y, x, s, true, 4, 4), stream, kFusedSliceMaps);
          } else {
            const Geometry g = make_geometry(y, x, s, false, 4, 4);
            if (g.store_width == 2) {
              launched = launch_hold<kK, 8, 2, false, kT, kHoldBlocksPlain>(
                  y, x, k, make_geometry(y, x, s, false, 8, 2), stream, kMaxSliceMaps);
            } else if constexpr (kK >= 6) {
              launched = launch_hold<kK, 4, 4, false, kT, kHoldBlocksWide>(y, x, k, g, stream,
                                                                           kMaxSliceMaps);
            } else if (row_tiles_faster<kK>(g)) {
              launched = launch_row_tiles<kK>(y, x, k, s, stream);
            } else {
              launched = launch_hold<kK, 4, 4, false, kT, kHoldBlocksPlain>(y, x, k, g, stream,
                                                                           kMaxSliceMaps);
            }
          }
          return;
        }
      }
      launched = launch_stream<kK, kStreamTileW, kFused>(
          y, x, k, make_geometry(y, x, s, kFused, kTileH, kStreamTileW), stream);
    }
  });
  return launched;
}

// K = 1 with C > 1 and at most 16 maps: y[b][m][p] = sum_c k[m][c] x[b][c][p], where an input
// value feeds only its pixel's M outputs, so the layer is bound by reading x. A thread takes 4
// consecutive pixels of an image and every channel (one float4 load each where planes are
// whole float4s), keeps 4 x MT sums, and reads the filters from shared memory as [c][m], a
// broadcast float4 per 4 maps. The channel-streaming kernel read x once per 4 maps, and the
// staged images gained nothing from staging (256 images, H100: C = 183, 7 maps on 63x12 0.215 to
// 0.068 ms, cuDNN 0.110; C = 49, 4 maps on 107x20 0.082 to 0.055; C = 21, 7 maps on 43x5 0.021
// to 0.014). On grids of fewer than two blocks per SM, four lanes share a quad's sum (256
// images, H100: C = 256, 12 maps on 14x14 0.086 to 0.043 ms, cuDNN 0.048; C = 512, 16 maps on
// 7x7 0.266 to 0.053, cuDNN 0.053; C = 21, 7 maps on 43x5 0.0156 to 0.0092, cuDNN 0.0109).
constexpr int kPointwiseMaxMaps = 16;
constexpr int kPointwiseThreads = 256;
constexpr int kPointwiseMaxC = 48 * 1024 / (4 * kPointwiseMaxMaps);  // 768: filters in 48 KB
// Grids of fewer quads than this many blocks' worth per SM split each sum in kPointwiseSplit
// interleaved parts over the lanes of a warp, added by shuffles in a fixed order: four times the
// threads on a grid that would leave SMs short of loads in flight.
constexpr int kPointwiseSplitBlocksPerSm = 2;
constexpr int kPointwiseSplit = 4;
constexpr int kPointwiseSplitMinC = 16;

template <int MT, bool kVec, int kSplit>
__global__ void __launch_bounds__(kPointwiseThreads)
    conv_best_pointwise_kernel(float* __restrict__ y, const float* __restrict__ x,
                               const float* __restrict__ k, int M, int C, int P,
                               int quads_per_image, std::int64_t quads) {
  extern __shared__ float4 pointwise_smem[];
  float* filters = reinterpret_cast<float*>(pointwise_smem);  // [C][MT], zero past M
  for (int i = static_cast<int>(threadIdx.x); i < C * MT; i += kPointwiseThreads) {
    const int c = i / MT, m = i % MT;
    filters[i] = m < M ? k[std::int64_t{m} * C + c] : 0.0f;
  }
  __syncthreads();
  // A warp holds 32 / kSplit quads; lane group g sums channels g, g + kSplit, ...
  constexpr int kLanes = 32 / kSplit, kQuadsPerBlock = kPointwiseThreads / kSplit;
  const int lane = static_cast<int>(threadIdx.x) % 32, group = lane / kLanes;
  const int first = static_cast<int>(threadIdx.x) / 32 * kLanes + lane % kLanes;
  const std::int64_t step = std::int64_t{gridDim.x} * kQuadsPerBlock;
  // The loop is the same for every lane of a block (the shuffles need whole warps); a quad past
  // the end reads the last one's inputs and stores nothing.
  for (std::int64_t base = std::int64_t{blockIdx.x} * kQuadsPerBlock; base < quads;
       base += step) {
    const std::int64_t q = base + first;
    const bool valid = q < quads;
    const std::int64_t qq = valid ? q : quads - 1;
    const std::int64_t b = qq / quads_per_image;
    const int p0 = 4 * static_cast<int>(qq - b * quads_per_image);
    const float* in = x + (b * C + group) * P + p0;
    float acc[MT][4] = {};
#pragma unroll 4
    for (int c = group; c < C; c += kSplit, in += kSplit * P) {
      float v[4];
      if constexpr (kVec) {
        const float4 t = __ldg(reinterpret_cast<const float4*>(in));
        v[0] = t.x, v[1] = t.y, v[2] = t.z, v[3] = t.w;
      } else {
#pragma unroll
        for (int j = 0; j < 4; ++j) v[j] = p0 + j < P ? __ldg(in + j) : 0.0f;
      }
      const float4* w4 = reinterpret_cast<const float4*>(filters + c * MT);
#pragma unroll
      for (int m4 = 0; m4 < MT / 4; ++m4) {
        const float4 w = w4[m4];
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          acc[4 * m4][j] = fmaf(w.x, v[j], acc[4 * m4][j]);
          acc[4 * m4 + 1][j] = fmaf(w.y, v[j], acc[4 * m4 + 1][j]);
          acc[4 * m4 + 2][j] = fmaf(w.z, v[j], acc[4 * m4 + 2][j]);
          acc[4 * m4 + 3][j] = fmaf(w.w, v[j], acc[4 * m4 + 3][j]);
        }
      }
    }
#pragma unroll
    for (int offset = 16; offset >= kLanes; offset /= 2) {
#pragma unroll
      for (int m = 0; m < MT; ++m) {
#pragma unroll
        for (int j = 0; j < 4; ++j) acc[m][j] += __shfl_xor_sync(0xffffffffu, acc[m][j], offset);
      }
    }
    if (!valid || group != 0) continue;
    float* out = y + b * M * P + p0;
#pragma unroll
    for (int m = 0; m < MT; ++m, out += P) {
      if (m >= M) break;
      if constexpr (kVec) {
        *reinterpret_cast<float4*>(out) = make_float4(acc[m][0], acc[m][1], acc[m][2], acc[m][3]);
      } else {
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          if (p0 + j < P) out[j] = acc[m][j];
        }
      }
    }
  }
}

// Whether run_pointwise takes `s`.
bool pointwise_takes(const ConvShape& s) {
  return s.K == 1 && s.C > 1 && s.M <= kPointwiseMaxMaps && s.C <= kPointwiseMaxC;
}

template <int MT, bool kVec>
void launch_pointwise(float* y, const float* x, const float* k, const ConvShape& s,
                      cudaStream_t stream) {
  const int P = s.H * s.W;
  const int quads_per_image = ceil_div(P, 4);
  const std::int64_t quads = std::int64_t{s.B} * quads_per_image;
  const auto smem = static_cast<std::size_t>(s.C) * MT * sizeof(float);
  const int sms = multiprocessor_count();
  // Enough blocks for every SM several times over, each loading the filters once.
  const std::int64_t most = std::int64_t{8} * sms;
  const auto launch = [&](auto* kernel, int quads_per_block) {
    kernel<<<grid_stride_blocks(quads, quads_per_block, most), kPointwiseThreads, smem, stream>>>(
        y, x, k, s.M, s.C, P, quads_per_image, quads);
  };
  if (s.C >= kPointwiseSplitMinC &&
      quads < std::int64_t{kPointwiseSplitBlocksPerSm} * sms * kPointwiseThreads) {
    launch(conv_best_pointwise_kernel<MT, kVec, kPointwiseSplit>,
           kPointwiseThreads / kPointwiseSplit);
  } else {
    launch(conv_best_pointwise_kernel<MT, kVec, 1>, kPointwiseThreads);
  }
  CUDA_CHECK_LAUNCH();
}

bool run_pointwise(float* y, const float* x, const float* k, const ConvShape& s,
                   cudaStream_t stream) {
  if (!pointwise_takes(s)) return false;
  // float4 loads and stores where every plane is whole float4s and both tensors start on 16 bytes.
  const bool vec = (s.H * s.W) % 4 == 0 && reinterpret_cast<std::uintptr_t>(x) % 16 == 0 &&
                   reinterpret_cast<std::uintptr_t>(y) % 16 == 0;
  const auto launch = [&](auto maps) {
    constexpr int MT = decltype(maps)::value;
    if (vec) {
      launch_pointwise<MT, true>(y, x, k, s, stream);
    } else {
      launch_pointwise<MT, false>(y, x, k, s, stream);
    }
  };
  if (s.M <= 4) {
    launch(std::integral_constant<int, 4>{});
  } else if (s.M <= 8) {
    launch(std::integral_constant<int, 8>{});
  } else {
    launch(std::integral_constant<int, 16>{});
  }
  return true;
}

// The plain launcher's routes, fastest first; false (nothing launched) where only the
// one-thread-per-output kernel is left.
bool run_plain(float* y, const float* x, const float* k, const ConvShape& s, cudaStream_t stream) {
  return run_pointwise(y, x, k, s, stream) || run_image<false>(y, x, k, s, stream) ||
         run_winograd(y, x, k, s, stream) || run_gemm_ws(y, x, k, s, stream) ||
         run_band(y, x, k, s, stream) || run_gemm(y, x, k, s, stream) ||
         run_c1_wgmma<false>(y, x, k, s, stream) || run_tiled<false>(y, x, k, s, stream);
}

// Whether the plain launcher runs `s` on the tiled FMA kernels (C = 1 up to kMaxK, or the
// channel-streaming kernel), whose fused versions pool in registers. Elsewhere its route is a
// product on the tensor cores, which has no pooling epilogue, or run_pointwise.
bool plain_runs_tiled(const ConvShape& s) {
  return !pointwise_takes(s) && s.K <= kMaxK &&
         (s.C == 1 ||
          (stream_beats_gemm(s, false) && image_geometry(s).group == 0 && !band_takes(s)));
}

// conv + tanh + max-pool as the plain route into a workspace from the stream-ordered pool,
// then tanh and max-pool over it: for shapes whose plain route is a product on the tensor
// cores, and pools other than 2x2 stride 2 (which the fused kernels do not have). False
// (nothing launched) where only the one-thread kernels are left (the fused one then computes
// each output once and writes no conv output) or the workspace cannot be had.
bool run_conv_then_pool(float* y, const float* x, const float* k, const ConvShape& s,
                        const PoolShape& pool, cudaStream_t stream) {
  auto* full = static_cast<float*>(
      pool_workspace(static_cast<std::size_t>(s.y_elements()) * sizeof(float), stream));
  if (full == nullptr) return false;
  const bool launched = run_plain(full, x, k, s, stream);
  if (launched) {
    const std::int64_t total = pool.pooled_elements(s);
    conv_best_tanh_maxpool_kernel<<<grid_stride_blocks(total, 256, kFallbackMaxBlocks), 256, 0,
                                    stream>>>(y, full, s.H_out(), s.W_out(), pool.size,
                                              pool.stride, pool.out(s.H_out()),
                                              pool.out(s.W_out()), total);
    CUDA_CHECK_LAUNCH();
  }
  CUDA_CHECK(cudaFreeAsync(full, stream));
  return launched;
}

}  // namespace

void conv_best(float* y, const float* x, const float* k, const ConvShape& shape,
               cudaStream_t stream) {
  shape.validate();
  if (run_plain(y, x, k, shape, stream)) return;
  const std::int64_t total = shape.y_elements();
  const unsigned blocks = grid_stride_blocks(total, 256, kFallbackMaxBlocks);
  const auto launch = [&](float* out, int parts, int c_part, std::int64_t stride) {
    conv_best_fallback_kernel<<<dim3(blocks, parts), 256, 0, stream>>>(
        out, x, k, shape.M, shape.C, shape.H, shape.W, shape.K, total, c_part, stride);
    CUDA_CHECK_LAUNCH();
  };
  // Few outputs with a long sum (K > 7, at most 4 maps): the channels in parts.
  const int parts = channel_parts(shape.C, shape.K, blocks, kFallbackBlocksPerSm);
  if (parts > 1 && run_channel_parts(y, total, shape.C, parts, stream, launch)) return;
  launch(y, 1, shape.C, 0);
}

void conv_tanh_maxpool_best(float* y, const float* x, const float* k, const ConvShape& shape,
                            const PoolShape& pool, cudaStream_t stream) {
  shape.validate();
  pool.validate(shape);
  // K = 1 layers that run_pointwise takes pool after it: it reads x once for all maps.
  if (pool == PoolShape{2, 2} && !pointwise_takes(shape) &&
      (run_c1_half(y, x, k, shape, stream) || run_c1_wgmma<true>(y, x, k, shape, stream) ||
       run_image<true>(y, x, k, shape, stream) ||
       (plain_runs_tiled(shape) && run_tiled<true>(y, x, k, shape, stream)))) {
    return;
  }
  if (run_conv_then_pool(y, x, k, shape, pool, stream)) return;
  const std::int64_t total = pool.pooled_elements(shape);
  conv_tanh_maxpool_best_fallback_kernel<<<grid_stride_blocks(total, 256, kFallbackMaxBlocks), 256,
                                           0, stream>>>(
      y, x, k, shape.M, shape.C, shape.H, shape.W, shape.K, pool.size, pool.stride,
      pool.out(shape.H_out()), pool.out(shape.W_out()), total);
  CUDA_CHECK_LAUNCH();
}

}  // namespace convlab::solution
