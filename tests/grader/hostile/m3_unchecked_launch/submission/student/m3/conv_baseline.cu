// Hostile submission "m3_unchecked_launch": a correct kernel launched with 2048 threads per block
// (the limit is 1024), and the launch is never checked.
#include <cuda_runtime_api.h>

#include <cstdint>

#include "reference/conv/student_api.hpp"
#include "reference/core/cuda_check.hpp"

namespace convlab::student {

namespace {

__global__ void conv_kernel(float* y, const float* x, const float* k, ConvShape s) {
  const int h_out = s.H_out(), w_out = s.W_out();
  const std::int64_t i = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x;
  if (i >= s.y_elements()) return;
  const int w = static_cast<int>(i % w_out);
  const int h = static_cast<int>(i / w_out % h_out);
  const int m = static_cast<int>(i / (std::int64_t{w_out} * h_out) % s.M);
  const std::int64_t b = i / (std::int64_t{w_out} * h_out * s.M);
  float acc = 0.0f;
  for (int c = 0; c < s.C; ++c) {
    for (int p = 0; p < s.K; ++p) {
      for (int q = 0; q < s.K; ++q) {
        acc += x[((b * s.C + c) * s.H + h + p) * s.W + w + q] *
               k[((std::int64_t{m} * s.C + c) * s.K + p) * s.K + q];
      }
    }
  }
  y[i] = acc;
}

}  // namespace

void conv_baseline(float* y, const float* x, const float* k, const ConvShape& shape,
                   cudaStream_t stream) {
  const int threads = 2048;  // the bug: more than a block may hold
  const auto blocks = static_cast<unsigned>(ceil_div<std::int64_t>(shape.y_elements(), threads));
  conv_kernel<<<blocks, threads, 0, stream>>>(y, x, k, shape);
  // No CUDA_CHECK_LAUNCH(): the launch error is left for someone else to find.
}

}  // namespace convlab::student
