// The best kernel, route tiled: K up to 7 on the FMA units, plain or fused (conv + tanh + 2x2
// max-pool in registers): C = 1 always, C > 1 where the GEMM's tiles would be mostly padding.
//
// C = 1, the hold kernel: no input staging at all. A thread computes a tile of outputs (4x4)
// and loads the whole (4+K-1) x (4+K-1) input patch it needs into registers once, straight from
// global memory (float4 rows; neighbouring patches overlap and come from L1). It then loops
// over the block's output maps: per map, 16*K*K FMAs on registers and ceil(K*K/4) float4 loads
// of that map's filter, a broadcast from shared memory (every thread of the block is on the
// same map). The block copies its maps' filters to shared memory once; the patch loads are
// issued before that copy and its barrier, so their latencies overlap. K is a template
// parameter (step 3), so the patch and tile loops unroll into FMAs. A block covers 128
// consecutive tiles (images follow each other, so no thread idles at an image edge) for all
// maps, or for slices of 25 maps when fused: few, long blocks, since a block's start costs more
// than a short last wave. Where y's rows take float2 but not float4 stores, 8x2 tiles, so that
// each lane stores whole pairs next to its neighbours'; plain, K = 4 and 5, 1x4 tiles where
// row_tiles_faster says so (a warp then stores 512 consecutive bytes of a map).
//
// C > 1, the channel-streaming kernel: 4 maps at a time; for each channel, each input row of a
// 2x4 tile is loaded once and feeds every (output row, map) it contributes to. Filters come
// from constant memory (step 4), in chunks of maps that fit, one launch per chunk, or for K = 6
// and 7 from shared memory. Grids too small for the SMs with a long sum split the channels into
// parts on blocks of their own, added after in a fixed order (run_channel_parts).
//
// Stores are float4 (float2) where rows allow; a warp's stores cover whole lines of y. Fused,
// the thread's outputs are max-pooled 2x2, passed through tanh and stored: the conv output
// never goes to memory.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <climits>
#include <cstdint>

#include "fast_tanh.cuh"
#include "reference/conv/student_api.hpp"
#include "reference/core/cuda_check.hpp"
#include "reference/core/cuda_launch.cuh"
#include "routes.cuh"
#include "shared.cuh"

