// The best kernel, route band: C > 1, K > 1, up to 32 maps and sums of 128 terms or more, on
// images too large to stage whole or with filters too large to keep split in shared memory.
//
// The staged-image product (image.cu: 3xTF32, pixels as A's rows, 8 maps per B fragment) on
// tiles of up to kBandOutputs consecutive outputs (a band of whole output rows of one image, or
// several whole images where an image has few outputs), the sum's channels walked in chunks.
// Each chunk's input rows (the band's rows plus K - 1 below, every column) and its split
// filters come to shared memory by cp.async, the next chunk's while this one is multiplied; the
// accumulators stay in registers across chunks, two tasks of 32 rows of A a warp. The filters
// are split into big and small once per call, into a workspace in the fragment order of the
// staged-image kernel, chunk after chunk, so a block copies a chunk's filters with 16-byte loads
// and splits nothing. These layers ran faster so than on the gathering GEMM, the
// channel-streaming kernel or, above 7x7 with few maps, the one-thread kernel.
//
// With 4 maps or fewer, most of B's 8 columns would be padding; they hold `shift` copies of
// each map's filter instead, copy j moved j columns right (shift = 8, 4, 2 for 1, 2, 3-4
// maps): a row of A is then `shift` consecutive outputs of a row of y, its terms K x (K +
// shift - 1) per channel, and column (m, j) gives output w + j of map m. A staged channel ends
// in zeros, so that a last row's terms past the image read zeros. Up to K = 4, and with 3 maps
// (2 of the 8 columns stay padding) up to 7x7, the earlier routes stay faster and keep those.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>

#include "reference/conv/student_api.hpp"
#include "reference/core/cuda_check.hpp"
#include "reference/core/cuda_launch.cuh"
#include "routes.cuh"
#include "shared.cuh"

namespace convlab::solution::best {
namespace {

constexpr int kBandWarps = 8, kBandThreads = 32 * kBandWarps;
constexpr int kBandTasks = 2;  // tasks of 32 rows of A per warp (the kernel's step assumes 2)
constexpr int kBandOutputs = 32 * kBandTasks * kBandWarps;  // rows of A per tile at most
constexpr int kBandSharedMax = 100 * 1024;                  // two blocks per SM
constexpr int kBandMaxChunk = 64;                           // channels per chunk at most
constexpr int kBandMinTerms = 128;                          // shorter sums: other routes
// Terms of one accumulator chain at most: longer sums split into parts added in fp32. The
// tensor core aligns its products to the accumulator and drops their low bits, a bias that
// grows with the chain (C = 300, 2 maps, K = 7, 21,000 terms in one chain: errors up to 0.031
// on outputs of about 100).
constexpr int kBandMaxTerms = 4096;

struct BandGeometry {
  int B, C, M, K, H, W, H_out, W_out, P;  // P: output pixels per image
  int shift;      // outputs per row of A (B's columns per map): 1, or 2 to 8 for 1 to 4 maps
  int shift_log;  // log2(shift): the epilogue's column (m, j) without a division
  int KW;         // terms per filter row: K + shift - 1
  int W_rows;     // rows of A per output row: ceil(W_out / shift)
  int images;     // whole images per tile where an image has few outputs, else 1
  int rows_out;   // output rows per tile (H_out with whole images)
  int rows_in;    // staged input rows per channel: rows_out + K - 1
  int bands;      // tiles per image: ceil(H_out / rows_out)
  int tile_rows;  // rows of A per tile: images * rows_out * W_rows
  std::int64_t tiles;
  int cc, steps;     // channels per chunk, and its steps of 8 terms (the last one padded)
  int plane;         // a staged channel: rows_in * W, then 8 zeros when shift > 1
  int stage_floats;  // one chunk's staged input: images * cc * plane, whole float4s
  bool vector_copy;  // rows of whole float4s on 16-byte boundaries
  int c_part;        // a split sum's channels per part (a multiple of cc; C when not split)
  std::int64_t part_floats;

