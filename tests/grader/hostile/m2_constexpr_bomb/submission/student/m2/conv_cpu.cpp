// Hostile submission "m2_constexpr_bomb": a compile-time table far too large to evaluate.
#include <array>
#include <cstdint>
#include <cstring>

#include "reference/conv/student_api.hpp"

namespace convlab::student {

namespace {

constexpr std::size_t kInner = 1u << 14;
constexpr std::size_t kOuter = 1u << 14;

// Each element a distinct value: the compiler keeps one node per element while evaluating.
constexpr std::array<std::uint32_t, kInner * kOuter> make_table() {
  std::array<std::uint32_t, kInner * kOuter> t{};
  for (std::size_t i = 0; i < kOuter; ++i) {
    for (std::size_t j = 0; j < kInner; ++j)
      t[i * kInner + j] = static_cast<std::uint32_t>(i * kInner + j);
  }
  return t;
}

constexpr auto kTable = make_table();

}  // namespace

void conv_forward_cpu(float* y, const float* x, const float* k, const ConvShape& s) {
  (void)x, (void)k;
  const std::int64_t n = std::int64_t{s.B} * s.M * s.H_out() * s.W_out();
  std::memset(y, 0, static_cast<std::size_t>(n) * sizeof(float));
  y[0] = static_cast<float>(kTable[kTable.size() - 1]);
}

}  // namespace convlab::student
