// The best kernel, route gemm_ws (an sm_90a build on Hopper): C > 1 with more than 32 maps,
// sums of 64 terms or more and grids of half the SMs or more; also the products of the
// Winograd route (winograd.cu).
//
// The implicit GEMM's product (gemm.cu, 3xTF32) on wgmma, both operands read by the tensor
// cores from shared memory. A block is one producer warp group and one or two consumer warp
// groups of 64 maps each, 128 pixels. The producer loads a stage (16 terms of the filters and
// of the gathered inputs) into registers, splits every value once into its TF32 parts and
// stores both parts in the descriptors' K-major layout; the consumers only issue products.
// Barriers in shared memory (mbarrier) hand the stages over, a full and an empty one per stage,
// so that neither side waits for the whole block. The grid is persistent (as many blocks as
// fit at once, each taking tiles in turn), and the producer's loads run 2 or 3 stages ahead of
// its stores, across tiles: a block's start, its pipeline's fill and its outputs' stores no
// longer leave the tensor cores idle. Outputs are stored as pairs (float2) where y's rows
// allow. Why a producer: where every thread split the values it had copied between the
// block's barriers, the kernel needed 200 registers and waited on each stage's gather, split
// and barrier; from 33 maps the mma.sync GEMM's tiles are 64 maps wide too, and its products
// slower than these.
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

constexpr int kWsTerms = 16;  // terms per stage
constexpr int kWsStages = 4;
// Stages the producer's loads run ahead of the one it stores: as many as its registers allow
// (one block of two consumer groups per SM, two blocks of one: 128 registers a thread).
template <int CWG>
constexpr int kWsAhead = CWG == 1 ? 2 : 3;

template <int CWG>  // consumer warp groups, 64 maps each
struct WsLayout {
  static constexpr int kMaps = 64 * CWG;
  static constexpr int kAFloats = kMaps * kWsTerms;      // one of A big, A small
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
  asm volatile(
      "{ .reg .b64 state; mbarrier.arrive.shared::cta.b64 state, [%0]; }" ::"r"(shared_address(bar))
      : "memory");
}
// Waits until the barrier's phase of this parity has completed.
__device__ __forceinline__ void mbarrier_wait(std::uint64_t* bar, int parity) {
  unsigned done = 0;
  do {
    asm volatile(
        "{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2; "
        "selp.u32 %0, 1, 0, p; }"
        : "=r"(done)
        : "r"(shared_address(bar)), "r"(parity)
        : "memory");
  } while (!done);
}

// d += A * B, 64 rows x 128 columns x 8 terms, both operands read from shared memory.
__device__ __forceinline__ void wgmma_tf32_ss(float (&d)[64], std::uint64_t desc_a,
                                              std::uint64_t desc_b) {
  asm volatile(
      "{ .reg .pred p; setp.ne.b32 p, 1, 0; "
      "wgmma.mma_async.sync.aligned.m64n128k8.f32.tf32.tf32 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, "
      "%17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
      "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, "
      "%47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, "
      "%62, %63}, "
      "%64, %65, p, 1, 1; }"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]),
        "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]),
        "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]),
        "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]),
        "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]),
        "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]),
        "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]),
        "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
        "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]),
        "+f"(d[63])
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
      mbarrier_init(&full[s], 128);         // the producer's threads
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
void launch_gemm_ws(float* y, const float* x, const float* k, GemmGeometry g, cudaStream_t stream,
                    int batches = 1) {
  g.m_tiles = ceil_div(g.M, 64 * CWG);
  g.batches = batches;
  g.vector_y = g.P % 2 == 0 && g.batch_y % 2 == 0 &&
               reinterpret_cast<std::uintptr_t>(y) % sizeof(float2) == 0;
  const std::int64_t tiles =
      std::int64_t{g.m_tiles} * ceil_div<std::int64_t>(g.N, kWsPixels) * batches;
  const std::size_t smem = WsLayout<CWG>::bytes(g.R);
  auto* kernel = conv_best_gemm_ws_kernel<CWG>;
  allow_dynamic_shared_memory(kernel, static_cast<std::int64_t>(smem), "conv_best");
  const std::int64_t blocks =
      std::min<std::int64_t>(tiles, resident_blocks(reinterpret_cast<const void*>(kernel),
                                                    128 * (CWG + 1), static_cast<int>(smem)));
  kernel<<<static_cast<unsigned>(blocks), 128 * (CWG + 1), smem, stream>>>(y, x, k, g);
  CUDA_CHECK_LAUNCH();
}

// Consumer warp groups for M maps: one up to 64 maps, else two.
int ws_consumer_groups(int M) {
  return M <= 64 ? 1 : 2;
}

}  // namespace

// launch_gemm_ws with ws_consumer_groups(g.M) consumer groups.
void launch_gemm_ws_for_maps(float* y, const float* x, const float* k, const GemmGeometry& g,
                             cudaStream_t stream, int batches) {
  if (ws_consumer_groups(g.M) == 1) {
    launch_gemm_ws<1>(y, x, k, g, stream, batches);
  } else {
    launch_gemm_ws<2>(y, x, k, g, stream, batches);
  }
}

// The producer-consumer GEMM for C > 1 with more than 32 maps, sums of 64 terms or more and a
// grid of half the SMs or more; false (nothing launched) otherwise, or without the sm_90a
// kernel for this device. With 32 maps or fewer run_gemm's narrower tiles are faster.
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
  // One block per SM: grids of fewer blocks than half the SMs run faster on run_gemm's smaller
  // tiles.
  const std::int64_t blocks =
      ceil_div<std::int64_t>(g.N, kWsPixels) * ceil_div(g.M, 64 * ws_consumer_groups(g.M));
  if (2 * blocks < multiprocessor_count()) return false;
  auto launch = [&](const float* x_part, const float* k_part, const GemmGeometry& part) {
    launch_gemm_ws_for_maps(y, x_part, k_part, part, stream);
  };
  for_channel_chunks(g, x, k, launch);
  return true;
}

}  // namespace convlab::solution::best
