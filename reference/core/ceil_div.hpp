/// @file
/// @brief Integer division rounding up, for CPU and GPU code alike.
#pragma once

namespace convlab {

/// Integer division rounding up: blocks needed to cover n items, `per` at a time.
template <typename T>
constexpr T ceil_div(T n, T per) {
  return (n + per - 1) / per;
}

}  // namespace convlab
