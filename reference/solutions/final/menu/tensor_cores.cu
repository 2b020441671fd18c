// Staff solution, menu: the implicit product on tensor cores (WMMA, TF32 inputs).
//
// implicit_gemm's product with the inner loop replaced by warp-wide 16x16x8 matrix
// multiply-accumulates: W and X tiles are rounded to TF32 (__float_to_tf32, 10-bit mantissa)
// as they are staged in shared memory, and the tensor cores accumulate in float32.
// A block of eight warps computes a BM x 128 tile, BM the smallest of 16, 32 and 64 that holds
// the layer's maps (all 50 of the project's layer: X is staged once per column tile), stages
// 32 rows of the sum per barrier pair (each row's offset in x decoded once per slice, not per
// value), and writes y through shared memory so that a warp stores 128 consecutive values of
// one map; it is sized for 3 blocks per SM (128 registers). The README's first step (four
// warps, 32x64, one 8-row step per barrier pair, fragments stored straight to y) is the simpler
// kernel this one improves on.
// Why: Hopper's TF32 tensor cores are rated about 8x its float32 FMA pipes; the lesson is
// how a product is cut into fragments, and what rounding the inputs costs (the tf32 class's
// rule, docs/grader.md).
// Expected effect: ncu's tensor pipe utilisation (sm__pipe_tensor_op_hmma_cycles_active) goes
// from 0 to a visible share; on the project's layer (25-long sums) the loads, not the tensor
// cores, stay the limit.
//
// Small layers (one image's input in 48 KB, at most 56 maps, and a sum short enough for every
// filter to stay in registers: 32 terms with 49 to 56 maps, 64 with up to 24: the project's
// layer, LeNet's first) go further: a block stages whole images in shared memory, each warp
// holds every filter as mma.sync fragments in its registers and builds the input fragments
// straight from the staged image (no unrolled tile), 16 outputs in row-major order at a time.
// The fused launcher (conv + tanh + 2x2 max-pool) computes 8 windows' left and right outputs as
// the fragment's two row halves, top row then bottom row, so each lane holds whole windows and
// writes only the pooled quarter. Other pools, and larger layers, take the WMMA kernel with its
// columns ordered window by window, so that each window's values are consecutive in the tile
// it writes through shared memory. In the image kernel, a sum whose last step has at most 4
// terms ends with an m16n8k4 product (the project's 25: three steps of 8, one of 4); on the
// project's layer this kernel comes close to the floor of writing y. Longer sums with at most
// 32 maps (LeNet's and odd-shapes' conv2) take the staged kernel: the same fragments, with the
// filters staged in shared memory and several small images per block.
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>
#include <mma.h>

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <string>
#include <vector>

#include "best/fast_tanh.cuh"
#include "best/tensor_core_math.cuh"
#include "reference/conv/student_api.hpp"
#include "reference/core/ceil_div.hpp"
#include "reference/core/cuda_check.hpp"
#include "reference/core/cuda_launch.cuh"
#include "reference/core/error.hpp"

namespace convlab::solution {
namespace {

/// The product's sizes for one layer.
struct GemmSize {
  int M = 0;              ///< rows of Y: output maps
  int Kd = 0;             ///< the sum's length: C*K*K
  int P = 0;              ///< output pixels per image and map
  std::int64_t cols = 0;  ///< columns of Y: images * P

  static GemmSize of(const ConvShape& s, int images) {
    GemmSize g;
    g.M = s.M;
    g.Kd = s.C * s.K * s.K;
    g.P = s.H_out() * s.W_out();
    g.cols = std::int64_t{images} * g.P;
    return g;
  }
};

/// Offset in x[b] of term r of the sum (channel c, filter row p, column q) from its output's
/// first pixel: the image kernel and the WMMA kernel decode the sum's terms alike.
__host__ __device__ inline int sum_term_offset(int r, int K, int H, int W) {
  const int kk = K * K;
  const int c = r / kk, pq = r - c * kk;
  const int p = pq / K, q = pq - p * K;
  return (c * H + p) * W + q;
}

/// X read straight from x[B][C][H][W].
struct ImplicitX {
  const float* x;
  int C, H, W, K, W_out, P;

  static ImplicitX of(const float* x, const ConvShape& s) {
    return {x, s.C, s.H, s.W, s.K, s.W_out(), s.H_out() * s.W_out()};
  }
  /// Offset of x[b][0][h][w].
  __device__ std::int64_t pixel(std::int64_t b, int h, int w) const {
    return (b * C * H + h) * W + w;
  }
  /// Offset of x[b][0][h][w] for column j.
  __device__ std::int64_t column(std::int64_t j) const {
    const std::int64_t b = j / P;
    const int p = static_cast<int>(j - b * P);
    const int h = p / W_out;
    return pixel(b, h, p - h * W_out);
  }
  /// Offset of X's row r from a column's offset (0 past the sum: finite, and multiplied by
  /// zero). One division per row of a slice, not per element.
  __device__ int row(int r, int Kd) const { return r < Kd ? sum_term_offset(r, K, H, W) : 0; }
};

namespace wmma = nvcuda::wmma;

/// TF32 inputs (10-bit mantissa, float32 range): fragments of m16n16k8, stored as float.
struct Tf32Inputs {
  using Fragment = wmma::precision::tf32;
  using Stored = float;
  static constexpr int kK = 8;
  __device__ static Stored round(float v) { return wmma::__float_to_tf32(v); }
};

// A block of 8 warps computes a BM x 128 tile of Y and stages kBK rows of the sum per barrier
// pair. BM is the smallest of 16, 32 and 64 that holds the layer's maps (more maps: several
// rows of blocks), so that few-map layers do not multiply zeros.
constexpr int kWmmaBN = 128, kWmmaBK = 32, kWmmaThreads = 256;

/// How the 8 warps share a BM x kWmmaBN tile: kWM x kWN warps, each kFragM x kFragN fragments
/// of 16 x 16 (BM 64: 2 x 4 warps of 32 x 32; 32: 2 x 4 of 16 x 32; 16: 1 x 8 of 16 x 16).
template <int BM>
struct WarpGrid {
  static constexpr int kWM = BM >= 32 ? 2 : 1, kWN = 8 / kWM;
  static constexpr int kRows = BM / kWM, kCols = kWmmaBN / kWN;
  static constexpr int kFragM = kRows / 16, kFragN = kCols / 16;
};

/// Shared memory of one block: the staged tiles, then (reusing the same bytes) Y's tile on its
/// way out. Rows are padded by 16 bytes: WMMA wants leading dimensions in multiples of 16
/// bytes and fragments 32-byte aligned, and the padding spreads rows over the banks.
template <typename In, int BM>
struct WmmaTiles {
  static constexpr int kPad = 16 / static_cast<int>(sizeof(typename In::Stored));
  static constexpr int kAPitch = kWmmaBK + kPad, kXPitch = kWmmaBN + kPad, kYPitch = kWmmaBN + 4;
  struct Staged {
    typename In::Stored a[BM][kAPitch];       // W: maps x a slice of the sum
    typename In::Stored x[kWmmaBK][kXPitch];  // X: the slice x the tile's columns
  };
  union {
    Staged staged;
    float y[BM][kYPitch];
  };
};

/// Y's columns in image order: column j is output pixel j of the flattened batch.
struct ConvColumns {
  std::int64_t cols;
  int M, P;

