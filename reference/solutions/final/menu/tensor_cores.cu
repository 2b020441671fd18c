// Staff solution, menu: the implicit product on tensor cores (WMMA, TF32 inputs).
//
// implicit_gemm's product with the inner loop replaced by warp-wide 16x16x8 matrix
// multiply-accumulates: W and X tiles are rounded to TF32 (__float_to_tf32, 10-bit mantissa)
// as they are staged in shared memory, and the tensor cores accumulate in float32.
// A block of eight warps computes a BM x 128 tile, BM the smallest of 16, 32 and 64 that holds
// the layer's maps (all 50 of the project's layer: X is staged once per column tile), stages
// 32 rows of the sum per barrier pair, and writes y through shared memory so that a warp
// stores 128 consecutive values of one map. Against the README's first step (four warps,
// 32x64, one 8-row step per barrier pair, fragments stored straight to y): 2.58 to 1.31 ms
// on the project's layer, 1.57 to 1.33 ms on two-conv and 44.5 to 25.5 ms on VGG-16 (H100,
// bench), with 3 blocks per SM (1.48 ms at 2 on the project's layer: 128 registers).
// Why: the H100's TF32 tensor cores are rated about 8x its float32 FMA pipes; the lesson is
// how a product is cut into fragments, and what rounding the inputs costs (the tf32 class's
// rule, docs/grader.md).
// Expected effect: ncu's tensor pipe utilisation (sm__pipe_tensor_op_hmma_cycles_active) goes
// from 0 to a visible share; on the project's layer (25-long sums) the loads, not the tensor
// cores, stay the limit.
//
// Small layers (a sum of at most 32 terms and 64 maps, or 64 and 32, and one image's input in
// 48 KB: the project's layer, LeNet's first) go further: a block stages whole images in shared
// memory, each warp holds every filter as mma.sync fragments in its registers and builds the
// input fragments straight from the staged image (no unrolled tile), 16 outputs (2 rows of 8)
// at a time. The fused launcher (conv + tanh + 2x2 max-pool) pools those 16 outputs with one
// shuffle and writes only the pooled quarter. Other pools, and larger layers, take the WMMA
// kernel with its columns ordered window by window, so that each window's values are
// consecutive in the tile it writes through shared memory. On the project's layer (H100,
// bench): 1.31 ms on the WMMA kernel, 0.46 ms so (store floor 0.37), 0.27 ms fused.
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>
#include <mma.h>

#include <algorithm>
#include <cstdint>
#include <string>

#include "reference/conv/student_api.hpp"
#include "reference/core/ceil_div.hpp"
#include "reference/core/cuda_check.hpp"
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
  /// X[r][j], for the column's offset.
  __device__ float at(std::int64_t column, int r) const {
    const int kk = K * K;
    const int c = r / kk, pq = r - c * kk;
    const int p = pq / K, q = pq - p * K;
    return __ldg(x + column + (static_cast<std::int64_t>(c) * H + p) * W + q);
  }
};

