// Hostile submission "m2_constexpr_bomb": a constant expression that takes the compiler gigabytes.
#include <cstdint>
#include <cstring>

#include "reference/conv/student_api.hpp"

namespace convlab::student {

namespace {

// Every (N, M) a new instantiation: 2^27 of them for leaf<27, 1>.
template <int N, unsigned M>
constexpr unsigned leaf() {
  if constexpr (N == 0) {
    return M;
  } else {
    return leaf<N - 1, 2 * M>() + leaf<N - 1, 2 * M + 1>();
  }
}

constexpr unsigned kValue = leaf<27, 1>();

}  // namespace

void conv_forward_cpu(float* y, const float* x, const float* k, const ConvShape& s) {
  (void)x, (void)k;
  const std::int64_t n = std::int64_t{s.B} * s.M * s.H_out() * s.W_out();
  std::memset(y, 0, static_cast<std::size_t>(n) * sizeof(float));
  y[0] = static_cast<float>(kValue);
}

}  // namespace convlab::student
