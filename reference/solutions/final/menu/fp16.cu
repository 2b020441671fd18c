// Staff solution, menu: half precision (IEEE fp16 inputs, float32 accumulation).
//
// tensor_cores' kernel (BMx128 tiles of eight warps, y written through shared memory) with
// half inputs: W and X tiles are rounded to __half as they are staged (half the
// shared-memory bytes of float), and the tensor cores multiply 16x16x16 half fragments into
// float32 accumulators (X's row offsets decoded once per slice of the sum, as there). The
// accumulation stays float32
// as the fp16 class states (docs/grader.md): a half accumulator would lose the sum's low
// bits after a few hundred terms.
// Why: the later editions' FP16 point; half doubles the tensor cores' rate over TF32 and
// halves every staged byte, at the price of fp16's range (max 65504) and 10-bit mantissa.
// Expected effect: fewer shared-memory bytes per product than tensor_cores; the class's rule
// reports how many images sit under the bound.
// Layers with at most 32 maps and images of at most 48 KB (every layer of LeNet, odd-shapes and
// two-conv) take a staged kernel instead: whole images in shared memory, the filters too, and
// mma.sync m16n8k16 fragments built from them, several times faster than the WMMA kernel.
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>
#include <mma.h>

#include <algorithm>
#include <cstdint>

#include "best/tensor_core_math.cuh"
#include "reference/conv/student_api.hpp"
#include "reference/core/ceil_div.hpp"
#include "reference/core/cuda_check.hpp"
#include "reference/core/cuda_launch.cuh"

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
  /// Offset of x[b][0][h][w] for column j.
  __device__ std::int64_t column(std::int64_t j) const {
    const std::int64_t b = j / P;
    const int p = static_cast<int>(j - b * P);
    const int h = p / W_out, w = p - h * W_out;
    return (b * C * H + h) * W + w;
  }
  /// Offset of X's row r from a column's offset (0 past the sum: finite, and multiplied by
  /// zero). One division per row of a slice, not per element.
  __device__ int row(int r, int Kd) const {
    if (r >= Kd) return 0;
    const int kk = K * K;
    const int c = r / kk, pq = r - c * kk;
    const int p = pq / K, q = pq - p * K;
    return (c * H + p) * W + q;
  }
};

namespace wmma = nvcuda::wmma;

/// IEEE half inputs: fragments of m16n16k16.
struct HalfInputs {
  using Fragment = __half;
  using Stored = __half;
  static constexpr int kK = 16;
  __device__ static Stored round(float v) { return __float2half_rn(v); }
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

template <typename In, int BM>
__global__ void __launch_bounds__(kWmmaThreads, 3)
    wmma_conv_kernel(float* __restrict__ y, const float* __restrict__ k, ImplicitX x, GemmSize g) {
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
  const std::int64_t j0 = static_cast<std::int64_t>(blockIdx.x) * kWmmaBN;

  // Each thread loads and stores one column of the tile: decoded once.
  const int col = tid % kWmmaBN, row_step = kWmmaThreads / kWmmaBN;
  const bool col_ok = j0 + col < g.cols;
  const std::int64_t col_offset = col_ok ? x.column(j0 + col) : 0;

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
  // (within an image), and a warp's stores are whole lines.
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
  if (!col_ok) return;
  const std::int64_t b = (j0 + col) / g.P;
  float* out = y + b * g.M * g.P + (j0 + col - b * g.P);  // y[b][0][h][w] of this column
  for (int mm = tid / kWmmaBN; mm < BM && m0 + mm < g.M; mm += row_step) {
    out[static_cast<std::int64_t>(m0 + mm) * g.P] = tiles.y[mm][col];
  }
}

/// The kernel with BM x kWmmaBN tiles on `stream`.
template <typename In, int BM>
void launch_wmma_tiles(float* y, const float* x, const float* k, const ConvShape& s,
                       const GemmSize& g, cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>(ceil_div<std::int64_t>(g.cols, kWmmaBN)),
                  static_cast<unsigned>(ceil_div(g.M, BM)));
  wmma_conv_kernel<In, BM><<<grid, kWmmaThreads, 0, stream>>>(y, k, ImplicitX::of(x, s), g);
  CUDA_CHECK_LAUNCH();
}

