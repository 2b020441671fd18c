// The best kernel, route image: C > 1 with 5 to 32 maps and sums of up to a few hundred terms
// on images of at most 48 KB (LeNet's conv2, odd-shapes' conv2), plain or fused.
//
// The implicit GEMM's 3xTF32 product (gemm.cu), but X comes from whole images staged in shared
// memory instead of a per-term gather from global memory: each input value feeds K*K terms,
// which the gather loads K*K times and the staged image once. A block stages a chunk of
// consecutive images (one contiguous copy, cp.async, the next chunk's while this one is
// multiplied); a warp task is 32 consecutive outputs of the chunk, two 16-row A fragments whose
// rows are outputs and columns the sum's terms, read straight from the image at the output's
// offset plus the term's. B holds 8 maps per fragment; the filters are split into big and small
// once per block and kept in shared memory in fragment order, so that a lane's four values for
// a step and a map fragment are one 16-byte load. The outputs' offsets (in the chunk and in y)
// are a table built once per block: they are the same for every chunk. Fused with tanh and the
// 2x2 max-pool, the table orders the outputs by window, so that a lane holds whole windows.
// Up to 4 maps (half of B's columns or more padding), and up to 8 with sums under 32 terms,
// the channel-streaming kernel is faster and keeps them.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <climits>
#include <cstdint>

#include "fast_tanh.cuh"
#include "reference/conv/student_api.hpp"
#include "reference/core/cuda_check.hpp"
#include "reference/core/cuda_launch.cuh"
#include "routes.cuh"
#include "shared.cuh"

namespace convlab::solution::best {
namespace {

constexpr int kImageWarps = 8, kImageThreads = 32 * kImageWarps;
constexpr int kImageChunkFloats = 12 * 1024;  // images per chunk: 48 KB at most
constexpr int kImageFilterBytes = 64 * 1024;  // the split filters at most
constexpr int kImageSharedMax = 110 * 1024;   // two blocks per SM
// 16-output A fragments per warp task.
constexpr int kImageFrags = 2;

struct ImageGeometry {
  int M, R, steps;        // maps, the sum's length C*K*K, steps of 8 terms
  int steps8;             // steps of 8 terms; the last one has 4 or fewer when steps8 < steps
  int K, H, W, W_out, P;  // P: output pixels per image
  int PY, OWY;            // one map of y: its pixels and row length (pooled: a quarter of P)
  int image;              // C*H*W, one image of x
  int B, group;           // images, and images per chunk
  int chunks;             // ceil(B / group)
  int chunk_floats;       // group * image, rounded up to whole float4s
  int outputs;            // A rows of a full chunk: group * P, or pooled, 4 per window of
                          // y (group * PY) rounded up to whole tasks of 8 windows

