// Hostile submission "m2_cudnn_call": declares and calls cuDNN functions without including its
// header, then computes the convolution itself.
#include <cstdint>

#include "reference/conv/student_api.hpp"

extern "C" int cudnnCreate(void** handle);
extern "C" int cudnnDestroy(void* handle);

namespace convlab::student {

void conv_forward_cpu(float* y, const float* x, const float* k, const ConvShape& s) {
  void* handle = nullptr;
  if (cudnnCreate(&handle) == 0) cudnnDestroy(handle);
  const int h_out = s.H_out(), w_out = s.W_out();
  for (int b = 0; b < s.B; ++b) {
    for (int m = 0; m < s.M; ++m) {
      for (int h = 0; h < h_out; ++h) {
        for (int w = 0; w < w_out; ++w) {
          float acc = 0.0f;
          for (int c = 0; c < s.C; ++c) {
            for (int p = 0; p < s.K; ++p) {
              for (int q = 0; q < s.K; ++q) {
                acc += x[((std::int64_t{b} * s.C + c) * s.H + h + p) * s.W + w + q] *
                       k[((std::int64_t{m} * s.C + c) * s.K + p) * s.K + q];
              }
            }
          }
          y[((std::int64_t{b} * s.M + m) * h_out + h) * w_out + w] = acc;
        }
      }
    }
  }
}

}  // namespace convlab::student