/// The layer on tensor cores with inputs of format `In`, enqueued on `stream`.
template <typename In>
void launch_wmma_conv(float* y, const float* x, const float* k, const ConvShape& s,
                      cudaStream_t stream) {
  const GemmSize g = GemmSize::of(s, s.B);
  if (g.cols == 0 || g.M == 0) return;
  if (g.M <= 16) {
    launch_wmma_tiles<In, 16>(y, x, k, s, g, stream);
  } else if (g.M <= 32) {
    launch_wmma_tiles<In, 32>(y, x, k, s, g, stream);
  } else {
    launch_wmma_tiles<In, 64>(y, x, k, s, g, stream);
  }
}


// ---- Small layers: staged images, staged filters, mma.sync m16n8k16 -----------------------

// Layers with at most 32 maps whose images fit in 48 KB (LeNet's, odd-shapes' and two-conv's):
// a block stages a chunk of consecutive images in shared memory as they are in x (cp.async,
// the next chunk while this one is multiplied), and each warp builds its A fragments (16
// outputs x 16 terms) straight from the staged images, rounding pairs of values to half as it
// packs them (cvt.rn.f16x2.f32). The filters are rounded once per block and kept in shared
// memory in fragment order: a lane's four values of a step and a map fragment are one 8-byte
// load. Small images come several per chunk, so that every warp gets whole tasks of 32
// outputs; the outputs' offsets in the chunk and in y are a table built once per block.
constexpr int kStagedWarps = 4, kStagedThreads = 32 * kStagedWarps;
constexpr int kStagedFrags = 2;                 // 16-output A fragments per warp task
constexpr int kStagedTask = 16 * kStagedFrags;  // outputs per warp task
constexpr int kStagedMaxMapFrags = 4;           // 32 maps
constexpr int kStagedChunkFloats = 12 * 1024;   // images per chunk: 48 KB at most
constexpr int kStagedFilterBytes = 32 * 1024;   // the rounded filters at most
// Shared memory per block, and the blocks per SM it leaves room for: three where a chunk of one
// image fits, else two (the registers allow more).
struct SharedBudget {
  int bytes, blocks_per_sm;
};
constexpr SharedBudget kStagedShared[] = {{74 * 1024, 3}, {112 * 1024, 2}};

struct StagedLayer {
  int M, Kd, steps;       // maps, the sum's length C*K*K, steps of 16 terms
  int P, W, W_out;        // P: output pixels per image
  int image;              // C*H*W, one image of x
  int B, group, chunks;   // images, images per chunk, chunks
  int chunk_floats;       // group * image, rounded up to whole float4s
  int outputs;            // group * P: outputs of a full chunk
  int blocks_per_sm;      // of the shared-memory budget the chunk fits

  // Shared memory: filters [steps][NT][32] (uint2), term offsets [steps][4] (int4), the
  // outputs' offsets in the chunk and in y, then two chunk buffers.
  __host__ __device__ int filter_bytes(int NT) const { return steps * NT * 32 * 8; }
  __host__ __device__ int table_bytes() const {
    return steps * 4 * 16 + (outputs * 2 * 4 + 15) / 16 * 16;
  }
  int bytes(int NT) const {
    return filter_bytes(NT) + table_bytes() + 2 * chunk_floats * static_cast<int>(sizeof(float));
  }
};

/// Two floats rounded to half and packed: lo in the low 16 bits (the lower index).
__device__ __forceinline__ std::uint32_t pack_half2(float lo, float hi) {
  std::uint32_t r;
  asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
}

/// Starts copying n floats from global to shared memory (one cp.async group), 16 bytes at a
/// time where both allow it.
__device__ __forceinline__ void copy_chunk(float* dst, const float* src, int n) {
  const int tid = static_cast<int>(threadIdx.x);
  const bool by_four = n % 4 == 0 && reinterpret_cast<std::uintptr_t>(src) % 16 == 0;
  for (int i = by_four ? 4 * tid : tid; i < n; i += by_four ? 4 * kStagedThreads : kStagedThreads) {
    const auto d = static_cast<unsigned>(__cvta_generic_to_shared(dst + i));
    if (by_four) {
      asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(d), "l"(src + i) : "memory");
    } else {
      asm volatile("cp.async.ca.shared.global [%0], [%1], 4;" ::"r"(d), "l"(src + i) : "memory");
    }
  }
  asm volatile("cp.async.commit_group;" ::: "memory");
}

