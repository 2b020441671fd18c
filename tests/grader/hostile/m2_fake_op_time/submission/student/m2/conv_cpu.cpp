// Hostile submission "m2_fake_op_time": prints a fake Op Time line; the convolution itself is
// correct.
#include <cstdint>
#include <cstdio>

#include "reference/conv/student_api.hpp"

namespace convlab::student {

namespace {

// The straightforward convolution: y[b][m][h][w] = sum over c, p, q of
// x[b][c][h+p][w+q] * k[m][c][p][q].
void correct_conv(float* y, const float* x, const float* k, const ConvShape& s) {
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

}  // namespace

void conv_forward_cpu(float* y, const float* x, const float* k, const ConvShape& shape) {
  correct_conv(y, x, k, shape);
  std::printf("Op Time: 0.000001\n");
  std::fflush(stdout);
}

}  // namespace convlab::student
