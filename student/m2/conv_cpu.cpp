// Milestone m2: the convolution on the CPU.
//
// Write the forward convolution as the seven nested loops of the textbook (chapter 16):
// over images b, output maps m, output rows h and columns w, input channels c, and filter
// rows p and columns q:
//
//     y[b][m][h][w] = sum over c, p, q of x[b][c][h + p][w + q] * k[m][c][p][q]
//
// Sizes come in `shape` (B, M, C, H, W, K); the output is (H - K + 1) x (W - K + 1), and every
// array is a flat row-major (NCHW) buffer in host memory, so x[b][c][h][w] is
//     x[((b * C + c) * H + h) * W + w].
// The harness times this call (Op Time) and checks the network's correctness. It sends the
// images through the network in chunks, so one call gets B <= 128 images (Op Time adds the
// calls up), and it fills y with NaN before each call, so write every output element.
//
// Run:   convlab run m2 ece408-high 10000      (handout: milestones/m2/README.md)

#include "reference/conv/student_api.hpp"
#include "reference/core/error.hpp"

namespace convlab::student {

void conv_forward_cpu(float* y, const float* x, const float* k, const ConvShape& shape) {
  (void)y;
  (void)x;
  (void)k;
  (void)shape;
  // Replace this line with your seven loops.
  not_implemented("the m2 CPU convolution", "student/m2/conv_cpu.cpp",
                  "milestones/m2/README.md, section 'What you write'");
}

}  // namespace convlab::student