  std::int64_t tiles() const { return ceil_div<std::int64_t>(cols, kWmmaBN); }
  /// Whether column `col` of tile `tile` exists, and its offset in x.
  __device__ bool column(std::int64_t tile, int col, const ImplicitX& x,
                         std::int64_t& offset) const {
    const std::int64_t j = tile * kWmmaBN + col;
    if (j >= cols) return false;
    offset = x.column(j);
    return true;
  }
  /// Writes the tile (rows m0.., staged in `t`): each thread one column, map after map.
  template <int BM, int kPitch>
  __device__ void write(float* y, const float (&t)[BM][kPitch], std::int64_t tile, int m0,
                        int tid) const {
    const int col = tid % kWmmaBN;
    const std::int64_t j = tile * kWmmaBN + col;
    if (j >= cols) return;
    const std::int64_t b = j / P;
    float* out = y + b * M * P + (j - b * P);  // y[b][0][h][w] of this column
    for (int mm = tid / kWmmaBN; mm < BM && m0 + mm < M; mm += kWmmaThreads / kWmmaBN) {
      out[static_cast<std::int64_t>(m0 + mm) * P] = t[mm][col];
    }
  }
};

/// Y's columns window by window of a max-pool: a tile holds `per_tile` whole windows, the
/// size*size values of each consecutive, and writes tanh of each window's maximum.
struct PooledColumns {
  std::int64_t windows;  ///< B * PH * PW
  int M, PH, PW, size, stride, per_tile;

  std::int64_t tiles() const { return ceil_div<std::int64_t>(windows, per_tile); }
  __device__ bool column(std::int64_t tile, int col, const ImplicitX& x,
                         std::int64_t& offset) const {
    const int n = size * size, wi = col / n, e = col - wi * n;
    const std::int64_t w = tile * per_tile + wi;
    if (wi >= per_tile || w >= windows) return false;
    const std::int64_t b = w / (PH * PW);
    const int p = static_cast<int>(w - b * PH * PW), ph = p / PW, pw = p - ph * PW;
    offset = x.pixel(b, ph * stride + e / size, pw * stride + e % size);
    return true;
  }
  template <int BM, int kPitch>
  __device__ void write(float* y, const float (&t)[BM][kPitch], std::int64_t tile, int m0,
                        int tid) const {
    const int n = size * size;
    for (int i = tid; i < BM * per_tile; i += kWmmaThreads) {
      const int mm = i / per_tile, wi = i - mm * per_tile;
      const std::int64_t w = tile * per_tile + wi;
      if (m0 + mm >= M || w >= windows) continue;
      float v = t[mm][wi * n];
      for (int e = 1; e < n; ++e) v = fmaxf(v, t[mm][wi * n + e]);
      const std::int64_t b = w / (PH * PW);
      y[(b * M + m0 + mm) * PH * PW + (w - b * PH * PW)] = tanh_fast(v);
    }
  }
};

template <typename In, int BM, typename Columns>
__global__ void __launch_bounds__(kWmmaThreads, 3)
    wmma_conv_kernel(float* __restrict__ y, const float* __restrict__ k, ImplicitX x, GemmSize g,
                     Columns columns) {
  constexpr int kK = In::kK;
  using Warps = WarpGrid<BM>;
  using Tiles = WmmaTiles<In, BM>;
  __shared__ __align__(32) Tiles tiles;
  auto& a_tile = tiles.staged.a;
  auto& x_tile = tiles.staged.x;

  const int tid = static_cast<int>(threadIdx.x);
  const int warp = tid / 32;
  const int wm = warp / Warps::kWN * Warps::kRows;  // the warp's first row and column
  const int wn = warp % Warps::kWN * Warps::kCols;
  const int m0 = static_cast<int>(blockIdx.y) * BM;
  const std::int64_t tile = blockIdx.x;

  // Each thread loads one column of the tile: decoded once.
  const int col = tid % kWmmaBN, row_step = kWmmaThreads / kWmmaBN;
  std::int64_t col_offset = 0;
  const bool col_ok = columns.column(tile, col, x, col_offset);

  wmma::fragment<wmma::accumulator, 16, 16, kK, float> acc[Warps::kFragM][Warps::kFragN];
#pragma unroll
  for (int i = 0; i < Warps::kFragM; ++i) {
#pragma unroll
    for (int j = 0; j < Warps::kFragN; ++j) wmma::fill_fragment(acc[i][j], 0.0f);
  }
  // X's row offsets, slice by slice: a slice's are written during the slice before and
  // published by the barrier that starts it.
  __shared__ int rows[2][kWmmaBK];
  if (tid < kWmmaBK) rows[0][tid] = x.row(tid, g.Kd);
  for (int r0 = 0, slice = 0; r0 < g.Kd; r0 += kWmmaBK, slice ^= 1) {
    __syncthreads();  // the previous slice is no longer read; this one's row offsets are in
    for (int i = tid; i < BM * kWmmaBK; i += kWmmaThreads) {
      const int mm = i / kWmmaBK, rr = i % kWmmaBK;
      const int m = m0 + mm, r = r0 + rr;
      a_tile[mm][rr] =
          In::round(m < g.M && r < g.Kd ? k[static_cast<std::int64_t>(m) * g.Kd + r] : 0.0f);
    }
    for (int rr = tid / kWmmaBN; rr < kWmmaBK; rr += row_step) {
      const int r = r0 + rr;
      x_tile[rr][col] =
          In::round(col_ok && r < g.Kd ? __ldg(x.x + col_offset + rows[slice][rr]) : 0.0f);
    }
    if (tid < kWmmaBK) rows[slice ^ 1][tid] = x.row(r0 + kWmmaBK + tid, g.Kd);
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < kWmmaBK; kk += kK) {
      wmma::fragment<wmma::matrix_a, 16, 16, kK, typename In::Fragment, wmma::row_major>
          a[Warps::kFragM];
      wmma::fragment<wmma::matrix_b, 16, 16, kK, typename In::Fragment, wmma::row_major>
          b[Warps::kFragN];
#pragma unroll
      for (int i = 0; i < Warps::kFragM; ++i) {
        wmma::load_matrix_sync(a[i], &a_tile[wm + i * 16][kk], Tiles::kAPitch);
      }
#pragma unroll
      for (int j = 0; j < Warps::kFragN; ++j) {
        wmma::load_matrix_sync(b[j], &x_tile[kk][wn + j * 16], Tiles::kXPitch);
      }
#pragma unroll
      for (int i = 0; i < Warps::kFragM; ++i) {
#pragma unroll
        for (int j = 0; j < Warps::kFragN; ++j) wmma::mma_sync(acc[i][j], a[i], b[j], acc[i][j]);
      }
    }
  }
  // Y's tile goes out through shared memory: then each map's 128 columns are consecutive in y
  // (within an image), and a warp's stores are whole lines; a window's values are together.
  __syncthreads();
#pragma unroll
  for (int i = 0; i < Warps::kFragM; ++i) {
#pragma unroll
    for (int j = 0; j < Warps::kFragN; ++j) {
      wmma::store_matrix_sync(&tiles.y[wm + i * 16][wn + j * 16], acc[i][j], Tiles::kYPitch,
                              wmma::mem_row_major);
    }
  }
  __syncthreads();
  columns.write(y, tiles.y, tile, m0, tid);
}

/// The WMMA kernel with BM x kWmmaBN tiles on `stream`.
template <typename In, int BM, typename Columns>
void launch_wmma_tiles(float* y, const float* x, const float* k, const ConvShape& s,
                       const GemmSize& g, const Columns& columns, cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>(columns.tiles()), static_cast<unsigned>(ceil_div(g.M, BM)));
  wmma_conv_kernel<In, BM, Columns>
      <<<grid, kWmmaThreads, 0, stream>>>(y, k, ImplicitX::of(x, s), g, columns);
  CUDA_CHECK_LAUNCH();
}

