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

void PoolShape::validate(const ConvShape& conv) const {
  if (size < 1 || stride < 1) {
    throw Error("max-pool size and stride must be positive: " + to_string());
  }
  if (size > conv.H_out() || size > conv.W_out()) {
    throw Error("max-pool window (" + to_string() + ") is larger than the convolution's " +
                std::to_string(conv.H_out()) + "x" + std::to_string(conv.W_out()) + " output");
  }
}

std::string PoolShape::to_string() const {
  return std::to_string(size) + "x" + std::to_string(size) + " stride " + std::to_string(stride);
}

}  // namespace convlab
