// Staff solution, final step 4: the filters in constant memory.
//
// Changed from step 3: the filters leave shared memory for a __constant__ array; the input tile
// stays in shared memory and K stays a template parameter. The launcher copies the filters in
// with cudaMemcpyToSymbolAsync on the caller's stream (device to device, no host round trip).
// Constant memory holds 64 KB: when the M*C*K*K filter values do not fit, the output maps are
// processed in chunks that do, one copy and one launch per chunk; stream order guarantees a
// chunk's copy lands after the previous chunk's kernel has finished reading.
// Why: every thread of a block works on the same output map, so at each (c, p, q) all threads
// of a warp read the same weight: the constant cache broadcasts it in one access, the kernel no
// longer stages the filter, and shared-memory bandwidth is left to the input tile alone.
// Expected effect: shared-memory traffic per product drops from two loads to one, but on the
// project's layer the gain over step 3 is small (about 1%): that kernel is not limited by
// shared-memory bandwidth. Constant memory matters more once outputs are register-blocked (step 5).
// The __constant__ array is one per program: two streams must not run this launcher at once.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <string>

#include "reference/conv/student_api.hpp"
#include "reference/core/cuda_check.hpp"
#include "reference/core/cuda_launch.cuh"

namespace convlab::solution {
namespace {

constexpr int kTile = 16;  // output tile edge: 256 threads per block
static_assert(kTile * kTile <= 1024, "one thread per output of the tile");
constexpr int kConstFloats = 64 * 1024 / sizeof(float);  // all of constant memory

// The filters of one chunk: [maps of the chunk][channels of the chunk][K][K].
__constant__ float c_filters[kConstFloats];

// One chunk: output maps [m0, m0 + m_count) and channels [c0, c0 + c_count). With
// `accumulate` the chunk adds to y (the later channel chunks of a map); otherwise it writes y.
// kK > 0: the filter size, known at compile time; kK == 0: read K at run time.
template <int kK>
__global__ void conv_constant_memory_kernel(float* __restrict__ y, const float* __restrict__ x,
                                            int B, int M, int C, int H, int W, int K_runtime,
                                            int tiles_w, int m0, int m_count, int c0, int c_count,
                                            bool accumulate) {
  const int K = kK > 0 ? kK : K_runtime;
  extern __shared__ float tile[];  // [kTile+K-1][kTile+K-1]
  const int in_tile = kTile + K - 1;

  const int H_out = H - K + 1;
  const int W_out = W - K + 1;
  const int h0 = (static_cast<int>(blockIdx.x) / tiles_w) * kTile;
  const int w0 = (static_cast<int>(blockIdx.x) % tiles_w) * kTile;
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int tid = ty * kTile + tx;
  const int h = h0 + ty, w = w0 + tx;
  const bool active = h < H_out && w < W_out;

  for (int b = blockIdx.z; b < B; b += gridDim.z) {
    for (int mi = blockIdx.y; mi < m_count; mi += gridDim.y) {
      float acc = 0.0f;
      for (int ci = 0; ci < c_count; ++ci) {
        const float* xc = x + (std::int64_t{b} * C + c0 + ci) * H * W;
        for (int i = tid; i < in_tile * in_tile; i += kTile * kTile) {
          const int r = h0 + i / in_tile, s = w0 + i % in_tile;
          tile[i] = (r < H && s < W) ? xc[std::int64_t{r} * W + s] : 0.0f;
        }
        __syncthreads();
        if (active) {
          const float* row = tile + ty * in_tile + tx;
          const float* filt = c_filters + (mi * c_count + ci) * K * K;  // same for the whole block
#pragma unroll
          for (int p = 0; p < K; ++p) {
#pragma unroll
            for (int q = 0; q < K; ++q) acc += row[p * in_tile + q] * filt[p * K + q];
          }
        }
        __syncthreads();
      }
      if (active) {
        float& out = y[((std::int64_t{b} * M + m0 + mi) * H_out + h) * W_out + w];
        out = accumulate ? out + acc : acc;
      }
    }
  }
}

template <int kK>
void launch(float* y, const float* x, const float* k, const ConvShape& shape, cudaStream_t stream,
            int tiles_w, unsigned tiles, std::int64_t smem_bytes) {
  allow_dynamic_shared_memory(conv_constant_memory_kernel<kK>, smem_bytes,
                              "conv_constant_memory for " + shape.to_string());
  const int kk = shape.K * shape.K;
  const std::int64_t filter_floats = std::int64_t{shape.C} * kk;  // one output map
  // Chunks: whole filters of several maps when one filter fits, else channel ranges of one map.
  const int maps_per_chunk =
      filter_floats <= kConstFloats ? static_cast<int>(kConstFloats / filter_floats) : 1;
  const int channels_per_chunk = filter_floats <= kConstFloats ? shape.C : kConstFloats / kk;
  const dim3 block(kTile, kTile);
  for (int m0 = 0; m0 < shape.M; m0 += maps_per_chunk) {
    const int m_count = std::min(maps_per_chunk, shape.M - m0);
    for (int c0 = 0; c0 < shape.C; c0 += channels_per_chunk) {
      const int c_count = std::min(channels_per_chunk, shape.C - c0);
      // Maps of a whole-filter chunk, or channels of one map: contiguous in k either way.
      const float* src = k + (std::int64_t{m0} * shape.C + c0) * kk;
      const std::size_t bytes = std::size_t(m_count) * std::size_t(c_count) * kk * sizeof(float);
      CUDA_CHECK(
          cudaMemcpyToSymbolAsync(c_filters, src, bytes, 0, cudaMemcpyDeviceToDevice, stream));
      const dim3 grid(tiles, static_cast<unsigned>(std::min(m_count, 65535)),
                      static_cast<unsigned>(std::min(shape.B, 65535)));
      conv_constant_memory_kernel<kK>
          <<<grid, block, static_cast<std::size_t>(smem_bytes), stream>>>(
              y, x, shape.B, shape.M, shape.C, shape.H, shape.W, shape.K, tiles_w, m0, m_count, c0,
              c_count, c0 > 0);
      CUDA_CHECK_LAUNCH();
    }
  }
}

}  // namespace

void conv_constant_memory(float* y, const float* x, const float* k, const ConvShape& shape,
                          cudaStream_t stream) {
  shape.validate();
  if (std::int64_t{shape.K} * shape.K > kConstFloats) {
    throw Error("K=" + std::to_string(shape.K) +
                ": one K*K filter does not fit in the 64 KB of constant memory");
  }
  const int tiles_w = ceil_div(shape.W_out(), kTile);
  const std::int64_t tiles = std::int64_t{ceil_div(shape.H_out(), kTile)} * tiles_w;
  if (tiles > INT_MAX) {
    throw Error("output map too large for conv_constant_memory: " + shape.to_string());
  }
  const std::int64_t in_tile = kTile + shape.K - 1;
  const std::int64_t smem_bytes = in_tile * in_tile * std::int64_t{sizeof(float)};
  const auto t = static_cast<unsigned>(tiles);
  dispatch_filter_size<7>(shape.K, [&](auto filter_size) {
    launch<decltype(filter_size)::value>(y, x, k, shape, stream, tiles_w, t, smem_bytes);
  });
}

}  // namespace convlab::solution