  // Shared memory: split filters [steps][NT][32] (uint4), term offsets [steps][4] (int2), the
  // outputs' offsets in the chunk and in y (int each), then two chunk buffers.
  __host__ __device__ int filter_bytes(int NT) const { return steps * NT * 32 * 16; }
  __host__ __device__ int table_bytes() const {
    return steps * 4 * 8 + (outputs * 2 * 4 + 15) / 16 * 16;
  }
  int bytes(int NT) const {
    return filter_bytes(NT) + table_bytes() + 2 * chunk_floats * static_cast<int>(sizeof(float));
  }
};

// Copies n floats from global to shared memory, 16 bytes at a time where both allow it (one
// cp.async group).
__device__ __forceinline__ void copy_chunk(float* dst, const float* src, int n) {
  const int tid = static_cast<int>(threadIdx.x);
  if (n % 4 == 0 && reinterpret_cast<std::uintptr_t>(src) % 16 == 0) {
    for (int i = 4 * tid; i < n; i += 4 * kImageThreads) cp_async16(dst + i, src + i, true);
  } else {
    for (int i = tid; i < n; i += kImageThreads) cp_async4(dst + i, src + i, true);
  }
  cp_async_commit();
}

// A rows of `images` images (ImageGeometry::outputs), conv + tanh + 2x2 max-pool when `pool`.
__host__ __device__ inline int image_rows(const ImageGeometry& g, int images, bool pool) {
  return pool ? (images * g.PY + 7) / 8 * 32 : images * g.P;
}

// kPool: conv + tanh + 2x2 max-pool. A task's 32 rows are then 8 windows, row 16f + 8h + g
// the corner 2f + h of window g: the lane that holds a row's accumulators holds the window's
// other three corners too, and pools them with no shuffle.
template <int NT, bool kPool>
__global__ void __launch_bounds__(kImageThreads, 2)
    conv_best_image_kernel(float* __restrict__ y, const float* __restrict__ x,
                           const float* __restrict__ k, const ImageGeometry g) {
  static_assert(!kPool || kImageFrags == 2, "a window's four corners are two fragments' rows");
  // Steps unrolled by 2 for odd counts of map fragments, not unrolled for even ones: the faster
  // of the two for each count.
  constexpr int kStepUnroll = NT % 2 == 0 ? 1 : 2;
  extern __shared__ float4 smem4[];
  auto* filters = reinterpret_cast<uint4*>(smem4);
  auto* terms = reinterpret_cast<int2*>(filters + g.steps * NT * 32);
  int* in_chunk = reinterpret_cast<int*>(terms + g.steps * 4);  // bytes from the chunk's start
  int* in_y = in_chunk + g.outputs;                             // floats from the chunk's y
  float* buffers = reinterpret_cast<float*>(smem4) + g.table_bytes() / 4 + g.filter_bytes(NT) / 4;

  const int tid = static_cast<int>(threadIdx.x);
  const auto chunk_at = [&](int chunk) { return x + std::int64_t{chunk} * g.group * g.image; };
  const auto chunk_size = [&](int chunk) {
    return std::min(g.group, g.B - chunk * g.group) * g.image;
  };
  int chunk = static_cast<int>(blockIdx.x);
  if (chunk < g.chunks) copy_chunk(buffers, chunk_at(chunk), chunk_size(chunk));
  // While the first chunk is on its way: the split filters, the terms and the outputs.
  for (int i = tid; i < g.steps * NT * 32; i += kImageThreads) {
    const int lane = i % 32, n = i / 32 % NT, s = i / (32 * NT);
    const int m = n * 8 + lane / 4, r = s * 8 + lane % 4;
    const bool map = m < g.M;
    const float* row = k + std::int64_t{m} * g.R;
    uint4 f;
    split_tf32(map && r < g.R ? __ldg(row + r) : 0.0f, f.x, f.z);
    split_tf32(map && r + 4 < g.R ? __ldg(row + r + 4) : 0.0f, f.y, f.w);
    filters[i] = f;
  }
  const auto term = [&](int r) {  // past the sum: the output's own pixel, times a zero filter
    return r < g.R ? 4 * sum_term_offset(r, g.K, g.W, g.H * g.W) : 0;
  };
  for (int i = tid; i < g.steps * 4; i += kImageThreads) {
    const int r = i / 4 * 8 + i % 4;
    terms[i] = {term(r), term(r + 4)};
  }
  for (int q = tid; q < g.outputs; q += kImageThreads) {
    if constexpr (kPool) {  // past the chunk's windows: its first pixel, never stored
      const int window = q / 32 * 8 + q % 8, corner = q % 32 / 8;
      const int b = window / g.PY, p = window - b * g.PY, ph = p / g.OWY;
      const int h = 2 * ph + corner / 2, w = 2 * (p - ph * g.OWY) + corner % 2;
      in_chunk[q] = b < g.group ? 4 * (b * g.image + h * g.W + w) : 0;
      in_y[q] = b * g.M * g.PY + p;
    } else {
      const int b = q / g.P, p = q - b * g.P, h = p / g.W_out;
      in_chunk[q] = 4 * (b * g.image + h * g.W + p - h * g.W_out);
      in_y[q] = b * g.M * g.P + p;
    }
  }

  const int warp = tid / 32, lane = tid % 32, gq = lane / 4, tq = lane % 4;
  for (int buffer = 0; chunk < g.chunks; chunk += gridDim.x, buffer ^= 1) {
    const int next = chunk + static_cast<int>(gridDim.x);
    if (next < g.chunks) {
      copy_chunk(buffers + (buffer ^ 1) * g.chunk_floats, chunk_at(next), chunk_size(next));
      cp_async_wait<1>();
    } else {
      cp_async_wait<0>();
    }
    __syncthreads();  // this chunk (and, the first time, the tables) are in
    const unsigned img = shared_address(buffers + buffer * g.chunk_floats);
    const int images = chunk_size(chunk) / g.image;
    const int outputs = image_rows(g, images, kPool);
    float* const y_chunk = y + std::int64_t{chunk} * g.group * g.M * g.PY;

    for (int task = warp; task * 16 * kImageFrags < outputs; task += kImageWarps) {
      // This lane's A rows: outputs q and q + 8 of each fragment (past the chunk: its last).
      const int first = task * 16 * kImageFrags;  // the task's first output
      unsigned rows[kImageFrags][2];
#pragma unroll
      for (int f = 0; f < kImageFrags; ++f) {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          rows[f][h] = img + in_chunk[std::min(first + 16 * f + 8 * h + gq, outputs - 1)];
        }
      }
      float acc[kImageFrags][NT][4] = {};
      const uint4* f_step = filters + lane;
#pragma unroll kStepUnroll
      for (int s = 0; s < g.steps8; ++s, f_step += NT * 32) {
        const int2 o = terms[4 * s + tq];
        uint4 b[NT];
#pragma unroll
        for (int n = 0; n < NT; ++n) b[n] = f_step[n * 32];
        staged_step_3xtf32(acc, rows, o, b);
      }
      if (g.steps8 < g.steps) {  // a last step of 4 terms or fewer: half the products
        const int o = terms[4 * g.steps8 + tq].x;
#pragma unroll
        for (int f = 0; f < kImageFrags; ++f) {
          std::uint32_t ab[2], as[2];
          split_tf32(load_shared(rows[f][0] + o), ab[0], as[0]);
          split_tf32(load_shared(rows[f][1] + o), ab[1], as[1]);
#pragma unroll
          for (int n = 0; n < NT; ++n) {
            const uint4 b = f_step[n * 32];
            mma_tf32_k4(acc[f][n], as, b.x);
            mma_tf32_k4(acc[f][n], ab, b.z);
            mma_tf32_k4(acc[f][n], ab, b.x);
          }
        }
      }
      // acc[f][n]: outputs q (elements 0, 1) and q + 8 (2, 3) of maps 8n + 2tq (+1).
      if constexpr (kPool) {  // the max of the window's corners, then one tanh
        if (first / 4 + gq < images * g.PY) {
          float* out = y_chunk + in_y[first + gq];
#pragma unroll
          for (int n = 0; n < NT; ++n) {
            const int m = 8 * n + 2 * tq;
            const float* a = acc[0][n];
            const float* c = acc[1][n];
            const float v0 = fmaxf(fmaxf(a[0], a[2]), fmaxf(c[0], c[2]));
            const float v1 = fmaxf(fmaxf(a[1], a[3]), fmaxf(c[1], c[3]));
            if (m < g.M) out[std::int64_t{m} * g.PY] = tanh_fast(v0);
            if (m + 1 < g.M) out[std::int64_t{m + 1} * g.PY] = tanh_fast(v1);
          }
        }
      } else {
#pragma unroll
        for (int f = 0; f < kImageFrags; ++f) {
#pragma unroll
          for (int h = 0; h < 2; ++h) {
            const int q = first + 16 * f + 8 * h + gq;
            if (q >= outputs) continue;
            float* out = y_chunk + in_y[q];
#pragma unroll
            for (int n = 0; n < NT; ++n) {
              const int m = 8 * n + 2 * tq;
              if (m < g.M) out[std::int64_t{m} * g.P] = acc[f][n][2 * h];
              if (m + 1 < g.M) out[std::int64_t{m + 1} * g.P] = acc[f][n][2 * h + 1];
            }
          }
        }
      }
    }
    __syncthreads();  // this buffer is no longer read: the copy after next may go into it
  }
}

// The image kernel with NT fragments of 8 maps, one block per chunk up to two per SM.
template <int NT, bool kPool>
void launch_image(float* y, const float* x, const float* k, const ImageGeometry& g,
                  cudaStream_t stream) {
  const auto kernel = conv_best_image_kernel<NT, kPool>;
  allow_dynamic_shared_memory(kernel, g.bytes(NT), kPool ? "conv_tanh_maxpool_best" : "conv_best");
  const int sms = multiprocessor_count();
  const int blocks = std::min(g.chunks, 2 * sms);
  kernel<<<blocks, kImageThreads, static_cast<std::size_t>(g.bytes(NT)), stream>>>(y, x, k, g);
  CUDA_CHECK_LAUNCH();
}

// The image path's geometry for a plain conv; group 0 where the path does not take the shape:
// where it does not fit (C = 1, more than 32 maps, or an image, a sum or a table too large for
// its shared memory) or where the stream kernel is faster: up to 4 maps (half of B's columns
// or more are padding) and up to 8 maps with sums under 32 terms.
ImageGeometry image_geometry(const ConvShape& s, bool pool = false) {
  ImageGeometry g{};
  g.M = s.M;
  g.R = s.C * s.K * s.K;
  g.steps = ceil_div(g.R, 8);
  g.steps8 = g.R % 8 != 0 && g.R % 8 <= 4 ? g.steps - 1 : g.steps;
  g.K = s.K;
  g.H = s.H;
  g.W = s.W;
  g.W_out = s.W_out();
  g.P = s.H_out() * s.W_out();
  g.OWY = pool ? s.W_out() / 2 : s.W_out();  // PoolShape{2, 2}.out(n) is n / 2
  g.PY = pool ? s.H_out() / 2 * g.OWY : g.P;
  g.image = s.C * s.H * s.W;
  g.B = s.B;
  const int NT = ceil_div(s.M, 8);
  if (s.M <= 4 || (s.M <= 8 && g.R < 32)) return g;
  if (s.C == 1 || NT > kImageMaxMapFrags || g.image > kImageChunkFloats || g.PY == 0 ||
      g.filter_bytes(NT) > kImageFilterBytes) {
    return g;
  }
  // Images per chunk: of those that fit, the fewest that keep the warps' last round of tasks
  // the fullest.
  constexpr int task = 16 * kImageFrags;
  double best_use = 0.0;
  for (int group = 1; group <= std::min(s.B, kImageChunkFloats / g.image); ++group) {
    ImageGeometry t = g;
    t.chunk_floats = ceil_div(group * g.image, 4) * 4;
    t.outputs = image_rows(g, group, pool);
    if (t.bytes(NT) > kImageSharedMax) break;
    const int tasks = ceil_div(t.outputs, task);
    const double use = static_cast<double>(pool ? 4 * group * g.PY : t.outputs) /
                       (ceil_div(tasks, kImageWarps) * kImageWarps * task);
    if (use > best_use + 1e-3) best_use = use, g.group = group;
  }
  if (g.group == 0) return g;
  g.chunks = ceil_div(s.B, g.group);
  g.chunk_floats = ceil_div(g.group * g.image, 4) * 4;
  g.outputs = image_rows(g, g.group, pool);
  return g;
}

// The image path for a plain conv; false (nothing launched) where image_geometry declines.
template <bool kPool>
bool image_route(float* y, const float* x, const float* k, const ConvShape& s,
                 cudaStream_t stream) {
  const ImageGeometry g = image_geometry(s, kPool);
  if (g.group == 0) return false;
  dispatch_map_frags(ceil_div(s.M, 8), [&](auto frags) {
    launch_image<decltype(frags)::value, kPool>(y, x, k, g, stream);
  });
  return true;
}

}  // namespace

bool run_image(float* y, const float* x, const float* k, const ConvShape& s, cudaStream_t stream) {
  return image_route<false>(y, x, k, s, stream);
}

bool run_image_pooled(float* y, const float* x, const float* k, const ConvShape& s,
                      cudaStream_t stream) {
  return image_route<true>(y, x, k, s, stream);
}

bool image_takes(const ConvShape& s) {
  return image_geometry(s).group != 0;
}

}  // namespace convlab::solution::best
