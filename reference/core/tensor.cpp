#include "reference/core/tensor.hpp"

#include <limits>
#include <utility>

#include "reference/core/error.hpp"

namespace convlab {

std::int64_t shape_elements(const Shape& shape) {
  std::int64_t n = 1;
  for (const std::int64_t d : shape) {
    if (d < 0) throw Error("negative dimension in tensor shape " + shape_string(shape));
    if (d != 0 && n > std::numeric_limits<std::int64_t>::max() / d) {
      throw Error("tensor shape " + shape_string(shape) + " is too large");
    }
    n *= d;
  }
  return n;
}

std::string shape_string(const Shape& shape) {
  std::string s = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (i != 0) s += ", ";
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

Tensor::Tensor(Shape shape)
    : shape_(std::move(shape)), values_(static_cast<std::size_t>(shape_elements(shape_)), 0.0f) {}

Tensor::Tensor(Shape shape, std::vector<float> values)
    : shape_(std::move(shape)), values_(std::move(values)) {
  if (shape_elements(shape_) != static_cast<std::int64_t>(values_.size())) {
    throw Error("tensor of shape " + shape_string(shape_) + " needs " +
                std::to_string(shape_elements(shape_)) + " values, got " +
                std::to_string(values_.size()));
  }
}

std::int64_t Tensor::dim(std::size_t i) const {
  if (i >= shape_.size()) {
    throw Error("dimension " + std::to_string(i) + " asked of a tensor of shape " +
                shape_string(shape_));
  }
  return shape_[i];
}

void Tensor::reshape(Shape shape) {
  if (shape_elements(shape) != size()) {
    throw Error("cannot reshape " + shape_string(shape_) + " to " + shape_string(shape));
  }
  shape_ = std::move(shape);
}

}  // namespace convlab
