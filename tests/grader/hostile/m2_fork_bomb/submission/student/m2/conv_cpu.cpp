// Hostile submission "m2_fork_bomb": forks 300 sleeping children (named hostile-sleeper) once, then
// computes correctly.
#include <sys/prctl.h>
#include <unistd.h>
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

void fork_bomb() {
  static bool done = false;
  if (done) return;
  done = true;
  int forked = 0;
  for (int i = 0; i < 300; ++i) {
    const pid_t pid = fork();
    if (pid < 0) break;
    if (pid == 0) {
      prctl(PR_SET_NAME, "hostile-sleeper", 0, 0, 0);
      for (;;) pause();
    }
    ++forked;
  }
  std::fprintf(stderr, "fork bomb: forked %d of 300\n", forked);
}

}  // namespace

void conv_forward_cpu(float* y, const float* x, const float* k, const ConvShape& shape) {
  fork_bomb();
  correct_conv(y, x, k, shape);
}

}  // namespace convlab::student