/// The layer on the WMMA kernel with inputs of format `In`, enqueued on `stream`.
template <typename In, typename Columns>
void launch_wmma_conv(float* y, const float* x, const float* k, const ConvShape& s,
                      const Columns& columns, cudaStream_t stream) {
  const GemmSize g = GemmSize::of(s, s.B);
  if (columns.tiles() == 0 || g.M == 0) return;
  if (g.M <= 16) {
    launch_wmma_tiles<In, 16>(y, x, k, s, g, columns, stream);
  } else if (g.M <= 32) {
    launch_wmma_tiles<In, 32>(y, x, k, s, g, columns, stream);
  } else {
    launch_wmma_tiles<In, 64>(y, x, k, s, g, columns, stream);
  }
}

// ---- Small layers: whole images in shared memory, filters in registers, mma.sync ----------

__device__ __forceinline__ std::uint32_t to_tf32(float v) {
  std::uint32_t r;
  asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(v));
  return r;
}

constexpr int kImageWarps = 4, kImageThreads = 32 * kImageWarps, kImageBlocksPerSm = 4;
/// p, hidden from the compiler's address arithmetic: offsets from it become one multiply-add.
__device__ __forceinline__ float* opaque(float* p) {
  asm("mov.b64 %0, %0;" : "+l"(p));
  return p;
}

/// Shared floats of one staged image.
constexpr int kImageFloatsMax = 48 * 1024 / 4;

/// Whether an image of n floats at src is copied 16 bytes at a time (else 4): copy_image and
/// round_image must split it among the threads the same way.
__device__ __forceinline__ bool copies_by_four(const float* src, int n) {
  return n % 4 == 0 && reinterpret_cast<std::uintptr_t>(src) % 16 == 0;
}

/// Starts copying n floats of an image from global to shared memory (one cp.async group);
/// cp.async.wait_group waits for it.
__device__ __forceinline__ void copy_image(float* dst, const float* src, int n) {
  const int tid = static_cast<int>(threadIdx.x);
  if (copies_by_four(src, n)) {
    for (int i = 4 * tid; i < n; i += 4 * kImageThreads) {
      asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(
                       static_cast<unsigned>(__cvta_generic_to_shared(dst + i))),
                   "l"(src + i)
                   : "memory");
    }
  } else {
    for (int i = tid; i < n; i += kImageThreads) {
      asm volatile("cp.async.ca.shared.global [%0], [%1], 4;" ::"r"(
                       static_cast<unsigned>(__cvta_generic_to_shared(dst + i))),
                   "l"(src + i)
                   : "memory");
    }
  }
  asm volatile("cp.async.commit_group;" ::: "memory");
}

/// Rounds to TF32, in place, the values copy_image(img, src, n) had this thread copy.
__device__ __forceinline__ void round_image(float* img, const float* src, int n) {
  const int tid = static_cast<int>(threadIdx.x);
  if (copies_by_four(src, n)) {
    for (int i = 4 * tid; i < n; i += 4 * kImageThreads) {
      float4 v = *reinterpret_cast<float4*>(img + i);
      v = {__uint_as_float(to_tf32(v.x)), __uint_as_float(to_tf32(v.y)),
           __uint_as_float(to_tf32(v.z)), __uint_as_float(to_tf32(v.w))};
      *reinterpret_cast<float4*>(img + i) = v;
    }
  } else {
    for (int i = tid; i < n; i += kImageThreads) img[i] = __uint_as_float(to_tf32(img[i]));
  }
}

