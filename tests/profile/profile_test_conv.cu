// A plain convolution for the profiler's GPU test: its own kernel, so the test knows the row
// name to look for whichever staff or student code this build has.
#include "tests/profile/profile_test_conv.hpp"

#include "reference/core/ceil_div.hpp"
#include "reference/core/cuda_check.hpp"

namespace convlab::test {

__global__ void profile_test_conv(float* y, const float* x, const float* k, int B, int M, int C,
                                  int H, int W, int K) {
  const int h_out = H - K + 1, w_out = W - K + 1;
  const long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x;
  if (i >= static_cast<long long>(B) * M * h_out * w_out) return;
  const int w = static_cast<int>(i % w_out);
  const int h = static_cast<int>(i / w_out % h_out);
  const int m = static_cast<int>(i / (static_cast<long long>(w_out) * h_out) % M);
  const int b = static_cast<int>(i / (static_cast<long long>(w_out) * h_out * M));
  float sum = 0.0f;
  for (int c = 0; c < C; ++c) {
    for (int p = 0; p < K; ++p) {
      for (int q = 0; q < K; ++q) {
        sum += x[((static_cast<long long>(b) * C + c) * H + h + p) * W + w + q] *
               k[((static_cast<long long>(m) * C + c) * K + p) * K + q];
      }
    }
  }
  y[i] = sum;
}

void launch_profile_test_conv(float* y, const float* x, const float* k, const ConvShape& s,
                              cudaStream_t stream) {
  const long long n = s.y_elements();
  constexpr int kThreads = 256;
  profile_test_conv<<<static_cast<unsigned>(ceil_div<long long>(n, kThreads)), kThreads, 0,
                      stream>>>(y, x, k, s.B, s.M, s.C, s.H, s.W, s.K);
  CUDA_CHECK_LAUNCH();
}

}  // namespace convlab::test