  // Fragments of 8 columns of B (maps times shifts), and the terms of a chunk's sum.
  __host__ __device__ int frags() const { return (M * shift + 7) / 8; }
  __host__ __device__ int chunk_terms() const { return cc * K * KW; }
  // Shared memory: two chunks' split filters [steps][NT][32] (uint4) and two staged inputs,
  // then the terms' offsets [steps][4] (int2) and the rows' (in the staged chunk, in y, and
  // the outputs left in y's row).
  __host__ __device__ int filter_bytes(int NT) const { return steps * NT * 32 * 16; }
  __host__ __device__ int stage_offset(int NT) const { return 2 * filter_bytes(NT); }
  __host__ __device__ int table_offset(int NT) const {
    return stage_offset(NT) + 2 * stage_floats * 4;
  }
  int bytes(int NT) const { return table_offset(NT) + steps * 4 * 8 + tile_rows * 3 * 4; }
};

// Term r of a chunk (c, p, q: channel, filter row, column of the K x KW row) as an offset in a
// staged chunk.
__host__ __device__ __forceinline__ int band_term_offset(int r, const BandGeometry& g) {
  const int per_channel = g.K * g.KW;
  const int c = r / per_channel, pq = r - c * per_channel, p = pq / g.KW;
  return c * g.plane + p * g.W + (pq - p * g.KW);
}

// The filters split for the band kernel: [chunk][step][NT][32] uint4, as the staged-image
// kernel builds them in shared memory (lane: column 8n + lane / 4, terms r and r + 4 of the
// step, r = 8s + lane % 4, chunk-local; big in x, y and small in z, w). Column (m, j) holds map
// m's filter moved j columns right. Past the sum, the maps or the filter's row: 0.
__global__ void conv_best_band_filters_kernel(uint4* __restrict__ out, const float* __restrict__ k,
                                              const BandGeometry g, int NT, std::int64_t total) {
  const int per_channel = g.K * g.KW, chunk_terms = g.chunk_terms();
  for (std::int64_t i = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x; i < total;
       i += std::int64_t{gridDim.x} * blockDim.x) {
    const int lane = static_cast<int>(i % 32), n = static_cast<int>(i / 32 % NT);
    const std::int64_t step = i / (32 * NT);
    const int s = static_cast<int>(step % g.steps), chunk = static_cast<int>(step / g.steps);
    const int column = 8 * n + lane / 4, m = column / g.shift, j = column - m * g.shift;
    const auto value = [&](int r) {
      const int cl = r / per_channel, pq = r - cl * per_channel, p = pq / g.KW;
      const int q = pq - p * g.KW - j, c = chunk * g.cc + cl;
      return m < g.M && r < chunk_terms && c < g.C && q >= 0 && q < g.K
                 ? __ldg(k + ((std::int64_t{m} * g.C + c) * g.K + p) * g.K + q)
                 : 0.0f;
    };
    const int r = 8 * s + lane % 4;
    uint4 f;
    split_tf32(value(r), f.x, f.z);
    split_tf32(value(r + 4), f.y, f.w);
    out[i] = f;
  }
}

template <int NT>
__global__ void __launch_bounds__(kBandThreads, 2)
    conv_best_band_kernel(float* __restrict__ y, const float* __restrict__ x,
                          const uint4* __restrict__ split_filters, const BandGeometry g) {
  extern __shared__ float4 smem4[];
  auto* smem = reinterpret_cast<unsigned char*>(smem4);
  auto* filters = reinterpret_cast<uint4*>(smem);
  auto* stages = reinterpret_cast<float*>(smem + g.stage_offset(NT));
  auto* terms = reinterpret_cast<int2*>(smem + g.table_offset(NT));
  int* in_stage = reinterpret_cast<int*>(terms + g.steps * 4);  // bytes from the chunk's start
  int* in_y = in_stage + g.tile_rows;                           // floats from the tile's y
  int* room = in_y + g.tile_rows;                               // outputs left in y's row
  const int tid = static_cast<int>(threadIdx.x);

  // This tile: images [b0, b0 + images) from output row h0, its first `rows` rows of A.
  const int tile = static_cast<int>(blockIdx.x);
  const int b0 = tile / g.bands * g.images, h0 = tile % g.bands * g.rows_out;
  const int images = min(g.images, g.B - b0), out_rows = min(g.rows_out, g.H_out - h0);
  const int rows = images * out_rows * g.W_rows, rows_in = out_rows + g.K - 1;
  // This part's channels.
  const int c_begin = static_cast<int>(blockIdx.y) * g.c_part;
  const int chunks = ceil_div(min(g.C, c_begin + g.c_part) - c_begin, g.cc);
  const int chunk0 = c_begin / g.cc;  // the first chunk's index in split_filters
  y += blockIdx.y * g.part_floats + (std::int64_t{b0} * g.M * g.P + std::int64_t{h0} * g.W_out);

  const int chunk_floats = g.steps * NT * 32 * 4, staged = rows_in * g.W;
  const int segment = g.shift > 1 ? g.plane : staged;  // with the zeros after the rows
  const auto issue = [&](int j) {
    const int buffer = j & 1;
    const float* f_src =
        reinterpret_cast<const float*>(split_filters) + std::int64_t{chunk0 + j} * chunk_floats;
    float* f_dst = reinterpret_cast<float*>(filters) + buffer * chunk_floats;
    for (int i = 4 * tid; i < chunk_floats; i += 4 * kBandThreads) {
      cp_async16(f_dst + i, f_src + i, true);
    }
    // Staged: [image][channel of the chunk][plane]; channels past C are zeros.
    float* s_dst = stages + buffer * g.stage_floats;
    const int c0 = c_begin + j * g.cc, total = images * g.cc * segment;
    const int step = g.vector_copy ? 4 : 1;
    for (int i = step * tid; i < total; i += step * kBandThreads) {
      const int seg = i / segment, at = i - seg * segment;
      const int image = seg / g.cc, c = c0 + seg - image * g.cc;
      const bool valid = c < g.C && at < staged;
      const float* src =
          valid ? x + (std::int64_t{b0 + image} * g.C + c) * g.H * g.W + std::int64_t{h0} * g.W + at
                : x;
      float* dst = s_dst + seg * g.plane + at;
      if (g.vector_copy) {
        cp_async16(dst, src, valid);
      } else {
        cp_async4(dst, src, valid);
      }
    }
    cp_async_commit();
  };
  issue(0);
  // While it is on its way: the terms and the rows of A. Past the chunk's terms: the row's own
  // pixel, times a zero filter.
  for (int i = tid; i < g.steps * 4; i += kBandThreads) {
    const auto term = [&](int r) { return r < g.chunk_terms() ? 4 * band_term_offset(r, g) : 0; };
    const int r = i / 4 * 8 + i % 4;
    terms[i] = {term(r), term(r + 4)};
  }
  for (int q = tid; q < g.tile_rows; q += kBandThreads) {
    const int per_image = g.rows_out * g.W_rows;
    const int image = q / per_image, a = q - image * per_image, h = a / g.W_rows;
    const int w = (a - h * g.W_rows) * g.shift;
    in_stage[q] = 4 * (image * g.cc * g.plane + h * g.W + w);
    in_y[q] = image * g.M * g.P + h * g.W_out + w;
    room[q] = g.W_out - w;
  }

  const int warp = tid / 32, lane = tid % 32, gq = lane / 4, tq = lane % 4;
  // Task t of this warp: rows first[t] + 16f + 8h + gq of A (past the tile: its last row,
  // computed and not stored).
  int first[kBandTasks];
#pragma unroll
  for (int t = 0; t < kBandTasks; ++t) first[t] = (t * kBandWarps + warp) * 32;
  // The tile's row of A that this lane's fragment f of task t holds in its half h.
  const auto row = [&](int t, int f, int h) { return first[t] + 16 * f + 8 * h + gq; };
  float acc[kBandTasks][2][NT][4] = {};
  for (int j = 0; j < chunks; ++j) {
    if (j + 1 < chunks) {
      issue(j + 1);
      cp_async_wait<1>();
    } else {
      cp_async_wait<0>();
    }
    __syncthreads();  // chunk j (and, the first time, the tables) are in
    const unsigned stage = shared_address(stages + (j & 1) * g.stage_floats);
    unsigned at[kBandTasks][2][2];
#pragma unroll
    for (int t = 0; t < kBandTasks; ++t) {
#pragma unroll
      for (int f = 0; f < 2; ++f) {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          at[t][f][h] = stage + in_stage[min(row(t, f, h), rows - 1)];
        }
      }
    }
    const uint4* f_step = filters + (j & 1) * (g.steps * NT * 32) + lane;
#pragma unroll 1
    for (int s = 0; s < g.steps; ++s, f_step += NT * 32) {
      const int2 o = terms[4 * s + tq];
      uint4 b[NT];
#pragma unroll
      for (int n = 0; n < NT; ++n) b[n] = f_step[n * 32];
      // Both tasks' fragments in one step, or the first task's alone on a short tile whose
      // second task is past its rows (the warp as one).
      if (first[1] < rows) {
        staged_step_3xtf32(reinterpret_cast<float(&)[2 * kBandTasks][NT][4]>(acc),
                           reinterpret_cast<const unsigned(&)[2 * kBandTasks][2]>(at), o, b);
      } else if (first[0] < rows) {
        staged_step_3xtf32(acc[0], at[0], o, b);
      }
    }
    __syncthreads();  // this buffer is no longer read: chunk j + 2 may go into it
  }
  // acc[t][f][n]: rows q (elements 0, 1) and q + 8 (2, 3) of columns 8n + 2tq (+1), column
  // (m, j) output w + j of map m.
#pragma unroll
  for (int t = 0; t < kBandTasks; ++t) {
#pragma unroll
    for (int f = 0; f < 2; ++f) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int q = row(t, f, h);
        if (q >= rows) continue;
        float* out = y + in_y[q];
        const int left = room[q];
#pragma unroll
        for (int n = 0; n < NT; ++n) {
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            const int column = 8 * n + 2 * tq + e, m = column >> g.shift_log;
            const int j = column & (g.shift - 1);
            if (m < g.M && j < left) out[std::int64_t{m} * g.P + j] = acc[t][f][n][2 * h + e];
          }
        }
      }
    }
  }
}