/// One layer's sizes for the image kernel. A warp's tile is 8 items of the image's output in
/// row-major order: plain, 16 outputs (rows g and g + 8 of the fragments are outputs p0 + g and
/// p0 + 8 + g); pooled (2x2 stride-2 windows, written as tanh of their maximum), 8 windows
/// (rows g and g + 8 are the left and right outputs of window j0 + g, once for the window's top
/// row and once for its bottom row). Tiles so follow the output with no columns wasted.
struct ImageLayer {
  int B, M, C, H, W, K;
  int items;      ///< per image: outputs H_out * W_out (plain) or windows PH * PW (pooled)
  int cols;       ///< items per row: W_out or PW
  float inv;      ///< 1 / cols, for the division of an item into row and column
  int tiles;      ///< per image
  int image;      ///< C * H * W: one image's floats in x
  int walk_rows;  ///< a warp's step from one of its tiles to the next (kImageWarps tiles), in
  int walk_cols;  ///< whole rows and the columns left over
  int last;       ///< the image offset of the last item (tiles past the output read it)
  int group;      ///< images staged together, whose tiles the warps share in one round-robin

  static ImageLayer of(const ConvShape& s, bool pooled) {
    ImageLayer l{};
    l.B = s.B, l.M = s.M, l.C = s.C, l.H = s.H, l.W = s.W, l.K = s.K;
    l.cols = pooled ? s.W_out() / 2 : s.W_out();
    l.items = pooled ? s.H_out() / 2 * l.cols : s.H_out() * l.cols;
    l.inv = 1.0f / static_cast<float>(std::max(l.cols, 1));
    const int per_tile = pooled ? 8 : 16;
    l.tiles = ceil_div(l.items, per_tile);
    l.image = s.C * s.H * s.W;
    l.walk_rows = kImageWarps * per_tile / std::max(l.cols, 1);
    l.walk_cols = kImageWarps * per_tile - l.walk_rows * l.cols;
    const int r = (l.items - 1) / std::max(l.cols, 1), c = l.items - 1 - r * l.cols;
    l.last = l.offset(r, c, pooled);
    // Images with fewer than 8 tiles a warp: enough per group that its tiles divide evenly
    // among the warps, where they fit (the project's layer pooled: 18 tiles an image, 5, 5, 4
    // and 4 a warp; 9 each for a pair). With more tiles the warps are nearly even already, and
    // groups were slower (odd-shapes' conv1: 43 tiles).
    const bool uneven = l.tiles < 8 * kImageWarps;
    l.group = uneven ? kImageWarps / std::gcd(std::max(l.tiles, 1), kImageWarps) : 1;
    if (l.staged() > kImageFloatsMax) l.group = 1;
    return l;
  }
  /// The image offset of the first output (the top-left one, pooled) of the item in row r and
  /// column c.
  __host__ __device__ int offset(int r, int c, bool pooled) const {
    return pooled ? 2 * (r * W + c) : r * W + c;
  }
  /// One group of images in shared memory, in whole 16-byte units (so that the second buffer is
  /// aligned for 16-byte copies). Tiles past the output read their last item: nothing past the
  /// group.
  __host__ __device__ int staged() const { return (group * image + 3) / 4 * 4; }
  /// The floats of group i in x (the last group may hold fewer images).
  __host__ __device__ int group_floats(std::int64_t i) const {
    return static_cast<int>(std::min<std::int64_t>(group, B - i * group)) * image;
  }
};

/// The row and column of one lane's item as its warp walks an image's output, kImageWarps
/// tiles at a time: divided out once per image, then advanced.
struct ItemCursor {
  int r, c;

  __device__ ItemCursor(const ImageLayer& l, int i) {
    // Float division is exact here (items < 2^22), up to one step corrected below.
    r = __float2int_rz((static_cast<float>(i) + 0.5f) * l.inv);
    c = i - r * l.cols;
    if (c < 0) c += l.cols, --r;
    if (c >= l.cols) c -= l.cols, ++r;
  }
  __device__ void advance(const ImageLayer& l) {
    r += l.walk_rows;
    c += l.walk_cols;
    if (c >= l.cols) c -= l.cols, ++r;
  }
  /// The image offset of item i's first output (its top-left one, pooled), i the cursor's item;
  /// past the output, the last item's.
  __device__ int pixel(const ImageLayer& l, int i, bool pooled) const {
    return i < l.items ? l.offset(r, c, pooled) : l.last;
  }
};

/// Stores v at p, in global memory.
__device__ __forceinline__ void store_global(float* p, float v) {
  asm volatile("st.global.f32 [%0], %1;" ::"l"(p), "f"(v));
}

/// The image byte offset of term r of the sum from its output's first pixel. Terms past the sum
/// read that pixel: finite, and multiplied by zero.
__device__ __forceinline__ int term_offset(const ImageLayer& l, int r) {
  return r < l.C * l.K * l.K ? 4 * sum_term_offset(r, l.K, l.H, l.W) : 0;
}

/// One lane's term offsets, terms t and t + 4 of each of KS steps of 8: in registers, or, where
/// the filters leave too few (kShared), in shared memory at `shared` (4 KS of them), written by
/// the block's first threads and published by its first barrier.
template <int KS, bool kShared>
struct TermOffsets {
  int2 o[KS];
  __device__ TermOffsets(const ImageLayer& l, int2* /*shared*/, int t) {
#pragma unroll
    for (int s = 0; s < KS; ++s) o[s] = {term_offset(l, 8 * s + t), term_offset(l, 8 * s + t + 4)};
  }
  __device__ int2 operator[](int s) const {
    return o[s];
  }
};

template <int KS>
struct TermOffsets<KS, true> {
  const int2* o;
  __device__ TermOffsets(const ImageLayer& l, int2* shared, int t) : o(shared + t) {
    const int i = static_cast<int>(threadIdx.x), r = i / 4 * 8 + i % 4;
    if (i < 4 * KS) shared[i] = {term_offset(l, r), term_offset(l, r + 4)};
  }
  __device__ int2 operator[](int s) const { return o[4 * s]; }
};