// tanh(v) = 1 - 2 / (2^(2v log2 e) + 1) with the hardware exp2 and reciprocal: five
// instructions, absolute error below 1e-6 (2^x overflowing to inf gives 1, 0 gives -1).
__device__ __forceinline__ float tanh_fast(float v) {
  float e, r;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(e) : "f"(v * 2.8853900817779268f));
  asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(e + 1.0f));
  return fmaf(-2.0f, r, 1.0f);
}

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
  for (int r0 = 0; r0 < g.Kd; r0 += kWmmaBK) {
    __syncthreads();  // the previous slice is no longer read
    for (int i = tid; i < BM * kWmmaBK; i += kWmmaThreads) {
      const int mm = i / kWmmaBK, rr = i % kWmmaBK;
      const int m = m0 + mm, r = r0 + rr;
      a_tile[mm][rr] =
          In::round(m < g.M && r < g.Kd ? k[static_cast<std::int64_t>(m) * g.Kd + r] : 0.0f);
    }
    for (int rr = tid / kWmmaBN; rr < kWmmaBK; rr += row_step) {
      const int r = r0 + rr;
      x_tile[rr][col] = In::round(col_ok && r < g.Kd ? x.at(col_offset, r) : 0.0f);
    }
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
  const dim3 grid(static_cast<unsigned>(columns.tiles()),
                  static_cast<unsigned>(ceil_div(g.M, BM)));
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

// mma.sync m16n8k8 with TF32 inputs: A is 16 outputs x 8 terms of the sum, B 8 terms x 8
// maps, C 16 outputs x 8 maps. Lane l holds, with g = l / 4 and t = l % 4: A's (g, t),
// (g + 8, t), (g, t + 4), (g + 8, t + 4); B's (t, g), (t + 4, g); C's (g, 2t), (g, 2t + 1),
// (g + 8, 2t), (g + 8, 2t + 1). A's rows g and g + 8 are outputs (h0, w0 + g) and
// (h0 + 1, w0 + g): a tile of 2 rows of 8, whose 2x2 windows are lanes g and g ^ 1.
__device__ __forceinline__ void mma_tf32(float (&c)[4], const std::uint32_t (&a)[4],
                                         std::uint32_t b0, std::uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
      "{%8, %9}, {%0, %1, %2, %3};"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

__device__ __forceinline__ std::uint32_t to_tf32(float v) {
  std::uint32_t r;
  asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(v));
  return r;
}

constexpr int kImageWarps = 4, kImageThreads = 32 * kImageWarps, kImageBlocksPerSm = 4;
/// Shared floats of one staged image (with the slack that tiles past its edge read).
constexpr int kImageFloatsMax = 48 * 1024 / 4;

/// Starts copying n floats of an image from global to shared memory (one cp.async group, 16
/// bytes a copy where the image allows it); cp.async.wait_group waits for it.
__device__ __forceinline__ void copy_image(float* dst, const float* src, int n) {
  const int tid = static_cast<int>(threadIdx.x);
  if (n % 4 == 0 && reinterpret_cast<std::uintptr_t>(src) % 16 == 0) {
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
  if (n % 4 == 0 && reinterpret_cast<std::uintptr_t>(src) % 16 == 0) {
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

/// The register budget of one warp: NT x 8 maps, KS x 8 terms of the sum.
template <int NT, int KS>
struct ImageTiles {
  static_assert(NT * KS <= 32, "every filter of the layer is held in registers");
  static bool fits(const ConvShape& s) {
    return s.M <= NT * 8 && s.C * s.K * s.K <= KS * 8;
  }
};

/// One layer's sizes for the image kernel. `pooled`: 2x2 stride-2 windows, written as
/// tanh of their maximum; tiles then cover only the pooled rows and columns.
struct ImageLayer {
  int B, M, C, H, W, K, H_out, W_out;
  int tiles_w, tiles;  ///< 2x8 tiles per row pair, per image
  int image;           ///< C * H * W: one image's floats in x
  int PH, PW;          ///< pooled output (pooled launches)

  static ImageLayer of(const ConvShape& s, bool pooled) {
    ImageLayer l{s.B, s.M, s.C, s.H, s.W, s.K, s.H_out(), s.W_out(), 0, 0, s.C * s.H * s.W,
                 s.H_out() / 2, s.W_out() / 2};
    const int rows = pooled ? l.PH : ceil_div(l.H_out, 2);
    l.tiles_w = pooled ? ceil_div(l.PW, 4) : ceil_div(l.W_out, 8);
    l.tiles = rows * l.tiles_w;
    return l;
  }
  /// The staged image and the slack the last tiles read past it (at most W + 7 floats), in
  /// whole 16-byte units so that the second buffer is aligned for 16-byte copies.
  __host__ __device__ int staged() const { return (image + W + 8 + 3) / 4 * 4; }
};

template <int NT, int KS, bool kPooled>
__global__ void __launch_bounds__(kImageThreads, kImageBlocksPerSm)
    image_conv_kernel(float* __restrict__ y, const float* __restrict__ x,
                      const float* __restrict__ k, ImageLayer l) {
  extern __shared__ float staged[];  // two images, each followed by its slack
  const int lane = static_cast<int>(threadIdx.x % 32), warp = static_cast<int>(threadIdx.x / 32);
  const int g = lane / 4, t = lane % 4;
  const int Kd = l.C * l.K * l.K;
  const int nt = ceil_div(l.M, 8);

  // Every filter, as this lane's B fragments (zero past the layer's maps and terms), and the
  // image offsets of this lane's A columns (terms t and t + 4 of each step of 8).
  std::uint32_t bf[NT][KS][2];
  int off[KS][2];
#pragma unroll
  for (int s = 0; s < KS; ++s) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int r = s * 8 + t + 4 * h;
      const int c = r / (l.K * l.K), pq = r - c * l.K * l.K, p = pq / l.K;
      // Terms past the sum read the output's own pixel: finite, and multiplied by zero.
      off[s][h] = r < Kd ? (c * l.H + p) * l.W + (pq - p * l.K) : 0;
#pragma unroll
      for (int n = 0; n < NT; ++n) {
        const int m = n * 8 + g;
        bf[n][s][h] = to_tf32(m < l.M && r < Kd ? __ldg(k + m * Kd + r) : 0.0f);
      }
    }
  }
  for (int i = l.image + static_cast<int>(threadIdx.x); i < l.staged(); i += kImageThreads) {
    staged[i] = staged[l.staged() + i] = 0.0f;  // the slack, once: no image overwrites it
  }

  // The next image is copied in (cp.async, no registers) while this one is multiplied.
  std::int64_t b = blockIdx.x;
  if (b < l.B) copy_image(staged, x + b * l.image, l.image);
  for (int buffer = 0; b < l.B; b += gridDim.x, buffer ^= 1) {
    const std::int64_t next = b + gridDim.x;
    if (next < l.B) copy_image(staged + (buffer ^ 1) * l.staged(), x + next * l.image, l.image);
    if (next < l.B) {
      asm volatile("cp.async.wait_group 1;" ::: "memory");
    } else {
      asm volatile("cp.async.wait_group 0;" ::: "memory");
    }
    float* img = staged + buffer * l.staged();
    round_image(img, x + b * l.image, l.image);  // this thread's own copies, now arrived
    __syncthreads();  // this image is in
    // Warp w takes tiles w, w + 4, ...: row pair tr, column tile tc.
    int tr = warp / l.tiles_w, tc = warp % l.tiles_w;
    for (int tile = warp; tile < l.tiles; tile += kImageWarps) {
      const int h0 = 2 * tr, w0 = 8 * tc;
      for (tc += kImageWarps; tc >= l.tiles_w; tc -= l.tiles_w) ++tr;
      const float* a_lo = img + h0 * l.W + w0 + g;  // output (h0, w0 + g); + W: (h0 + 1, ...)
      float acc[NT][4];
#pragma unroll
      for (int n = 0; n < NT; ++n) acc[n][0] = acc[n][1] = acc[n][2] = acc[n][3] = 0.0f;
#pragma unroll
      for (int s = 0; s < KS; ++s) {
        if (s * 8 >= Kd) break;
        const std::uint32_t a[4] = {
            __float_as_uint(a_lo[off[s][0]]), __float_as_uint(a_lo[off[s][0] + l.W]),
            __float_as_uint(a_lo[off[s][1]]), __float_as_uint(a_lo[off[s][1] + l.W])};
#pragma unroll
        for (int n = 0; n < NT; ++n) {
          if (n < nt) mma_tf32(acc[n], a, bf[n][s][0], bf[n][s][1]);
        }
      }
      if constexpr (kPooled) {
        // Lane g holds column w0 + g of both rows: the window's other column is lane g ^ 1.
        // Even lanes write map 2t, odd lanes map 2t + 1: 8 maps x 4 pooled columns a store.
        const int pw = w0 / 2 + g / 2, odd = g & 1;
        const std::int64_t plane = std::int64_t{l.PH} * l.PW;
        float* out = y + (b * l.M + 2 * t + odd) * plane + h0 / 2 * l.PW + pw;
#pragma unroll
        for (int n = 0; n < NT; ++n, out += 8 * plane) {
          if (n >= nt) break;
          const float v0 = fmaxf(acc[n][0], acc[n][2]), v1 = fmaxf(acc[n][1], acc[n][3]);
          const float p0 = fmaxf(v0, __shfl_xor_sync(0xffffffffu, v0, 4));
          const float p1 = fmaxf(v1, __shfl_xor_sync(0xffffffffu, v1, 4));
          const float v = tanh_fast(odd ? p1 : p0);  // before the test: a predicated store
          if (n * 8 + 2 * t + odd < l.M && pw < l.PW) *out = v;
        }
      } else {
        const int w = w0 + g;
        if (w < l.W_out) {
          // Map 2t of fragment n, then each next fragment 8 maps on.
          const std::int64_t P = std::int64_t{l.H_out} * l.W_out;
          float* out = y + (b * l.M + 2 * t) * P + h0 * l.W_out + w;
          const int row = h0 + 1 < l.H_out ? l.W_out : 0;  // the second row, or the first again
#pragma unroll
          for (int n = 0; n < NT; ++n, out += 8 * P) {
            const int m = n * 8 + 2 * t;
            if (n >= nt) break;
            if (m < l.M) {
              out[row] = acc[n][2];
              out[0] = acc[n][0];
            }
            if (m + 1 < l.M) {
              out[P + row] = acc[n][3];
              out[P] = acc[n][1];
            }
          }
        }
      }
    }
    __syncthreads();  // this buffer is no longer read: the next copy may go into it
  }
}

/// Runs the image kernel for NT x 8 maps and KS x 8 terms on `stream`.
template <int NT, int KS, bool kPooled>
void launch_image_tiles(float* y, const float* x, const float* k, const ImageLayer& l,
                        cudaStream_t stream) {
  const auto kernel = image_conv_kernel<NT, KS, kPooled>;
  const int bytes = 2 * l.staged() * static_cast<int>(sizeof(float));
  if (bytes > 48 * 1024) {
    CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
  }
  int device = 0, sms = 0, per_sm = 0;
  CUDA_CHECK(cudaGetDevice(&device));
  CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, kImageThreads, bytes));
  // Blocks loop over the images, so each loads the filters into its registers once.
  const auto blocks = static_cast<unsigned>(
      std::min<std::int64_t>(l.B, std::int64_t{sms} * std::max(per_sm, 1)));
  kernel<<<blocks, kImageThreads, static_cast<std::size_t>(bytes), stream>>>(y, x, k, l);
  CUDA_CHECK_LAUNCH();
}

