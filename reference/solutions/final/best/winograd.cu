// The best kernel, route winograd (an sm_90a build on Hopper): K = 3 with 64 to 1024 channels,
// 64 maps or more and outputs of 4x4 or more (VGG-16's layers from conv1-2 on): Winograd's
// F(4x4, 3x3) around the producer-consumer GEMM (gemm_ws.cu).
//
// A 4x4 tile of outputs is A^T [sum_c (G g_c G^T) . (B^T d_c B)] A, d_c the tile's 6x6 input
// patch in channel c, g_c its 3x3 filter and . the element-wise product: 36 products per
// channel and tile where the direct sum takes 144. The layer becomes 36 independent GEMMs, one
// per position t of the 6x6 transform: Z[t][m][p] = sum_c U[t][m][c] V[t][c][p], U the
// transformed filters, V the transformed input tiles and p a tile of the batch. Two kernels
// transform filters and inputs into a workspace, gemm_ws.cu's kernel multiplies (a 1x1 conv of
// one image of P pixels per product, still 3xTF32), and a third kernel transforms Z back into
// y. The workspace (U, V and Z: about 4.5 times x and y) comes from the stream-ordered pool.
// cuDNN's fp32 class runs this algorithm on VGG-16 too (WINOGRAD_NONFUSED); the direct GEMM,
// with 2.25 times the multiplies, stayed slower than cuDNN on those layers.
// Accuracy: the input transform scales values by up to 100 and the output transform cancels
// what it adds, so the sums lose more to rounding than a direct one: on VGG-16's layers the
// worst error is 1.4 to 3.6 times the direct GEMM's, 0.16 to 0.42 of the fp32 class's bound
// (the bench's check), as cuDNN's Winograd. Points 0, 1, -1, 2, -2 (1/2 and -1/2 are no more
// exact). The exact-count models have no such layer.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <climits>
#include <cstdint>

#include "reference/conv/student_api.hpp"
#include "reference/core/cuda_check.hpp"
#include "reference/core/cuda_launch.cuh"
#include "routes.cuh"
#include "shared.cuh"

namespace convlab::solution::best {
namespace {

constexpr int kWinoTile = 4;                     // outputs per tile side
constexpr int kWinoPatch = kWinoTile + 2;        // inputs per patch side
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

}  // namespace

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
  conv_best_wino_filters<<<static_cast<unsigned>(
                               ceil_div<std::int64_t>(std::int64_t{s.M} * s.C, kWinoThreads)),
                           kWinoThreads, 0, stream>>>(u, k, s.M, s.C);
  CUDA_CHECK_LAUNCH();
  conv_best_wino_inputs<<<static_cast<unsigned>(
                              ceil_div<std::int64_t>(std::int64_t{s.C} * g.P, kWinoThreads)),
                          kWinoThreads, 0, stream>>>(v, x, g);
  CUDA_CHECK_LAUNCH();
  // Each product as a 1x1 conv of C channels on one image of 1 x P pixels.
  GemmGeometry gg = make_gemm_geometry(ConvShape{1, s.M, s.C, 1, g.P, 1}, u);
  gg.batch_k = std::int64_t{s.M} * s.C;
  gg.batch_x = std::int64_t{s.C} * g.P;
  gg.batch_y = std::int64_t{s.M} * g.P;
  launch_gemm_ws_for_maps(z, v, u, gg, stream, kWinoT);
  conv_best_wino_outputs<<<static_cast<unsigned>(
                               ceil_div<std::int64_t>(std::int64_t{s.M} * g.P, kWinoThreads)),
                           kWinoThreads, 0, stream>>>(y, z, g);
  CUDA_CHECK_LAUNCH();
  CUDA_CHECK(cudaFreeAsync(workspace, stream));
  return true;
}

}  // namespace convlab::solution::best
