#include "reference/conv/conv_shape.hpp"

#include <limits>

#include "reference/core/error.hpp"

namespace convlab {

void ConvShape::validate() const {
  if (B < 1 || M < 1 || C < 1 || H < 1 || W < 1 || K < 1) {
    throw Error("convolution sizes must all be positive: " + to_string());
  }
  if (K > H || K > W) {
    throw Error("convolution filter (K=" + std::to_string(K) + ") is larger than its input (" +
                std::to_string(H) + "x" + std::to_string(W) + ")");
  }
  constexpr auto limit = std::int64_t{std::numeric_limits<int>::max()};
  if (x_elements() > limit || y_elements() > limit || k_elements() > limit) {
    throw Error("convolution " + to_string() +
                " has more than 2^31 elements in one tensor; use a smaller batch");
  }
}

std::string ConvShape::to_string() const {
  return "B=" + std::to_string(B) + " M=" + std::to_string(M) + " C=" + std::to_string(C) +
         " H=" + std::to_string(H) + " W=" + std::to_string(W) + " K=" + std::to_string(K);
}

}  // namespace convlab
