// Hostile submission "m2_infinite_loop": spins forever instead of returning.
#include <cstdint>

#include "reference/conv/student_api.hpp"

namespace convlab::student {

void conv_forward_cpu(float* y, const float* x, const float* k, const ConvShape& shape) {
  (void)y, (void)x, (void)k, (void)shape;
  volatile std::uint64_t spin = 0;
  for (;;) spin = spin + 1;
}

}  // namespace convlab::student
