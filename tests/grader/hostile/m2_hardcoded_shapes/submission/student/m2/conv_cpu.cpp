// Hostile submission "m2_hardcoded_shapes": ignores shape.C and shape.K and assumes the ece408
// layer (C = 1, K = 5).
#include <cstdint>

#include "reference/conv/student_api.hpp"

namespace convlab::student {

namespace {

// The ece408 layer, taken for granted.
constexpr int kC = 1, kK = 5;

}  // namespace

void conv_forward_cpu(float* y, const float* x, const float* k, const ConvShape& shape) {
  const int h_out = shape.H - kK + 1, w_out = shape.W - kK + 1;
  for (int b = 0; b < shape.B; ++b) {
    for (int m = 0; m < shape.M; ++m) {
      for (int h = 0; h < h_out; ++h) {
        for (int w = 0; w < w_out; ++w) {
          float acc = 0.0f;
          for (int p = 0; p < kK; ++p) {
            for (int q = 0; q < kK; ++q) {
              acc += x[(std::int64_t{b} * kC * shape.H + h + p) * shape.W + w + q] *
                     k[(std::int64_t{m} * kC * kK + p) * kK + q];
            }
          }
          y[((std::int64_t{b} * shape.M + m) * h_out + h) * w_out + w] = acc;
        }
      }
    }
  }
}

}  // namespace convlab::student
