// The best kernel, route c1_wgmma (an sm_90a build on Hopper): C = 1 with blocks of 41 to 64
// maps and K = 5 to 7, fused with the 2x2 max-pool or plain (plain: K = 7, or K = 5 and 6 on
// rows of y that are not whole 32-byte sectors).
//
// The layer as a product on the tensor cores with fp32 accuracy (3xTF32, as gemm.cu): rows are
// conv outputs, columns maps, the sum runs over the K*K terms. A block is one warp group (4
// warps) issuing wgmma.mma_async, the Hopper product of a whole warp group: one instruction
// multiplies 64 outputs by up to 64 maps by 8 terms, up to 32 times the work of an mma.sync. A,
// the inputs, comes from registers: each lane loads its values from the image staged in shared
// memory and splits them. B, the filters, is read by the tensor cores from shared memory, split
// once per block in the layout of the instruction's matrix descriptor, so no register holds a
// filter. Fused, a lane's two rows are the left and right output of one row of a pooling
// window; the window's other row is 4 lanes away: the pool is two fmaxf and one shuffle per
// map. Plain, a tile's 64 rows are 64 consecutive outputs, which go through shared memory so
// that a warp's stores are whole lines of y (float4s).
// Where the others win: with fewer maps, or K under 5 (the sum then mostly padding), the FMA
// kernel (tiled.cu) is faster; plain, the warps wait on the stores, and on rows of whole
// sectors the FMA kernel, which writes longer runs of y, stays faster up to K = 6. Fused, K = 5
// with 25 to 64 maps (the project's layer) goes to c1_half.cu first.
// wgmma is an sm_90a instruction: other builds compile an empty kernel and never launch it.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>

#include "fast_tanh.cuh"
#include "reference/conv/student_api.hpp"
#include "reference/core/cuda_check.hpp"
#include "reference/core/cuda_launch.cuh"
#include "routes.cuh"
#include "shared.cuh"

namespace convlab::solution::best {
namespace {

constexpr int kWgThreads = 128;           // one warp group
constexpr int kWgMinMaps = 41;            // maps per block at least ...
constexpr int kWgMaxMaps = 64;            // ... and at most (8 fragments of 8)
constexpr int kWgSharedMax = 112 * 1024;  // two blocks per SM at least
constexpr int kWgBlocksPerSm = 4;         // at most (128 registers a thread); shared memory may
                                          // allow fewer
// A map's 64 outputs in the plain tile's staging, padded so that the lanes' writes (8 rows of
// 4 maps 2 apart per instruction) fall in 32 different banks: 2 * 68 = 8 (mod 32).
constexpr int kWgStagePitch = 68;

struct WgGeometry {
  int B, M, H, W, K;
  int OW, P;         // columns of the output (pooled or plain), values per map
  float inverse_OW;  // 1 / OW: q / OW is (q + 0.5) / OW rounded down, exact for q < 2^21
  int maps;          // maps per block (blockIdx.y's slice), at most 8 * NF
  int image_floats;  // H * W rounded up to 4
  bool vector_x;     // images start 16-byte aligned and hold a multiple of 4 values
  bool vector_y;     // plain: y 16-byte aligned and P a multiple of 4 (float4 stores)
  // Shared memory of a block: `tiles` B tiles of 8 x NF maps, three image buffers and, plain,
  // a tile's outputs (8 * NF maps of kWgStagePitch).
  int bytes(int NF, int tiles, bool pool) const {
    return 4 * (tiles * NF * 64 + 3 * image_floats + (pool ? 0 : 8 * NF * kWgStagePitch));
  }
};

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
// d = a * B (+ d if `accumulate`), 64 outputs x 8*NF maps (NF = 6 to 8) x 8 terms for the warp
// group: a holds this warp's 16 rows in the m16n8k8 layout, d this warp's outputs in the m16n8
// layout, one fragment per 8 maps.
template <int NF>
__device__ __forceinline__ void wgmma_tf32(float (&d)[4 * NF], const std::uint32_t (&a)[4],
                                           std::uint64_t desc, bool accumulate) {
  if constexpr (NF == 6) {
    asm volatile(
        "{ .reg .pred p; setp.ne.b32 p, %29, 0; "
        "wgmma.mma_async.sync.aligned.m64n48k8.f32.tf32.tf32 "
        "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17,"
        " %18, %19, %20, %21, %22, %23}, "
        "{%24, %25, %26, %27}, %28, p, 1, 1; }"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]),
          "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]),
          "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]),
          "+f"(d[21]), "+f"(d[22]), "+f"(d[23])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc), "r"(static_cast<int>(accumulate)));
  } else if constexpr (NF == 7) {
    asm volatile(
        "{ .reg .pred p; setp.ne.b32 p, %33, 0; "
        "wgmma.mma_async.sync.aligned.m64n56k8.f32.tf32.tf32 "
        "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17,"
        " %18, %19, %20, %21, %22, %23, %24, %25, %26, %27}, "
        "{%28, %29, %30, %31}, %32, p, 1, 1; }"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]),
          "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]),
          "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]),
          "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc), "r"(static_cast<int>(accumulate)));
  } else if constexpr (NF == 8) {
    asm volatile(
        "{ .reg .pred p; setp.ne.b32 p, %37, 0; "
        "wgmma.mma_async.sync.aligned.m64n64k8.f32.tf32.tf32 "
        "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17,"
        " %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, "
        "{%32, %33, %34, %35}, %36, p, 1, 1; }"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]),
          "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]),
          "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]),
          "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]),
          "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc), "r"(static_cast<int>(accumulate)));
  }
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
bool c1_wgmma_route(float* y, const float* x, const float* k, const ConvShape& s,
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

}  // namespace

bool run_c1_wgmma(float* y, const float* x, const float* k, const ConvShape& s,
                  cudaStream_t stream) {
  return c1_wgmma_route<false>(y, x, k, s, stream);
}

bool run_c1_wgmma_pooled(float* y, const float* x, const float* k, const ConvShape& s,
                         cudaStream_t stream) {
  return c1_wgmma_route<true>(y, x, k, s, stream);
}

}  // namespace convlab::solution::best
