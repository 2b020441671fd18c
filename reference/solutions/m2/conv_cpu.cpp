// Staff solution of milestone m2: the seven loops of the textbook, in the order written
// there, with two choices a student can copy: the sum is kept in a local variable (one store
// per output instead of C*K*K), and index arithmetic is hoisted out of the inner loops.

#include <cstdint>

#include "reference/conv/student_api.hpp"

namespace convlab::solution {

void conv_forward_cpu(float* y, const float* x, const float* k, const ConvShape& s) {
  const int ho = s.H_out(), wo = s.W_out();
  for (std::int64_t b = 0; b < s.B; ++b) {
    for (int m = 0; m < s.M; ++m) {
      for (int h = 0; h < ho; ++h) {
        for (int w = 0; w < wo; ++w) {
          float sum = 0.0f;
          for (int c = 0; c < s.C; ++c) {
            const float* xc = x + ((b * s.C + c) * s.H + h) * s.W + w;
            const float* kc = k + (std::int64_t{m} * s.C + c) * s.K * s.K;
            for (int p = 0; p < s.K; ++p) {
              for (int q = 0; q < s.K; ++q) sum += xc[p * s.W + q] * kc[p * s.K + q];
            }
          }
          y[((b * s.M + m) * ho + h) * wo + w] = sum;
        }
      }
    }
  }
}

}  // namespace convlab::solution
