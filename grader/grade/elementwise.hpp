/// @file
/// @brief The element-wise check's oracle and comparison: the convolution in double precision
/// on the CPU, and |got - want| <= atol + rtol * |want| for every output element, with the
/// worst error and the first mismatches named by their coordinates.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "reference/conv/conv_shape.hpp"

namespace convlab::grader {

/// y = conv(x, k) for `shape`, every product and sum in double precision (the oracle: no
/// float32 rounding for the team's result to be compared against).
std::vector<double> conv_reference_double(const ConvShape& shape, std::span<const float> x,
                                          std::span<const float> k);

/// maxpool(tanh(y)) of a convolution's output y (laid out as y of `shape`): the oracle of a
/// fused conv + tanh + max-pool launcher, [B][M][pool.out(H_out)][pool.out(W_out)], in double.
std::vector<double> tanh_maxpool_reference(std::span<const double> y, const ConvShape& shape,
                                           const PoolShape& pool);

/// The layout of an output: [n][c][h][w] (NCHW).
struct OutputDims {
  std::int64_t n = 0;  ///< images
  std::int64_t c = 0;  ///< maps
  std::int64_t h = 0;  ///< rows
  std::int64_t w = 0;  ///< columns

  /// n * c * h * w
  std::int64_t elements() const { return n * c * h * w; }
  /// "[3][50][24][24]"
  std::string to_string() const;
};

/// The dims of a convolution's output: [B][M][H_out][W_out].
OutputDims conv_output_dims(const ConvShape& shape);
/// The dims of the pooled output of a fused launcher.
OutputDims pooled_output_dims(const ConvShape& shape, const PoolShape& pool);

/// One output element that is outside the tolerance (or the worst one).
struct ElementMismatch {
  std::int64_t b = 0;  ///< image
  std::int64_t m = 0;  ///< output map
  std::int64_t h = 0;  ///< row
  std::int64_t w = 0;  ///< column
  float got = 0.0f;    ///< what the team's code wrote
  double want = 0.0;   ///< the double-precision reference
  double error = 0.0;  ///< |got - want|; infinite when got is NaN or infinite
};

/// The outcome of comparing one output with its reference.
struct ElementwiseComparison {
  bool ok = true;               ///< no mismatch
  std::int64_t elements = 0;    ///< compared
  std::int64_t mismatches = 0;  ///< outside the tolerance, NaN and infinities included
  std::int64_t non_finite = 0;  ///< NaN or infinite elements (among the mismatches)
  /// The element with the largest error (a non-finite one first); nullopt for an empty output.
  std::optional<ElementMismatch> worst;
  std::vector<ElementMismatch> first;  ///< the first mismatches, in memory order
};

/// Compares `got` with `want` (both laid out as `dims`, NCHW): element i passes when
/// |got - want| <= atol + rtol * |want|, so NaN never passes. Keeps the first `keep`
/// mismatches. Throws Error when a size differs from dims.elements().
ElementwiseComparison compare_elementwise(std::span<const float> got, std::span<const double> want,
                                          const OutputDims& dims, double atol, double rtol,
                                          std::size_t keep = 10);

/// The same for a convolution's output y of `shape`.
ElementwiseComparison compare_elementwise(std::span<const float> got, std::span<const double> want,
                                          const ConvShape& shape, double atol, double rtol,
                                          std::size_t keep = 10);

/// "y[0][3][12][7] = nan, expected 0.412345 (|error| = inf)"
std::string describe_mismatch(const ElementMismatch& m);

}  // namespace convlab::grader
