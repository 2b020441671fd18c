// Hostile submission "m2_memory_hog": 6 GB touched, a page at a time.
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <vector>

#include "reference/conv/student_api.hpp"

namespace convlab::student {

void conv_forward_cpu(float* y, const float* x, const float* k, const ConvShape& s) {
  (void)x, (void)k;
  std::vector<std::unique_ptr<char[]>> blocks;
  for (int mib = 64; mib <= 6144; mib += 64) {
    blocks.emplace_back(new char[64u << 20]);
    std::memset(blocks.back().get(), 1, 64u << 20);
    std::fprintf(stderr, "memory-hog: %d MiB\n", mib);
  }
  const std::int64_t n = std::int64_t{s.B} * s.M * s.H_out() * s.W_out();
  std::memset(y, 0, static_cast<std::size_t>(n) * sizeof(float));
}

}  // namespace convlab::student
