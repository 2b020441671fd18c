/// @file
/// @brief An 8-lane float vector (GCC/Clang vector extension) for the CPU reference kernels.
///
/// The compiler maps it to AVX/AVX2 when the build targets them and to pairs of SSE
/// registers otherwise, so the code stays portable C++ with predictable vectorisation.
#pragma once

#include <cstring>

namespace convlab::cpu {

/// Eight floats operated on lane by lane.
typedef float v8f __attribute__((vector_size(32)));
/// Eight 32-bit integers (lane masks and exponent bits).
typedef int v8i __attribute__((vector_size(32)));

/// Unaligned load of 8 floats.
inline v8f load8(const float* p) {
  v8f v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

/// Unaligned store of 8 floats.
inline void store8(float* p, v8f v) {
  std::memcpy(p, &v, sizeof v);
}

/// All lanes set to s.
inline v8f splat8(float s) {
  return v8f{s, s, s, s, s, s, s, s};
}

/// The bits of a float vector as integers (and back): a copy the compiler turns into nothing.
inline v8i bits_of(v8f v) {
  v8i r;
  std::memcpy(&r, &v, sizeof r);
  return r;
}
/// Floats whose bits are `v`.
inline v8f floats_of(v8i v) {
  v8f r;
  std::memcpy(&r, &v, sizeof r);
  return r;
}

/// Sum of the 8 lanes.
inline float hsum8(v8f v) {
  return ((v[0] + v[1]) + (v[2] + v[3])) + ((v[4] + v[5]) + (v[6] + v[7]));
}

}  // namespace convlab::cpu
