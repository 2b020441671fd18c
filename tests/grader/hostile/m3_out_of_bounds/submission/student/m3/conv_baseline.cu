// Hostile submission "m3_out_of_bounds": a correct baseline kernel, except that one thread also
// writes 4096 floats past the end of y.
#include <cuda_runtime_api.h>

#include <cstdint>

#include "reference/conv/student_api.hpp"
#include "reference/core/cuda_check.hpp"

namespace convlab::student {

namespace {

__global__ void conv_kernel(float* y, const float* x, const float* k, ConvShape s) {
  const int h_out = s.H_out(), w_out = s.W_out();
  const std::int64_t total = s.y_elements();
  const std::int64_t i = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x;
  if (i == 0) y[total + 4096] = 1.0f;  // the bug: outside the buffer
  if (i >= total) return;
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
  const std::int64_t total = shape.y_elements();
  const int threads = 256;
  const auto blocks = static_cast<unsigned>(ceil_div<std::int64_t>(total, threads));
  conv_kernel<<<blocks, threads, 0, stream>>>(y, x, k, shape);
  CUDA_CHECK_LAUNCH();
}

}  // namespace convlab::student
