// The best kernel, route pointwise: K = 1 with C > 1, up to 16 maps and 768 channels.
//
// y[b][m][p] = sum_c k[m][c] x[b][c][p]: an input value feeds only its pixel's M outputs, so the
// layer is bound by reading x. A thread takes 4 consecutive pixels of an image and every channel
// (one float4 load each where planes are whole float4s), keeps 4 x MT sums, and reads the
// filters from shared memory as [c][m], a broadcast float4 per 4 maps. A route of its own
// because the channel-streaming kernel reads x once per 4 maps, and staging whole images gains
// nothing where each value is read once. On grids of fewer than two blocks per SM, four lanes
// share a quad's sum, so that the SMs have loads enough in flight.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "reference/conv/student_api.hpp"
#include "reference/core/cuda_check.hpp"
#include "reference/core/cuda_launch.cuh"
#include "routes.cuh"
#include "shared.cuh"

namespace convlab::solution::best {
namespace {

constexpr int kPointwiseMaxMaps = 16;
constexpr int kPointwiseThreads = 256;
constexpr int kPointwiseMaxC = 48 * 1024 / (4 * kPointwiseMaxMaps);  // 768: filters in 48 KB
// Grids of fewer quads than this many blocks' worth per SM split each sum in kPointwiseSplit
// interleaved parts over the lanes of a warp, added by shuffles in a fixed order: four times the
// threads on a grid that would leave SMs short of loads in flight.
constexpr int kPointwiseSplitBlocksPerSm = 2;
constexpr int kPointwiseSplit = 4;
constexpr int kPointwiseSplitMinC = 16;

template <int MT, bool kVec, int kSplit>
__global__ void __launch_bounds__(kPointwiseThreads)
    conv_best_pointwise_kernel(float* __restrict__ y, const float* __restrict__ x,
                               const float* __restrict__ k, int M, int C, int P,
                               int quads_per_image, std::int64_t quads) {
  extern __shared__ float4 pointwise_smem[];
  float* filters = reinterpret_cast<float*>(pointwise_smem);  // [C][MT], zero past M
  for (int i = static_cast<int>(threadIdx.x); i < C * MT; i += kPointwiseThreads) {
    const int c = i / MT, m = i % MT;
    filters[i] = m < M ? k[std::int64_t{m} * C + c] : 0.0f;
  }
  __syncthreads();
  // A warp holds 32 / kSplit quads; lane group g sums channels g, g + kSplit, ...
  constexpr int kLanes = 32 / kSplit, kQuadsPerBlock = kPointwiseThreads / kSplit;
  const int lane = static_cast<int>(threadIdx.x) % 32, group = lane / kLanes;
  const int first = static_cast<int>(threadIdx.x) / 32 * kLanes + lane % kLanes;
  const std::int64_t step = std::int64_t{gridDim.x} * kQuadsPerBlock;
  // The loop is the same for every lane of a block (the shuffles need whole warps); a quad past
  // the end reads the last one's inputs and stores nothing.
  for (std::int64_t base = std::int64_t{blockIdx.x} * kQuadsPerBlock; base < quads; base += step) {
    const std::int64_t q = base + first;
    const bool valid = q < quads;
    const std::int64_t qq = valid ? q : quads - 1;
    const std::int64_t b = qq / quads_per_image;
    const int p0 = 4 * static_cast<int>(qq - b * quads_per_image);
    const float* in = x + (b * C + group) * P + p0;
    float acc[MT][4] = {};
#pragma unroll 4
    for (int c = group; c < C; c += kSplit, in += kSplit * P) {
      float v[4];
      if constexpr (kVec) {
        const float4 t = __ldg(reinterpret_cast<const float4*>(in));
        v[0] = t.x, v[1] = t.y, v[2] = t.z, v[3] = t.w;
      } else {
#pragma unroll
        for (int j = 0; j < 4; ++j) v[j] = p0 + j < P ? __ldg(in + j) : 0.0f;
      }
      const float4* w4 = reinterpret_cast<const float4*>(filters + c * MT);
#pragma unroll
      for (int m4 = 0; m4 < MT / 4; ++m4) {
        const float4 w = w4[m4];
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          acc[4 * m4][j] = fmaf(w.x, v[j], acc[4 * m4][j]);
          acc[4 * m4 + 1][j] = fmaf(w.y, v[j], acc[4 * m4 + 1][j]);
          acc[4 * m4 + 2][j] = fmaf(w.z, v[j], acc[4 * m4 + 2][j]);
          acc[4 * m4 + 3][j] = fmaf(w.w, v[j], acc[4 * m4 + 3][j]);
        }
      }
    }
#pragma unroll
    for (int offset = 16; offset >= kLanes; offset /= 2) {
#pragma unroll
      for (int m = 0; m < MT; ++m) {
#pragma unroll
        for (int j = 0; j < 4; ++j) acc[m][j] += __shfl_xor_sync(0xffffffffu, acc[m][j], offset);
      }
    }
    if (!valid || group != 0) continue;
    float* out = y + b * M * P + p0;
#pragma unroll
    for (int m = 0; m < MT; ++m, out += P) {
      if (m >= M) break;
      if constexpr (kVec) {
        *reinterpret_cast<float4*>(out) = make_float4(acc[m][0], acc[m][1], acc[m][2], acc[m][3]);
      } else {
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          if (p0 + j < P) out[j] = acc[m][j];
        }
      }
    }
  }
}