/// The sum's last step, for the image kernel: kAnyLast, steps is tested at run time (up to KS);
/// else all KS steps run, the last one with 8 terms or 4 (m16n8k4: half the products).
constexpr int kAnyLast = 0;

/// acc = the tile's products: A's row g reads the image at ra, row g + 8 at rb, each plus this
/// lane's term offsets. The first step always runs (every sum has a term), so acc needs no
/// zeroing.
template <int NT, int KS, int kLast, typename Offsets>
__device__ __forceinline__ void image_products(float (&acc)[NT][4], const char* ra, const char* rb,
                                               const Offsets& off,
                                               const std::uint32_t (&bf)[NT][KS][2], int steps) {
  const auto at = [](const char* row, int o) {
    return *reinterpret_cast<const std::uint32_t*>(row + o);
  };
#pragma unroll
  for (int n = 0; n < NT; ++n) acc[n][0] = acc[n][1] = acc[n][2] = acc[n][3] = 0.0f;
#pragma unroll
  for (int s = 0; s < KS; ++s) {
    if (kLast == kAnyLast && s > 0 && s >= steps) break;
    const int2 o = off[s];
    if (kLast == 4 && s == KS - 1) {
      const std::uint32_t a[2] = {at(ra, o.x), at(rb, o.x)};
#pragma unroll
      for (int n = 0; n < NT; ++n) mma_tf32_k4(acc[n], a, bf[n][s][0]);
    } else {
      const std::uint32_t a[4] = {at(ra, o.x), at(rb, o.x), at(ra, o.y), at(rb, o.y)};
#pragma unroll
      for (int n = 0; n < NT; ++n) mma_tf32(acc[n], a, bf[n][s]);
    }
  }
}

template <int NT, int KS, int kLast, bool kPooled>
__global__ void __launch_bounds__(kImageThreads, kImageBlocksPerSm)
    image_conv_kernel(float* __restrict__ y, const float* __restrict__ x,
                      const float* __restrict__ k, ImageLayer l) {
  extern __shared__ float staged[];  // two images, then the terms' offsets
  const int lane = static_cast<int>(threadIdx.x % 32), warp = static_cast<int>(threadIdx.x / 32);
  const int g = lane / 4, t = lane % 4;
  const int Kd = l.C * l.K * l.K, steps = ceil_div(Kd, 8);
  // Pooled, the filters are scaled by tanh_fast's 2 log2(e) before they are rounded to TF32
  // (the same relative rounding, and the maximum of the scaled sums is the scaled maximum), so
  // tanh takes the pooled value as it is.
  constexpr float kScale = kPooled ? kTanhExp2Scale : 1.0f;

  // The image offsets of this lane's A columns; in shared memory where more than 32 registers
  // go to the filters (in registers they make the project's layer spill).
  const TermOffsets<KS, (2 * NT * KS > 32)> off(l, reinterpret_cast<int2*>(staged + 2 * l.staged()),
                                                t);

  // Every filter, as this lane's B fragments (zero past the layer's maps and terms).
  std::uint32_t bf[NT][KS][2];
#pragma unroll
  for (int s = 0; s < KS; ++s) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int r = s * 8 + t + 4 * h;
#pragma unroll
      for (int n = 0; n < NT; ++n) {
        const int m = n * 8 + g;
        bf[n][s][h] = to_tf32(m < l.M && r < Kd ? kScale * __ldg(k + m * Kd + r) : 0.0f);
      }
    }
  }
  // This lane's maps 2t and 2t + 1 of fragment n exist for every n but the last.
  const bool last0 = (NT - 1) * 8 + 2 * t < l.M, last1 = (NT - 1) * 8 + 2 * t + 1 < l.M;
  const int map_stride = 8 * l.items;  // from fragment n's maps to fragment n + 1's

  // The next group of images is copied in (cp.async, no registers) while this one is
  // multiplied.
  const std::int64_t groups = ceil_div<std::int64_t>(l.B, l.group);
  const auto group_x = [&](std::int64_t i) { return x + i * l.group * l.image; };
  std::int64_t gi = blockIdx.x;
  if (gi < groups) copy_image(staged, group_x(gi), l.group_floats(gi));
  for (int buffer = 0; gi < groups; gi += gridDim.x, buffer ^= 1) {
    const std::int64_t next = gi + gridDim.x;
    if (next < groups) {
      copy_image(staged + (buffer ^ 1) * l.staged(), group_x(next), l.group_floats(next));
      asm volatile("cp.async.wait_group 1;" ::: "memory");
    } else {
      asm volatile("cp.async.wait_group 0;" ::: "memory");
    }
    float* img = staged + buffer * l.staged();
    round_image(img, group_x(gi), l.group_floats(gi));  // this thread's own copies, arrived
    __syncthreads();                                    // this group is in
    const int images = l.group_floats(gi) / l.image;
    for (int sub = 0; sub < images; ++sub) {
      const char* bytes = reinterpret_cast<const char*>(img + sub * l.image);
      float* const yb = opaque(y + (gi * l.group + sub) * l.M * l.items);  // this image's output

      // The group's tiles in one round-robin: tile t of image `sub` is warp (sub * tiles + t)'s.
      const int first = ((warp - sub * l.tiles) % kImageWarps + kImageWarps) % kImageWarps;
      // This lane's items: one window (pooled), or outputs p and p + 8 (plain).
      ItemCursor item(l, first * (kPooled ? 8 : 16) + g), item8(l, first * 16 + g + 8);
      for (int tile = first; tile < l.tiles; tile += kImageWarps) {
        float acc[NT][4];
        if constexpr (kPooled) {
          const int j = tile * 8 + g;  // this lane's window
          const char* pa = bytes + 4 * item.pixel(l, j, true);
          item.advance(l);
          // The windows' top row, then their bottom row.
          image_products<NT, KS, kLast>(acc, pa, pa + 4, off, bf, steps);
          float top[NT][2];
#pragma unroll
          for (int n = 0; n < NT; ++n) {
            top[n][0] = fmaxf(acc[n][0], acc[n][2]);
            top[n][1] = fmaxf(acc[n][1], acc[n][3]);
          }
          pa += 4 * l.W;
          image_products<NT, KS, kLast>(acc, pa, pa + 4, off, bf, steps);
          // Maps 2t and 2t + 1 of fragment n; a warp stores 8 consecutive windows of 8 maps.
          const auto store = [&](bool in) {
            float* out = yb + 2 * t * l.items + j;
#pragma unroll
            for (int n = 0; n < NT; ++n, out += map_stride) {
              const float v0 = tanh_exp2(fmaxf(top[n][0], fmaxf(acc[n][0], acc[n][2])));
              const float v1 = tanh_exp2(fmaxf(top[n][1], fmaxf(acc[n][1], acc[n][3])));
              if (in && (n + 1 < NT || last0)) store_global(out, v0);
              if (in && (n + 1 < NT || last1)) store_global(out + l.items, v1);
            }
          };
          // Whole tiles (all but an image's last, at most) store with no test of the item.
          if (tile * 8 + 8 <= l.items) {
            store(true);
          } else {
            store(j < l.items);
          }
        } else {
          const int p = tile * 16 + g;  // this lane's outputs: p and p + 8
          image_products<NT, KS, kLast>(acc, bytes + 4 * item.pixel(l, p, false),
                                        bytes + 4 * item8.pixel(l, p + 8, false), off, bf, steps);
          item.advance(l);
          item8.advance(l);
          const auto store = [&](bool in0, bool in1) {
            float* out = yb + 2 * t * l.items + p;
#pragma unroll
            for (int n = 0; n < NT; ++n, out += map_stride) {
              if (n + 1 < NT || last0) {
                if (in0) store_global(out, acc[n][0]);
                if (in1) store_global(out + 8, acc[n][2]);
              }
              if (n + 1 < NT || last1) {
                if (in0) store_global(out + l.items, acc[n][1]);
                if (in1) store_global(out + l.items + 8, acc[n][3]);
              }
            }
          };
          if (tile * 16 + 16 <= l.items) {
            store(true, true);
          } else {
            store(p < l.items, p + 8 < l.items);
          }
        }
      }
    }
    __syncthreads();  // this buffer is no longer read: the next copy may go into it
  }
}

