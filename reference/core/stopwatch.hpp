/// @file
/// @brief Elapsed wall time on the monotonic clock, for deadlines and reported times.
#pragma once

#include <chrono>

namespace convlab {

/// Seconds from `start` to now.
inline double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace convlab
