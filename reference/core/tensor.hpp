/// @file
/// @brief A dense float32 host tensor in row-major (NCHW) order.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace convlab {

/// Dimensions of a tensor, outermost first (NCHW for images).
using Shape = std::vector<std::int64_t>;

/// Number of elements a shape holds; throws Error on negative dimensions or overflow.
std::int64_t shape_elements(const Shape& shape);

/// "[10000, 1, 28, 28]"
std::string shape_string(const Shape& shape);

/// A dense float32 array on the host. Owns its memory; copies are deep.
class Tensor {
 public:
  Tensor() = default;
  /// Zero-filled tensor of the given shape.
  explicit Tensor(Shape shape);
  /// Tensor that takes `values`; throws Error if their count does not match the shape.
  Tensor(Shape shape, std::vector<float> values);

  /// Dimensions, outermost first.
  const Shape& shape() const { return shape_; }
  /// Size of dimension i; throws Error when i is out of range.
  std::int64_t dim(std::size_t i) const;
  /// Number of dimensions.
  std::size_t rank() const { return shape_.size(); }
  /// Number of elements.
  std::int64_t size() const { return static_cast<std::int64_t>(values_.size()); }
  /// Pointer to the first element.
  float* data() { return values_.data(); }
  /// Pointer to the first element.
  const float* data() const { return values_.data(); }
  /// All elements, row-major.
  std::span<float> values() { return values_; }
  /// All elements, row-major.
  std::span<const float> values() const { return values_; }
  /// Same values, new shape with the same element count (a view change, no copy of logic).
  void reshape(Shape shape);

 private:
  Shape shape_;
  std::vector<float> values_;
};

}  // namespace convlab
