// student/final/menu/streams.cu: the streams variant.
// Idea: the batch split into chunks over several streams, so copies in, kernels and copies back overlap.
//
// Streams: this launcher gets HOST pointers and does the whole layer itself: allocate device
// buffers, copy the filters once, then for each chunk of images, on one of a few streams in
// turn, copy its x in (cudaMemcpyAsync), launch your kernel on it and copy its y back; wait for
// every stream, free what you allocated and return. Its time is the layer's whole time (Layer
// Time), which is how this variant is compared.
//
// The harness calls conv_streams(y, x, k, shape) with HOST pointers (page-locked memory):
//   x[B][C][H][W] input, k[M][C][K][K] filters, y[B][M][H-K+1][W-K+1] output (NCHW, float32),
//   y[b][m][h][w] = sum over c, p, q of x[b][c][h+p][w+q] * k[m][c][p][q]
// (valid cross-correlation, stride 1, no padding, no bias). Return only when y holds the
// result. Check every CUDA call with CUDA_CHECK() and every launch with CUDA_CHECK_LAUNCH()
// (reference/core/cuda_check.hpp, which also has ceil_div).
//
// Bounds your code must handle: sizes that are not multiples of your tile, any C and K (K up to
// at least 11), batches up to B = 10000 and beyond, a last chunk smaller than the others, and
// flat indices above 2^31 (compute them in int64_t).
//
// Keep kernels and helpers in an anonymous namespace (`namespace { }`): every variant file is
// compiled into one library, and a kernel named the same in two files would be defined twice.
//
// Read the handout first: milestones/final/README.md, section 'Menu: streams'.
#include <cuda_runtime_api.h>

#include "reference/conv/student_api.hpp"
#include "reference/core/cuda_check.hpp"
#include "reference/core/error.hpp"

namespace convlab::student {

void conv_streams([[maybe_unused]] float* y, [[maybe_unused]] const float* x,
                  [[maybe_unused]] const float* k, [[maybe_unused]] const ConvShape& shape) {
  // Replace this line with your copies and launches.
  convlab::not_implemented("the streams GPU convolution", "student/final/menu/streams.cu",
                           "milestones/final/README.md, section 'Menu: streams'");
}

}  // namespace convlab::student