// Tiles of `images` whole images (of bands of rows when 1 and an image has too many rows of A),
// and the most channels per chunk that fit beside them: cc and steps, tiles 0 where none does.
BandGeometry band_tiles(BandGeometry g, int images) {
  const int rows_per_image = g.H_out * g.W_rows;
  g.images = images;
  g.rows_out = images > 1 || 2 * rows_per_image <= kBandOutputs
                   ? g.H_out
                   : std::min(g.H_out, kBandOutputs / g.W_rows);
  g.rows_in = g.rows_out + g.K - 1;
  g.bands = ceil_div(g.H_out, g.rows_out);
  g.tile_rows = images * g.rows_out * g.W_rows;
  g.tiles = std::int64_t{ceil_div(g.B, images)} * g.bands;
  g.plane = g.rows_in * g.W + (g.shift > 1 ? 8 : 0);
  // The most channels per chunk that fit (a chunk's sum at most kBandMaxTerms), then as many
  // chunks of as even a size (a last chunk of a few channels would pad its steps with zeros).
  g.c_part = g.C;
  const int most = std::min({g.C, kBandMaxChunk, std::max(1, kBandMaxTerms / (g.K * g.KW))});
  for (int c = most; c >= 1; --c) {
    g.cc = ceil_div(g.C, ceil_div(g.C, c));
    g.steps = ceil_div(g.chunk_terms(), 8);
    g.stage_floats = ceil_div(images * g.cc * g.plane, 4) * 4;
    if (g.bytes(g.frags()) <= kBandSharedMax) return g;
  }
  g.tiles = 0;
  return g;
}

