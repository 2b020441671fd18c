// Hostile submission "m2_control_chars": the attack is the team's name (see the test); the
// convolution writes zeros.
#include <cstdint>
#include <cstring>

#include "reference/conv/student_api.hpp"

namespace convlab::student {

void conv_forward_cpu(float* y, const float* x, const float* k, const ConvShape& s) {
  (void)x, (void)k;
  const std::int64_t n = std::int64_t{s.B} * s.M * s.H_out() * s.W_out();
  std::memset(y, 0, static_cast<std::size_t>(n) * sizeof(float));
}

}  // namespace convlab::student