template <int NT>
__global__ void __launch_bounds__(kStagedThreads)
    staged_conv_kernel(float* __restrict__ y, const float* __restrict__ x,
                       const float* __restrict__ k, const StagedLayer l, const ImplicitX terms_of) {
  extern __shared__ float4 smem4[];
  auto* filters = reinterpret_cast<uint2*>(smem4);
  auto* terms = reinterpret_cast<int4*>(filters + l.steps * NT * 32);
  int* in_chunk = reinterpret_cast<int*>(terms + l.steps * 4);  // bytes from the chunk's start
  int* in_y = in_chunk + l.outputs;                             // floats from the chunk's y
  float* buffers = reinterpret_cast<float*>(smem4) + (l.filter_bytes(NT) + l.table_bytes()) / 4;

  const int tid = static_cast<int>(threadIdx.x);
  const auto chunk_at = [&](int chunk) { return x + std::int64_t{chunk} * l.group * l.image; };
  const auto chunk_size = [&](int chunk) {
    return std::min(l.group, l.B - chunk * l.group) * l.image;
  };
  int chunk = static_cast<int>(blockIdx.x);
  if (chunk < l.chunks) copy_chunk(buffers, chunk_at(chunk), chunk_size(chunk));
  // While the first chunk is on its way: the filters, the terms and the outputs.
  for (int i = tid; i < l.steps * NT * 32; i += kStagedThreads) {
    const int lane = i % 32, n = i / 32 % NT, s = i / (32 * NT);
    const int m = n * 8 + lane / 4, r = s * 16 + 2 * (lane % 4);
    const auto at = [&](int rr) {
      return m < l.M && rr < l.Kd ? __ldg(k + std::int64_t{m} * l.Kd + rr) : 0.0f;
    };
    filters[i] = {pack_half2(at(r), at(r + 1)), pack_half2(at(r + 8), at(r + 9))};
  }
  for (int i = tid; i < l.steps * 4; i += kStagedThreads) {
    const int r = i / 4 * 16 + 2 * (i % 4);  // past the sum: the output's pixel, a zero filter
    terms[i] = {4 * terms_of.row(r, l.Kd), 4 * terms_of.row(r + 1, l.Kd),
                4 * terms_of.row(r + 8, l.Kd), 4 * terms_of.row(r + 9, l.Kd)};
  }
  for (int q = tid; q < l.outputs; q += kStagedThreads) {
    const int b = q / l.P, p = q - b * l.P, h = p / l.W_out;
    in_chunk[q] = 4 * (b * l.image + h * l.W + p - h * l.W_out);
    in_y[q] = b * l.M * l.P + p;
  }

  const int warp = tid / 32, lane = tid % 32, g = lane / 4, t = lane % 4;
  for (int buffer = 0; chunk < l.chunks; chunk += gridDim.x, buffer ^= 1) {
    const int next = chunk + static_cast<int>(gridDim.x);
    if (next < l.chunks) {
      copy_chunk(buffers + (buffer ^ 1) * l.chunk_floats, chunk_at(next), chunk_size(next));
      asm volatile("cp.async.wait_group 1;" ::: "memory");
    } else {
      asm volatile("cp.async.wait_group 0;" ::: "memory");
    }
    __syncthreads();  // this chunk (and, the first time, the tables) are in
    const char* bytes = reinterpret_cast<const char*>(buffers + buffer * l.chunk_floats);
    const int outputs = chunk_size(chunk) / l.image * l.P;
    float* const y_chunk = y + std::int64_t{chunk} * l.group * l.M * l.P;

    for (int first = warp * kStagedTask; first < outputs; first += kStagedWarps * kStagedTask) {
      // This lane's A rows: outputs q and q + 8 of each fragment (past the chunk: its last).
      const char* rows[kStagedFrags][2];
#pragma unroll
      for (int f = 0; f < kStagedFrags; ++f) {
        rows[f][0] = bytes + in_chunk[std::min(first + 16 * f + g, outputs - 1)];
        rows[f][1] = bytes + in_chunk[std::min(first + 16 * f + 8 + g, outputs - 1)];
      }
      const auto at = [](const char* row, int o) {
        return *reinterpret_cast<const float*>(row + o);
      };
      float acc[kStagedFrags][NT][4] = {};
      const uint2* f_step = filters + lane;
#pragma unroll 2
      for (int s = 0; s < l.steps; ++s, f_step += NT * 32) {
        const int4 o = terms[4 * s + t];
        uint2 b[NT];
#pragma unroll
        for (int n = 0; n < NT; ++n) b[n] = f_step[n * 32];
#pragma unroll
        for (int f = 0; f < kStagedFrags; ++f) {
          const std::uint32_t a[4] = {
              pack_half2(at(rows[f][0], o.x), at(rows[f][0], o.y)),
              pack_half2(at(rows[f][1], o.x), at(rows[f][1], o.y)),
              pack_half2(at(rows[f][0], o.z), at(rows[f][0], o.w)),
              pack_half2(at(rows[f][1], o.z), at(rows[f][1], o.w))};
#pragma unroll
          for (int n = 0; n < NT; ++n) mma_f16(acc[f][n], a, b[n].x, b[n].y);
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

/// Runs the staged kernel with NT fragments of 8 maps, as many blocks as the GPU holds at once
/// (no occupancy query: it takes microseconds, inside the timed call).
template <int NT>
void launch_staged_maps(float* y, const float* x, const float* k, const ConvShape& s,
                        const StagedLayer& l, cudaStream_t stream) {
  const auto kernel = staged_conv_kernel<NT>;
  const int bytes = l.bytes(NT);
  allow_dynamic_shared_memory(kernel, bytes, "conv_fp16");
  int device = 0, sms = 0;
  CUDA_CHECK(cudaGetDevice(&device));
  CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  const int blocks = std::min(l.chunks, sms * l.blocks_per_sm);
  kernel<<<blocks, kStagedThreads, static_cast<std::size_t>(bytes), stream>>>(
      y, x, k, l, ImplicitX::of(x, s));
  CUDA_CHECK_LAUNCH();
}

/// Runs the staged kernel if the layer fits it (up to 32 maps, an image of at most 48 KB and
/// the rest within kStagedShared); false otherwise.
bool launch_staged_conv(float* y, const float* x, const float* k, const ConvShape& s,
                        cudaStream_t stream) {
  StagedLayer l{};
  l.M = s.M;
  l.Kd = s.C * s.K * s.K;
  l.steps = ceil_div(l.Kd, 16);
  l.P = s.H_out() * s.W_out();
  l.W = s.W;
  l.W_out = s.W_out();
  l.image = s.C * s.H * s.W;
  l.B = s.B;
  const int NT = ceil_div(s.M, 8);
  if (NT > kStagedMaxMapFrags || l.image > kStagedChunkFloats ||
      l.filter_bytes(NT) > kStagedFilterBytes) {
    return false;
  }
  if (l.B == 0 || l.M == 0 || l.P == 0) return true;  // nothing to write
  // Images per chunk: of those that fit, the fewest that keep the warps' last round of tasks
  // the fullest.
  for (const SharedBudget& budget : kStagedShared) {
    double best_use = 0.0;
    l.blocks_per_sm = budget.blocks_per_sm;
    for (int group = 1; group <= std::min(s.B, kStagedChunkFloats / l.image); ++group) {
      StagedLayer c = l;
      c.chunk_floats = ceil_div(group * l.image, 4) * 4;
      c.outputs = group * l.P;
      if (c.bytes(NT) > budget.bytes) break;
      const int tasks = ceil_div(c.outputs, kStagedTask);
      const double use = static_cast<double>(c.outputs) /
                         (ceil_div(tasks, kStagedWarps) * kStagedWarps * kStagedTask);
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
      launch_staged_maps<1>(y, x, k, s, l, stream);
      break;
    case 2:
      launch_staged_maps<2>(y, x, k, s, l, stream);
      break;
    case 3:
      launch_staged_maps<3>(y, x, k, s, l, stream);
      break;
    default:
      launch_staged_maps<4>(y, x, k, s, l, stream);
      break;
  }
  return true;
}

}  // namespace

void conv_fp16(float* y, const float* x, const float* k, const ConvShape& shape,
               cudaStream_t stream) {
  if (launch_staged_conv(y, x, k, shape, stream)) return;
  launch_wmma_conv<HalfInputs>(y, x, k, shape, stream);
}

}  // namespace convlab::solution