// The band route's geometry; tiles 0 where it does not take the shape: C = 1 (the C = 1
// kernels), K = 1 (run_pointwise), more than 32 maps (the GEMMs), sums under kBandMinTerms
// terms, rows wider than a tile, and up to 4 maps where the shifted filters are slower
// (K up to 4, or 3 maps up to 7x7).
BandGeometry band_geometry(const ConvShape& s) {
  BandGeometry g{};
  g.B = s.B;
  g.C = s.C;
  g.M = s.M;
  g.K = s.K;
  g.H = s.H;
  g.W = s.W;
  g.H_out = s.H_out();
  g.W_out = s.W_out();
  g.P = g.H_out * g.W_out;
  g.shift_log = s.M == 1 ? 3 : s.M == 2 ? 2 : s.M <= 4 ? 1 : 0;
  g.shift = 1 << g.shift_log;
  g.KW = s.K + g.shift - 1;
  g.W_rows = ceil_div(g.W_out, g.shift);
  // Up to 4 maps with filters the tiled kernels take: from K = 5 on, with B's columns full
  // (1, 2 or 4 maps); otherwise the earlier routes are faster (see the file's header).
  const bool stream_faster = s.M <= 4 && s.K <= kMaxK && (s.K < 5 || s.M == 3);
  if (s.C == 1 || s.K == 1 || g.frags() > kImageMaxMapFrags || s.C * s.K * s.K < kBandMinTerms ||
      g.W_rows > kBandOutputs || stream_faster) {
    return g;
  }
  // Whole images per tile where two or more fit, else bands of rows. Of the image counts
  // tried (the most, then halves), the one that keeps the most work between two barriers:
  // the tile's rows of A (its warps' use) times its chunk's terms, each up to kBandOutputs.
  const int rows_per_image = g.H_out * g.W_rows;
  const int most_images =
      2 * rows_per_image <= kBandOutputs ? std::min(s.B, kBandOutputs / rows_per_image) : 1;
  BandGeometry best = g;
  best.tiles = 0;
  double best_work = 0.0;
  for (int images = most_images; images >= 1; images /= 2) {
    const BandGeometry t = band_tiles(g, images);
    const double work = static_cast<double>(std::min(t.tile_rows, kBandOutputs)) *
                        std::min(t.chunk_terms(), kBandOutputs);
    if (t.tiles > 0 && work > best_work) best = t, best_work = work;
  }
  return best;
}