template <int MT, bool kVec>
void launch_pointwise(float* y, const float* x, const float* k, const ConvShape& s,
                      cudaStream_t stream) {
  const int P = s.H * s.W;
  const int quads_per_image = ceil_div(P, 4);
  const std::int64_t quads = std::int64_t{s.B} * quads_per_image;
  const auto smem = static_cast<std::size_t>(s.C) * MT * sizeof(float);
  const int sms = multiprocessor_count();
  // Enough blocks for every SM several times over, each loading the filters once.
  const std::int64_t most = std::int64_t{8} * sms;
  const auto launch = [&](auto* kernel, int quads_per_block) {
    kernel<<<grid_stride_blocks(quads, quads_per_block, most), kPointwiseThreads, smem, stream>>>(
        y, x, k, s.M, s.C, P, quads_per_image, quads);
  };
  if (s.C >= kPointwiseSplitMinC &&
      quads < std::int64_t{kPointwiseSplitBlocksPerSm} * sms * kPointwiseThreads) {
    launch(conv_best_pointwise_kernel<MT, kVec, kPointwiseSplit>,
           kPointwiseThreads / kPointwiseSplit);
  } else {
    launch(conv_best_pointwise_kernel<MT, kVec, 1>, kPointwiseThreads);
  }
  CUDA_CHECK_LAUNCH();
}

}  // namespace

// Whether run_pointwise takes `s`.
bool pointwise_takes(const ConvShape& s) {
  return s.K == 1 && s.C > 1 && s.M <= kPointwiseMaxMaps && s.C <= kPointwiseMaxC;
}

bool run_pointwise(float* y, const float* x, const float* k, const ConvShape& s,
                   cudaStream_t stream) {
  if (!pointwise_takes(s)) return false;
  // float4 loads and stores where every plane is whole float4s and both tensors start on 16 bytes.
  const bool vec = (s.H * s.W) % 4 == 0 && reinterpret_cast<std::uintptr_t>(x) % 16 == 0 &&
                   reinterpret_cast<std::uintptr_t>(y) % 16 == 0;
  const auto launch = [&](auto maps) {
    constexpr int MT = decltype(maps)::value;
    if (vec) {
      launch_pointwise<MT, true>(y, x, k, s, stream);
    } else {
      launch_pointwise<MT, false>(y, x, k, s, stream);
    }
  };
  if (s.M <= 4) {
    launch(std::integral_constant<int, 4>{});
  } else if (s.M <= 8) {
    launch(std::integral_constant<int, 8>{});
  } else {
    launch(std::integral_constant<int, 16>{});
  }
  return true;
}

}  // namespace convlab::solution::best