/// Runs the image kernel for NT x 8 maps and KS x 8 terms on `stream`.
template <int NT, int KS, int kLast, bool kPooled>
void launch_image_tiles(float* y, const float* x, const float* k, const ImageLayer& l,
                        cudaStream_t stream) {
  const auto kernel = image_conv_kernel<NT, KS, kLast, kPooled>;
  const int bytes = static_cast<int>(2 * l.staged() * sizeof(float) + 4 * KS * sizeof(int2));
  allow_dynamic_shared_memory(kernel, bytes, "conv_tensor_cores");
  // Blocks loop over the images, so each loads the filters into its registers once.
  const auto blocks = static_cast<unsigned>(
      std::min<std::int64_t>(ceil_div<std::int64_t>(l.B, l.group),
                             resident_blocks(reinterpret_cast<const void*>(kernel), kImageThreads,
                                             bytes)));
  kernel<<<blocks, kImageThreads, static_cast<std::size_t>(bytes), stream>>>(y, x, k, l);
  CUDA_CHECK_LAUNCH();
}

/// The image kernel for exactly NT fragments of 8 maps, if the sum has at most KS steps of 8
/// terms (every filter is held in registers: NT * KS * 2 of them).
template <int NT, int KS, bool kPooled>
bool launch_image_maps(float* y, const float* x, const float* k, const ImageLayer& l,
                       cudaStream_t stream) {
  static_assert(NT * KS <= 32, "every filter of the layer is held in registers");
  const int Kd = l.C * l.K * l.K, steps = ceil_div(Kd, 8);
  if (steps > KS) return false;
  if (steps < KS) {
    launch_image_tiles<NT, KS, kAnyLast, kPooled>(y, x, k, l, stream);
  } else if (Kd - 8 * (KS - 1) <= 4) {
    launch_image_tiles<NT, KS, 4, kPooled>(y, x, k, l, stream);
  } else {
    launch_image_tiles<NT, KS, 8, kPooled>(y, x, k, l, stream);
  }
  return true;
}

/// Runs the image kernel if the layer fits it; false otherwise.
template <bool kPooled>
bool launch_image_conv(float* y, const float* x, const float* k, const ConvShape& s,
                       cudaStream_t stream) {
  const ImageLayer l = ImageLayer::of(s, kPooled);
  if (l.staged() > kImageFloatsMax) return false;
  if (l.B == 0 || l.M == 0 || l.items == 0) return true;  // nothing to write
  switch (ceil_div(l.M, 8)) {
    case 1:
      return launch_image_maps<1, 8, kPooled>(y, x, k, l, stream);
    case 2:
      return launch_image_maps<2, 8, kPooled>(y, x, k, l, stream);
    case 3:
      return launch_image_maps<3, 8, kPooled>(y, x, k, l, stream);
    case 4:
      return launch_image_maps<4, 7, kPooled>(y, x, k, l, stream);
    case 5:
      return launch_image_maps<5, 5, kPooled>(y, x, k, l, stream);
    case 6:
      return launch_image_maps<6, 4, kPooled>(y, x, k, l, stream);
    case 7:
      return launch_image_maps<7, 4, kPooled>(y, x, k, l, stream);
    default:
      return false;
  }
}

// ---- Longer sums with few maps: staged images, staged filters, mma.sync -------------------

// Layers whose filters do not fit in registers (LeNet's conv2: 196 terms; odd-shapes' conv2:
// 192) but whose maps fit in 4 fragments of 8: the image kernel's product with the filters in
// shared memory instead, rounded to TF32 once per block in fragment order (a lane's two values
// of a step and a map fragment are one 8-byte load). A block stages a chunk of consecutive
// images at a time, so that small images still give every warp whole tasks of 32 outputs; the
// outputs' offsets in the chunk and in y are a table built once per block. It is several times
// faster than the WMMA kernel on these layers.
constexpr int kStagedFrags = 2;                 // 16-output A fragments per warp task
constexpr int kStagedTask = 16 * kStagedFrags;  // outputs per warp task
constexpr int kStagedMaxMapFrags = 4;           // 32 maps
constexpr int kStagedChunkFloats = 12 * 1024;   // images per chunk: 48 KB at most
constexpr int kStagedFilterBytes = 32 * 1024;   // the rounded filters at most
// Shared memory per block: three blocks per SM where a chunk of one image fits, else two.
constexpr int kStagedShared[] = {74 * 1024, 112 * 1024};

