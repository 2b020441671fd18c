// The best kernel's routes, as 5_best.cu's tables list them: each launches its kernels and
// returns true where it takes the shape, or launches nothing and returns false. The _pooled
// ones compute conv + tanh + 2x2 stride-2 max-pool.
#pragma once

#include <cuda_runtime_api.h>

#include "reference/conv/student_api.hpp"

namespace convlab::solution::best {

// K = 1 with C > 1 and at most 16 maps, read once for all maps (pointwise.cu).
bool run_pointwise(float* y, const float* x, const float* k, const ConvShape& s,
                   cudaStream_t stream);
bool pointwise_takes(const ConvShape& s);
// C > 1, 5 to 32 maps, whole images staged in shared memory, 3xTF32 (image.cu).
bool run_image(float* y, const float* x, const float* k, const ConvShape& s, cudaStream_t stream);
bool run_image_pooled(float* y, const float* x, const float* k, const ConvShape& s,
                      cudaStream_t stream);
bool image_takes(const ConvShape& s);
// Hopper, K = 3, 64 to 1024 channels, 64 maps or more: Winograd F(4x4, 3x3) (winograd.cu).
bool run_winograd(float* y, const float* x, const float* k, const ConvShape& s,
                  cudaStream_t stream);
// Hopper, C > 1, more than 32 maps: the producer-consumer GEMM (gemm_ws.cu).
bool run_gemm_ws(float* y, const float* x, const float* k, const ConvShape& s, cudaStream_t stream);
// C > 1, up to 32 maps, long sums on large images: bands of rows, channels in chunks (band.cu).
bool run_band(float* y, const float* x, const float* k, const ConvShape& s, cudaStream_t stream);
bool band_takes(const ConvShape& s);
// C > 1 (and filters above 7x7): the implicit GEMM, 3xTF32 on mma.sync (gemm.cu).
bool run_gemm(float* y, const float* x, const float* k, const ConvShape& s, cudaStream_t stream);
// Hopper, C = 1, 41 to 64 maps a block, K = 5 to 7: wgmma, 3xTF32 (c1_wgmma.cu).
bool run_c1_wgmma(float* y, const float* x, const float* k, const ConvShape& s,
                  cudaStream_t stream);
bool run_c1_wgmma_pooled(float* y, const float* x, const float* k, const ConvShape& s,
                         cudaStream_t stream);
// Fused, C = 1, K = 5, 25 to 64 maps: three fp16 products of scaled values (c1_half.cu).
bool run_c1_half(float* y, const float* x, const float* k, const ConvShape& s, cudaStream_t stream);
// K <= 7: C = 1 with the patch in registers, else channels streamed (tiled.cu).
bool run_tiled(float* y, const float* x, const float* k, const ConvShape& s, cudaStream_t stream);
bool run_tiled_pooled(float* y, const float* x, const float* k, const ConvShape& s,
                      cudaStream_t stream);

// Every plain route but the one-thread kernel, in the table's order (5_best.cu).
bool run_plain(float* y, const float* x, const float* k, const ConvShape& s, cudaStream_t stream);
// Fused, any pool: run_plain into a workspace, then tanh and max-pool (conv_then_pool.cu).
bool run_conv_then_pool(float* y, const float* x, const float* k, const ConvShape& s,
                        const PoolShape& pool, cudaStream_t stream);
// Every shape: one thread per output, or per pooled output (fallback.cu).
void run_fallback(float* y, const float* x, const float* k, const ConvShape& s,
                  cudaStream_t stream);
void run_fallback_pooled(float* y, const float* x, const float* k, const ConvShape& s,
                         const PoolShape& pool, cudaStream_t stream);

}  // namespace convlab::solution::best
