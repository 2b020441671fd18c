/// @file
/// @brief A seeded random number source built only on std::mt19937's raw output.
///
/// The standard fixes mt19937's output sequence but not how std:: distributions turn it into
/// numbers, so the trainer derives every value itself: a seed then gives the same numbers with
/// any standard library.
#pragma once

#include <cstdint>
#include <random>

namespace convlab::tools {

/// Deterministic random numbers from a 32-bit seed.
class Rng {
 public:
  /// A generator seeded with `seed`.
  explicit Rng(std::uint32_t seed) : engine_(seed) {}

  /// The next raw 32-bit output.
  std::uint32_t next() { return static_cast<std::uint32_t>(engine_()); }

  /// Uniform in [0, 1) on a grid of 2^-24 (every value exact in float).
  float uniform() { return static_cast<float>(next() >> 8) * 0x1p-24f; }

  /// Uniform in [-a, a).
  float symmetric(float a) { return (2.0f * uniform() - 1.0f) * a; }

  /// Uniform integer in [0, n) for n >= 1, without bias (rejects the top partial block).
  std::uint32_t below(std::uint32_t n) {
    const std::uint64_t range = std::uint64_t{1} << 32;
    const std::uint64_t limit = range - range % n;
    for (;;) {
      const std::uint64_t r = next();
      if (r < limit) return static_cast<std::uint32_t>(r % n);
    }
  }

 private:
  std::mt19937 engine_;
};

}  // namespace convlab::tools