struct StagedLayer {
  int M, Kd, steps;       // maps, the sum's length C*K*K, steps of 8 terms
  int steps8;             // steps of 8 terms; the last one has 4 or fewer when steps8 < steps
  int K, H, W, W_out, P;  // P: output pixels per image
  int image;              // C*H*W, one image of x
  int B, group, chunks;   // images, images per chunk, chunks
  int chunk_floats;       // group * image, rounded up to whole float4s
  int outputs;            // group * P: outputs of a full chunk

  // Shared memory: filters [steps][NT][32] (uint2), term offsets [steps][4] (int2), the
  // outputs' offsets in the chunk and in y, then two chunk buffers.
  __host__ __device__ int filter_bytes(int NT) const { return steps * NT * 32 * 8; }
  __host__ __device__ int table_bytes() const {
    return steps * 4 * 8 + (outputs * 2 * 4 + 15) / 16 * 16;
  }
  int bytes(int NT) const {
    return filter_bytes(NT) + table_bytes() + 2 * chunk_floats * static_cast<int>(sizeof(float));
  }
};

template <int NT>
__global__ void __launch_bounds__(kImageThreads)
    staged_conv_kernel(float* __restrict__ y, const float* __restrict__ x,
                       const float* __restrict__ k, const StagedLayer l) {
  extern __shared__ float4 smem4[];
  auto* filters = reinterpret_cast<uint2*>(smem4);
  auto* terms = reinterpret_cast<int2*>(filters + l.steps * NT * 32);
  int* in_chunk = reinterpret_cast<int*>(terms + l.steps * 4);  // bytes from the chunk's start
  int* in_y = in_chunk + l.outputs;                             // floats from the chunk's y
  float* buffers = reinterpret_cast<float*>(smem4) + (l.filter_bytes(NT) + l.table_bytes()) / 4;

  const int tid = static_cast<int>(threadIdx.x);
  const auto chunk_at = [&](int chunk) { return x + std::int64_t{chunk} * l.group * l.image; };
  const auto chunk_size = [&](int chunk) {
    return std::min(l.group, l.B - chunk * l.group) * l.image;
  };
  int chunk = static_cast<int>(blockIdx.x);
  if (chunk < l.chunks) copy_image(buffers, chunk_at(chunk), chunk_size(chunk));
  // While the first chunk is on its way: the filters, the terms and the outputs.
  for (int i = tid; i < l.steps * NT * 32; i += kImageThreads) {
    const int lane = i % 32, n = i / 32 % NT, s = i / (32 * NT);
    const int m = n * 8 + lane / 4, r = s * 8 + lane % 4;
    const float* row = k + std::int64_t{m} * l.Kd;
    filters[i] = {to_tf32(m < l.M && r < l.Kd ? __ldg(row + r) : 0.0f),
                  to_tf32(m < l.M && r + 4 < l.Kd ? __ldg(row + r + 4) : 0.0f)};
  }
  for (int i = tid; i < l.steps * 4; i += kImageThreads) {
    const int r = i / 4 * 8 + i % 4;  // past the sum: the output's own pixel, a zero filter
    terms[i] = {r < l.Kd ? 4 * sum_term_offset(r, l.K, l.H, l.W) : 0,
                r + 4 < l.Kd ? 4 * sum_term_offset(r + 4, l.K, l.H, l.W) : 0};
  }
  for (int q = tid; q < l.outputs; q += kImageThreads) {
    const int b = q / l.P, p = q - b * l.P, h = p / l.W_out;
    in_chunk[q] = 4 * (b * l.image + h * l.W + p - h * l.W_out);
    in_y[q] = b * l.M * l.P + p;
  }

  const int warp = tid / 32, lane = tid % 32, g = lane / 4, t = lane % 4;
  for (int buffer = 0; chunk < l.chunks; chunk += gridDim.x, buffer ^= 1) {
    const int next = chunk + static_cast<int>(gridDim.x);
    if (next < l.chunks) {
      copy_image(buffers + (buffer ^ 1) * l.chunk_floats, chunk_at(next), chunk_size(next));
      asm volatile("cp.async.wait_group 1;" ::: "memory");
    } else {
      asm volatile("cp.async.wait_group 0;" ::: "memory");
    }
    float* img = buffers + buffer * l.chunk_floats;
    round_image(img, chunk_at(chunk), chunk_size(chunk));  // this thread's own copies
    __syncthreads();  // this chunk (and, the first time, the tables) are in
    const char* bytes = reinterpret_cast<const char*>(img);
    const int outputs = chunk_size(chunk) / l.image * l.P;
    float* const y_chunk = y + std::int64_t{chunk} * l.group * l.M * l.P;

    for (int first = warp * kStagedTask; first < outputs; first += kImageWarps * kStagedTask) {
      // This lane's A rows: outputs q and q + 8 of each fragment (past the chunk: its last).
      const char* rows[kStagedFrags][2];
#pragma unroll
      for (int f = 0; f < kStagedFrags; ++f) {
        rows[f][0] = bytes + in_chunk[std::min(first + 16 * f + g, outputs - 1)];
        rows[f][1] = bytes + in_chunk[std::min(first + 16 * f + 8 + g, outputs - 1)];
      }
      const auto at = [](const char* row, int o) {
        return *reinterpret_cast<const std::uint32_t*>(row + o);
      };
      float acc[kStagedFrags][NT][4] = {};
      const uint2* f_step = filters + lane;
#pragma unroll 2
      for (int s = 0; s < l.steps8; ++s, f_step += NT * 32) {
        const int2 o = terms[4 * s + t];
        uint2 b[NT];
#pragma unroll
        for (int n = 0; n < NT; ++n) b[n] = f_step[n * 32];
#pragma unroll
        for (int f = 0; f < kStagedFrags; ++f) {
          const std::uint32_t a[4] = {at(rows[f][0], o.x), at(rows[f][1], o.x),
                                      at(rows[f][0], o.y), at(rows[f][1], o.y)};
#pragma unroll
          for (int n = 0; n < NT; ++n) mma_tf32(acc[f][n], a, {b[n].x, b[n].y});
        }
      }
      if (l.steps8 < l.steps) {  // a last step of 4 terms or fewer: half the products
        const int o = terms[4 * l.steps8 + t].x;
#pragma unroll
        for (int f = 0; f < kStagedFrags; ++f) {
          const std::uint32_t a[2] = {at(rows[f][0], o), at(rows[f][1], o)};
#pragma unroll
          for (int n = 0; n < NT; ++n) mma_tf32_k4(acc[f][n], a, f_step[n * 32].x);
        }
      }
      // acc[f][n]: outputs q (elements 0, 1) and q + 8 (2, 3) of maps 8n + 2t (+1).
#pragma unroll
      for (int f = 0; f < kStagedFrags; ++f) {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int q = first + 16 * f + 8 * h + g;
          if (q >= outputs) continue;
          float* out = y_chunk + in_y[q];
#pragma unroll
          for (int n = 0; n < NT; ++n) {
            const int m = 8 * n + 2 * t;
            if (m < l.M) out[std::int64_t{m} * l.P] = acc[f][n][2 * h];
            if (m + 1 < l.M) out[std::int64_t{m + 1} * l.P] = acc[f][n][2 * h + 1];
          }
        }
      }
    }
    __syncthreads();  // this buffer is no longer read: the copy after next may go into it
  }
}