/// Runs the image kernel if the layer fits it; false otherwise.
template <bool kPooled>
bool launch_image_conv(float* y, const float* x, const float* k, const ConvShape& s,
                       cudaStream_t stream) {
  const ImageLayer l = ImageLayer::of(s, kPooled);
  if (l.staged() > kImageFloatsMax) return false;
  if (l.B == 0 || l.M == 0 || l.tiles == 0) return true;  // nothing to write
  if (ImageTiles<7, 4>::fits(s)) {
    launch_image_tiles<7, 4, kPooled>(y, x, k, l, stream);
  } else if (ImageTiles<4, 7>::fits(s)) {
    launch_image_tiles<4, 7, kPooled>(y, x, k, l, stream);
  } else {
    return false;
  }
  return true;
}

}  // namespace

void conv_tensor_cores(float* y, const float* x, const float* k, const ConvShape& shape,
                       cudaStream_t stream) {
  if (launch_image_conv<false>(y, x, k, shape, stream)) return;
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
  const PooledColumns columns{std::int64_t{shape.B} * PH * PW, shape.M, PH, PW, pool.size,
                              pool.stride, kWmmaBN / n};
  launch_wmma_conv<Tf32Inputs>(y, x, k, shape, columns, stream);
}

}  // namespace convlab::solution
