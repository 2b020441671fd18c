// The best kernel, route gemm: the implicit GEMM on tensor cores with fp32 accuracy (3xTF32),
// for C > 1 where the channel-streaming kernel (tiled.cu) is slower, and from 5 maps on for
// filters it cannot take (above 7x7, or one map's filter above its constant memory), C = 1
// included.
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
// products run about as fast as cuBLAS's fp32 SGEMM; the split, not the tensor core, limits
// small M. The tiled kernels keep C = 1, short sums (C*K*K < 32) and few maps (M <= 8, or M <=
// 16 with sums under 256 terms: a split operand then feeds too few products to pay for its
// split). On Hopper, large grids take gemm_ws.cu's kernel instead. Sums longer than the offset
// table run in chunks of channels (for_channel_chunks).
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
    return sizeof(float) *
           (std::size_t{kStages} * kFloats + static_cast<std::size_t>(ceil_div(R, BK) * BK));
  }
};

// Block tile BM x BN of Y, WM x WN warps, each warp (BM/WM) x (BN/WN) as 16x8 fragments; the
// sum advances kGemmBK at a time through kGemmStages stages.
// kSplit: blockIdx.y's part of a split sum (run_gemm_split); the other kernels compile as if
// there were no parts.
template <int BM, int BN, int WM, int WN, int kGemmBK, int kGemmStages, int kMinBlocks, bool kSplit>
__global__ void __launch_bounds__(WM* WN * 32, kMinBlocks)
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
    kernel<<<dim3(static_cast<unsigned>(blocks), parts), WM * WN * 32, smem, stream>>>(y, x, k, g);
  };
  if (g.split_channels > 0) {
    launch(conv_best_gemm_kernel<BM, BN, WM, WN, BK, kStages, kMinBlocks, true>);
  } else {
    launch(conv_best_gemm_kernel<BM, BN, WM, WN, BK, kStages, kMinBlocks, false>);
  }
  CUDA_CHECK_LAUNCH();
  return true;
}

// launch_gemm's tile height up to 64 maps (more maps: 128 or 64 rows, by the grid's size).
constexpr int gemm_tile_rows(int M) {
  return M <= 16 ? 16 : M <= 32 ? 32 : 64;
}

// The tiles, the fastest for each size: 16x128 with 16-row steps and 4 stages for M <= 16,
// then 3 stages: 32x128 for M <= 32, 64x128 for M <= 64, 128x128 with two blocks per SM (it
// spills a few bytes, and is still the fastest) when that grid fills the GPU twice, else 64x64
// with four blocks per SM.
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

// Blocks of launch_gemm's grid, or fewer (its tiles are smaller above 64 maps).
std::int64_t gemm_grid_blocks(const GemmGeometry& g) {
  return ceil_div(g.M, gemm_tile_rows(g.M)) * ceil_div<std::int64_t>(g.N, 128);
}

// Grids that leave most SMs idle with a long sum (few pixels, many channels): the channels
// split into parts of at least kSplitMinTerms terms, each part's product on its own blocks
// (blockIdx.y) into its own copy of y in a pooled workspace, then one kernel adds the parts.
// False (nothing launched) where the grid is large enough, the sum too short, or the workspace
// cannot be had.
bool run_gemm_split(float* y, const float* x, const float* k, GemmGeometry g, cudaStream_t stream) {
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

}  // namespace

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

bool run_gemm(float* y, const float* x, const float* k, const ConvShape& s, cudaStream_t stream) {
  const GemmGeometry g = make_gemm_geometry(s, k);
  // Filters larger than every tiled kernel's (K > kMaxK, or C > 1 with one map's filter above
  // the streaming kernel's constant memory) have only the one-thread-per-output kernel left,
  // which the GEMM beats from 5 maps on, C = 1 included. Not with 4 maps or fewer, three
  // quarters of its columns or more padding, nor with C = 1 on grids that fill at most half the
  // SMs, whose sum cannot be split by channels.
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

}  // namespace convlab::solution::best