template <int NT>
void launch_band(float* y, const float* x, const uint4* filters, const BandGeometry& g, int parts,
                 cudaStream_t stream) {
  const auto kernel = conv_best_band_kernel<NT>;
  allow_dynamic_shared_memory(kernel, g.bytes(NT), "conv_best");
  kernel<<<dim3(static_cast<unsigned>(g.tiles), parts), kBandThreads,
           static_cast<std::size_t>(g.bytes(NT)), stream>>>(y, x, filters, g);
  CUDA_CHECK_LAUNCH();
}

}  // namespace

bool band_takes(const ConvShape& s) {
  return band_geometry(s).tiles > 0;
}

// The band route for a plain conv; false (nothing launched) where band_geometry declines or the
// filters' workspace cannot be had. Grids under two blocks per SM split the sum by chunks of
// channels (run_channel_parts).
bool run_band(float* y, const float* x, const float* k, const ConvShape& s, cudaStream_t stream) {
  BandGeometry g = band_geometry(s);
  if (g.tiles == 0) return false;
  const int NT = g.frags(), chunks = ceil_div(s.C, g.cc);
  const std::int64_t quads = std::int64_t{chunks} * g.steps * NT * 32;
  auto* filters =
      static_cast<uint4*>(pool_workspace(static_cast<std::size_t>(quads) * sizeof(uint4), stream));
  if (filters == nullptr) return false;
  conv_best_band_filters_kernel<<<grid_stride_blocks(quads, 256, kFallbackMaxBlocks), 256, 0,
                                  stream>>>(filters, k, g, NT, quads);
  CUDA_CHECK_LAUNCH();
  g.vector_copy = s.W % 4 == 0 && reinterpret_cast<std::uintptr_t>(x) % 16 == 0;
  const auto launch = [&](float* out, int parts, int c_part, std::int64_t stride) {
    BandGeometry part = g;
    part.c_part = c_part;
    part.part_floats = stride;
    dispatch_map_frags(NT, [&](auto frags) {
      launch_band<decltype(frags)::value>(out, x, filters, part, parts, stream);
    });
  };
  // Parts: to fill the SMs where the grid is small, and to keep each chain of products at
  // most kBandMaxTerms long.
  const int chain_chunks = std::max(1, kBandMaxTerms / g.chunk_terms());
  const int parts = std::min(
      std::max(channel_parts(s.C, s.K, g.tiles, 2), ceil_div(chunks, chain_chunks)), chunks);
  if (parts < 2 || !run_channel_parts(y, s.y_elements(), s.C, parts, stream, launch, g.cc)) {
    launch(y, 1, s.C, 0);
  }
  CUDA_CHECK(cudaFreeAsync(filters, stream));
  return true;
}

}  // namespace convlab::solution::best
