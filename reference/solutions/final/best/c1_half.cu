// The best kernel, fused route c1_half: conv + tanh + 2x2 max-pool for C = 1, K = 5 and 25 to
// 64 maps on images of at most 48 KB (the project's layer).
//
// fp32 accuracy from fp16 products, which the tensor cores run at twice the TF32 rate: every
// value v is split into v's fp16 rounding and the fp16 rounding of the rest (11 + 11 bits, as
// 3xTF32), and big x big + big x small + small x big are accumulated in fp32 (the largest error
// against a float64 sum, after tanh, is below 1e-6, as with 3xTF32). fp16's range is narrow,
// so the values are scaled by powers of two first (exact): each image so that its largest
// magnitude lies in [2^14, 2^15), the filters likewise, and the epilogue scales the pooled
// maximum back (with tanh's exp2 scale: one multiply). fp16 pairs are 4-byte units, so a block
// stages an image (cp.async) and writes it as two planes of pairs, plane[i] = (v[i], v[i + 1])
// for the big and the small parts: a lane's A register, two horizontally adjacent terms of its
// output, is one 4-byte load at any offset. The sum's terms go by pairs of columns of a filter
// row (K = 5: 3 pairs a row, the last with one term and a zero filter; 15 pairs, 2 steps of 16
// terms). The rest is tensor_cores' image kernel: every filter as fragments in registers (both
// parts), a warp's tile 8 windows whose top and bottom rows are two products, a lane holding
// whole windows, so the pool is three maxima. Faster so than the wgmma kernel (c1_wgmma.cu:
// operands split per tile, warp groups pooling across lanes) and the FMA kernel (tiled.cu) on
// these layers.
#include <cuda_fp16.h>
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
    // Four words a thread, each value split once (words is a multiple of 4).
    for (int i = 4 * tid; i < g.words; i += 4 * kThreads) {
      const float4 v = *reinterpret_cast<const float4*>(raw + i);
      const float in[5] = {v.x, v.y, v.z, v.w, i + 4 < g.words ? raw[i + 4] : 0.0f};
      unsigned short bh[5], sh[5];
#pragma unroll
      for (int e = 0; e < 5; ++e) split_half(xscale * in[e], bh[e], sh[e]);
      *reinterpret_cast<uint4*>(big + i) =
          make_uint4(half_pair(bh[0], bh[1]), half_pair(bh[1], bh[2]), half_pair(bh[2], bh[3]),
                     half_pair(bh[3], bh[4]));
      *reinterpret_cast<uint4*>(small + i) =
          make_uint4(half_pair(sh[0], sh[1]), half_pair(sh[1], sh[2]), half_pair(sh[2], sh[3]),
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
  // arithmetic of a tile off the warps.
  const auto kernel = g.H == 28 && g.W == 28 ? conv_c1_half_kernel<kK, NT, 28, 28, kWarps>
                                             : conv_c1_half_kernel<kK, NT, 0, 0, kWarps>;
  allow_dynamic_shared_memory(kernel, g.bytes(), "conv_tanh_maxpool_best");
  // Nothing is read twice through L1: all of it as shared memory, and the grid as many blocks
  // as then fit (four blocks of 4 warps up to 32 maps).
  CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout,
                                  cudaSharedmemCarveoutMaxShared));
  const auto blocks = static_cast<unsigned>(std::min<std::int64_t>(
      resident_blocks(reinterpret_cast<const void*>(kernel), 32 * kWarps, g.bytes()), g.B));
  kernel<<<blocks, 32 * kWarps, g.bytes(), stream>>>(y, x, k, g);
  CUDA_CHECK_LAUNCH();
}

}  // namespace

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
  // 18 tiles of 8 windows: 6 + 6 + 6 rather than 5 + 5 + 4 + 4), otherwise 4: warps idle at
  // the barrier between images are the loss. Not with fewer images than blocks of 3 warps: then
  // 4 warps an image keep more at work.
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

}  // namespace convlab::solution::best