namespace convlab::solution::best {
namespace {

constexpr int kTileH = 2;  // stream kernel: conv rows per tile
// Stream kernel: conv columns per tile (8, which wastes fewer columns at a row's end, is
// slower).
constexpr int kStreamTileW = 4;
constexpr int kHoldMaxK = 7;         // C = 1: the whole patch stays in registers up to this K
constexpr int kMaxSliceMaps = 256;   // C = 1: maps per block at most (<= 28 KB of filters)
constexpr int kFusedSliceMaps = 25;  // C = 1, fused: maps per block at most
// C = 1 hold kernel launches (the fastest, see tiled_route): threads per block, and
// blocks per SM for plain 4x4 tiles with K <= 5 and 8x2 tiles (room for 168 registers), or for
// fused tiles, 1x4 tiles and plain 4x4 tiles with K >= 6 (128 registers).
constexpr int kHoldThreads = 128;
constexpr int kHoldBlocksPlain = 3;
constexpr int kHoldBlocksWide = 4;
constexpr int kStreamThreads = 256;    // stream kernel block size
constexpr int kStreamBlocksPerSm = 2;  // its __launch_bounds__
constexpr int kStreamMaps = 4;         // maps accumulated at once when channels stream
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
// Stream kernel: the blocks of a launch of `maps` maps over `tiles` tiles (0 for no maps).
constexpr std::int64_t stream_blocks(std::int64_t tiles, int maps) {
  if (maps == 0) return 0;
  return ceil_div<std::int64_t>(tiles, kStreamThreads) *
         ceil_div(maps, stream_maps_per_block(maps));
}

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

// Blocks of the channel-streaming kernel's first launch for a plain layer; 0 where one map's
// filter is too large for it (the GEMM then takes the layer).
std::int64_t stream_grid_blocks(const ConvShape& s) {
  const Geometry g = make_geometry(nullptr, nullptr, s, false, kTileH, kStreamTileW);
  return stream_blocks(g.tiles, stream_launch_maps(s.M, s.C, s.K));
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
  g.vector_loads =
      tw % 4 == 0 && g.W % 4 == 0 && reinterpret_cast<std::uintptr_t>(x) % sizeof(float4) == 0;
  g.c_part = s.C;
  return g;
}

// C = 1, plain, K = 4 or 5 on rows of float4s (g: the 4x4 tiles' geometry): whether 1x4 tiles
// (a warp stores 512 consecutive bytes of a map) run faster than 4x4 ones: K = 4 always, K = 5
// while the 4x4 grid is under five waves. Only K = 4 and 5 have the 1x4 kernel (kHasRowTiles):
// for K = 2, 3 and 7 it is no faster.
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
// maps (one slice for the project's layer: fewer, longer blocks are faster). Returns false
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
  // Two float4 loads bring a 7-long filter row that takes 7 constant loads; with K = 5 shared
  // memory is no faster than constant memory, with K = 3 slower.
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
      CUDA_CHECK(
          cudaMemcpyToSymbolAsync(c_best_weights, k + m0 * filter,
                                  static_cast<std::size_t>(g.m_count * filter) * sizeof(float), 0,
                                  cudaMemcpyDeviceToDevice, stream));
      conv_best_stream_kernel<K, TW, kFused, false>
          <<<dim3(static_cast<unsigned>(stream_blocks(g.tiles, g.m_count)), parts), kStreamThreads,
             0, stream>>>(out, x, k, g);
      CUDA_CHECK_LAUNCH();
    }
  };
  if constexpr (!kFused) {
    // A grid too small for the SMs with a long sum: its channels in parts (one launch only).
    const int parts = maps_per_launch == g.M
                          ? channel_parts(g.C, K, stream_blocks(g.tiles, g.M), kStreamBlocksPerSm)
                          : 1;
    const std::int64_t n = g.tiles / g.tiles_per_image * g.M * g.out_h * g.out_w;
    if (parts > 1 &&
        run_channel_parts(y, n, g.C, parts, stream,
                          [&](float* partial, int count, int c_part, std::int64_t stride) {
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
bool tiled_route(float* y, const float* x, const float* k, const ConvShape& s,
                 cudaStream_t stream) {
  if (s.K > kMaxK) return false;
  bool launched = false;
  dispatch_filter_size<kMaxK>(s.K, [&](auto filter_size) {
    constexpr int kK = decltype(filter_size)::value;
    if constexpr (kK > 0) {  // 1 <= K <= kMaxK here
      if constexpr (kK <= kHoldMaxK) {
        if (s.C == 1) {
          // 128 threads per block, the fastest launches: fused, 4x4 tiles (2x2 pooled values),
          // 4 blocks per SM (<= 128 registers) and slices of <= 25 maps. Plain, one slice and
          // 4x4 tiles, 3 blocks per SM (4 for K >= 6), except where y's rows take float2 but
          // not float4 stores: then 8x2 tiles, so a warp's stores are whole consecutive pairs
          // (4x4 tiles write every other pair per instruction), and 1x4 tiles where
          // row_tiles_faster says so.
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

}  // namespace

// Stream kernel: maps of its first launch (all of them where the filters fit in shared memory
// or constant memory, else as many as constant memory holds; 0 where one map's filter does not
// fit).
int stream_launch_maps(int M, int C, int K) {
  if (K >= kStreamSharedMinK && stream_shared_bytes(C, K) <= kStreamSharedMax) return M;
  return static_cast<int>(std::min<std::int64_t>(M, kConstFloats / (std::int64_t{C} * K * K)));
}

// Layers with C > 1 and K <= kMaxK: whether the channel-streaming kernel runs them faster than
// the GEMM, whose 16-row tiles are mostly padding with few maps:
//  - Short sums (under 32 terms), up to 8 maps, and 9 to 16 maps with sums under 256 terms:
//    the streaming kernel; from 256 terms on 9 to 16 maps run faster on the GEMM.
//  - Not where its grid would be under a quarter of the SMs: there the GEMM's many smaller
//    blocks wait less.
//  - Nor, with 4 maps or more, for sums of 256 terms or more on grids under half the SMs,
//    which leave SMs idle for longer (with 1 to 3 maps the streaming kernel stays faster).
//  - `split` (the plain launcher): with 1 to 3 maps, the grid counts the parts the streaming
//    kernel splits a long sum into (channel_parts), so small grids stay on it.
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

bool run_tiled(float* y, const float* x, const float* k, const ConvShape& s, cudaStream_t stream) {
  return tiled_route<false>(y, x, k, s, stream);
}

bool run_tiled_pooled(float* y, const float* x, const float* k, const ConvShape& s,
                      cudaStream_t stream) {
  return tiled_route<true>(y, x, k, s, stream);
}

}  // namespace convlab::solution::best
