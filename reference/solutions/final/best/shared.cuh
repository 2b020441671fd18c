// What several of the best kernel's routes share: sizes, the split of a long sum into parts,
// the implicit GEMM's view of a layer, and the staged 3xTF32 step of the image and band kernels.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "reference/conv/student_api.hpp"
#include "reference/core/ceil_div.hpp"
#include "reference/core/cuda_check.hpp"
#include "tensor_core_math.cuh"

namespace convlab::solution::best {

inline constexpr int kMaxK = 7;  // largest K of the tiled kernels
inline constexpr std::int64_t kFallbackMaxBlocks = std::int64_t{1} << 20;  // grid-stride kernels
inline constexpr int kImageMaxMapFrags = 4;  // the staged-image and band kernels: 32 maps
// The implicit GEMM's longest sum (its offset table, 32 KB): longer ones run in chunks of
// channels (for_channel_chunks).
inline constexpr int kGemmMaxR = 8 * 1024;
inline constexpr int kWsPixels = 128;  // the producer-consumer GEMM's N: pixels per block

// SMs of the current device.
int multiprocessor_count();

// A workspace of `bytes` from the device's stream-ordered pool, which keeps what it holds
// between calls (so that only the first call pays for the memory); nullptr without memory pools
// or without the memory (the caller then runs another path). Freed with cudaFreeAsync.
void* pool_workspace(std::size_t bytes, cudaStream_t stream);

// y = the sum of `parts` partial outputs of n floats each, `stride` floats apart, in order (the
// same result every call).
void sum_parts(float* y, const float* partial, int parts, std::int64_t n, std::int64_t stride,
               cudaStream_t stream);

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
    sum_parts(y, partial, parts, n, stride, stream);
  }
  CUDA_CHECK(cudaFreeAsync(partial, stream));
  return launched;
}

// Split sums: parts of at least kSplitMinTerms terms, at most kSplitMaxParts parts.
inline constexpr int kSplitMinTerms = 256;
inline constexpr int kSplitMaxParts = 32;

// The FMA kernels' split sums (the channel-streaming kernel, plain, and the one-thread kernel):
// grids of at most half the blocks the SMs hold at once, with a long sum, split its channels
// into parts of kSplitMinTerms terms or more, enough to fill the SMs, each part on blocks of
// its own (blockIdx.y) into its own copy of y, added after in order. 1: no split.
int channel_parts(int C, int K, std::int64_t blocks, int blocks_per_sm);

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

// Whether this build has the sm_90a kernels for the current device: asked once per device.
bool wgmma_built();

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

// The implicit GEMM's view of a layer (gemm.cu; gemm_ws.cu and winograd.cu run products of
// the same form).
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

// The GEMM's view of a layer (m_tiles is the launcher's).
GemmGeometry make_gemm_geometry(const ConvShape& s, const float* k);

// Sums longer than the offset table (kGemmMaxR terms) as chunks of whole channels, one
// launch(x, k, geometry) each: every chunk after the first adds its part to y.
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

// The producer-consumer GEMM (gemm_ws.cu), `batches` products g.batch_* floats apart: one
// consumer warp group up to 64 maps, else two.
void launch_gemm_ws_for_maps(float* y, const float* x, const float* k, const GemmGeometry& g,
                             cudaStream_t stream, int batches = 1);

// The channel-streaming kernel's maps in its first launch (tiled.cu): 0 where one map's filter
// does not fit it (the GEMM then takes the layer).
int stream_launch_maps(int M, int C, int K);
// Layers with C > 1 and K <= kMaxK: whether the channel-streaming kernel runs them faster than
// the GEMM (tiled.cu); `split`: the plain launcher, which splits a long sum into parts.
bool stream_beats_gemm(const ConvShape& s, bool split);

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
// are F * NT apart, so a warp has that many independent products to issue between them (the
// band kernel steps F = 4 fragments at once). Each accumulator takes the same products in the
// same order whatever F is.
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

}  // namespace convlab::solution::best