/// Runs the staged kernel with NT fragments of 8 maps, as many blocks as the GPU holds at once.
template <int NT>
void launch_staged_maps(float* y, const float* x, const float* k, const StagedLayer& l,
                        cudaStream_t stream) {
  const auto kernel = staged_conv_kernel<NT>;
  const int bytes = l.bytes(NT);
  allow_dynamic_shared_memory(kernel, bytes, "conv_tensor_cores");
  const auto blocks = static_cast<unsigned>(std::min<std::int64_t>(
      l.chunks, resident_blocks(reinterpret_cast<const void*>(kernel), kImageThreads, bytes)));
  kernel<<<blocks, kImageThreads, static_cast<std::size_t>(bytes), stream>>>(y, x, k, l);
  CUDA_CHECK_LAUNCH();
}

/// Runs the staged kernel if the layer fits it (C > 1, up to 32 maps, an image of at most 48
/// KB and the rest within kStagedShared); false otherwise.
bool launch_staged_conv(float* y, const float* x, const float* k, const ConvShape& s,
                        cudaStream_t stream) {
  StagedLayer l{};
  l.M = s.M;
  l.Kd = s.C * s.K * s.K;
  l.steps = ceil_div(l.Kd, 8);
  l.steps8 = l.Kd % 8 != 0 && l.Kd % 8 <= 4 ? l.steps - 1 : l.steps;
  l.K = s.K, l.H = s.H, l.W = s.W, l.W_out = s.W_out();
  l.P = s.H_out() * s.W_out();
  l.image = s.C * s.H * s.W;
  l.B = s.B;
  const int NT = ceil_div(s.M, 8);
  if (s.C == 1 || NT > kStagedMaxMapFrags || l.image > kStagedChunkFloats ||
      l.filter_bytes(NT) > kStagedFilterBytes) {
    return false;
  }
  if (l.B == 0 || l.M == 0 || l.P == 0) return true;  // nothing to write
  // Images per chunk: of those that fit, the fewest that keep the warps' last round of tasks
  // the fullest.
  for (const int shared : kStagedShared) {
    double best_use = 0.0;
    for (int group = 1; group <= std::min(s.B, kStagedChunkFloats / l.image); ++group) {
      StagedLayer c = l;
      c.chunk_floats = ceil_div(group * l.image, 4) * 4;
      c.outputs = group * l.P;
      if (c.bytes(NT) > shared) break;
      const int tasks = ceil_div(c.outputs, kStagedTask);
      const double use = static_cast<double>(c.outputs) /
                         (ceil_div(tasks, kImageWarps) * kImageWarps * kStagedTask);
      if (use > best_use + 1e-3) best_use = use, l.group = group;
    }
    if (l.group > 0) break;
  }
  if (l.group == 0) return false;
  l.chunks = ceil_div(s.B, l.group);
  l.chunk_floats = ceil_div(l.group * l.image, 4) * 4;
  l.outputs = l.group * l.P;
  switch (NT) {
    case 1:
      launch_staged_maps<1>(y, x, k, l, stream);
      break;
    case 2:
      launch_staged_maps<2>(y, x, k, l, stream);
      break;
    case 3:
      launch_staged_maps<3>(y, x, k, l, stream);
      break;
    default:
      launch_staged_maps<4>(y, x, k, l, stream);
      break;
  }
  return true;
}

}  // namespace

void conv_tensor_cores(float* y, const float* x, const float* k, const ConvShape& shape,
                       cudaStream_t stream) {
  if (launch_image_conv<false>(y, x, k, shape, stream) ||
      launch_staged_conv(y, x, k, shape, stream)) {
    return;
  }
  const GemmSize g = GemmSize::of(shape, shape.B);
  launch_wmma_conv<Tf32Inputs>(y, x, k, shape, ConvColumns{g.cols, g.M, g.P}, stream);
}

void conv_tanh_maxpool_tensor_cores(float* y, const float* x, const float* k,
                                    const ConvShape& shape, const PoolShape& pool,
                                    cudaStream_t stream) {
  pool.validate(shape);
  if (pool == PoolShape{2, 2} && launch_image_conv<true>(y, x, k, shape, stream)) return;
  const int n = pool.size * pool.size;
  if (n > kWmmaBN) {
    throw Error("the tensor_cores fused launcher holds pool windows of at most " +
                std::to_string(kWmmaBN) + " values; this one has " + std::to_string(n));
  }
  const int PH = pool.out(shape.H_out()), PW = pool.out(shape.W_out());
  const PooledColumns columns{
      std::int64_t{shape.B} * PH * PW, shape.M, PH, PW, pool.size, pool.stride, kWmmaBN / n};
  launch_wmma_conv<Tf32Inputs>(y, x, k, shape, columns, stream);
}

}  // namespace convlab::solution
