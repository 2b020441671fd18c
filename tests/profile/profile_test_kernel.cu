// The profiler GPU test's kernel in the conv layer's place: a copy, not a convolution (the kit
// holds none outside the library; the test checks the profile, not the network's answers).
#include "tests/profile/profile_test_kernel.hpp"

#include "reference/core/ceil_div.hpp"
#include "reference/core/cuda_check.hpp"

namespace convlab::test {

// Every output map gets the top-left H_out x W_out corner of the image's first channel.
__global__ void profile_test_kernel(float* y, const float* x, const float* /*k*/, int B, int M,
                                    int C, int H, int W, int K) {
  const int h_out = H - K + 1, w_out = W - K + 1;
  const long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x;
  if (i >= static_cast<long long>(B) * M * h_out * w_out) return;
  const int w = static_cast<int>(i % w_out);
  const int h = static_cast<int>(i / w_out % h_out);
  const long long b = i / (static_cast<long long>(w_out) * h_out * M);
  y[i] = x[(b * C * H + h) * W + w];
}

void launch_profile_test_kernel(float* y, const float* x, const float* k, const ConvShape& s,
                                cudaStream_t stream) {
  const long long n = s.y_elements();
  constexpr int kThreads = 256;
  profile_test_kernel<<<static_cast<unsigned>(ceil_div<long long>(n, kThreads)), kThreads, 0,
                        stream>>>(y, x, k, s.B, s.M, s.C, s.H, s.W, s.K);
  CUDA_CHECK_LAUNCH();
}

}  // namespace convlab::test
