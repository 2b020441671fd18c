/// @file
/// @brief The element-wise comparison that `convlab check` and the grader share: inputs from a
/// seed, the convolution in double precision on the CPU (the oracle), and
/// |got - want| <= atol + rtol * |want| for every output element, with the worst error and the
/// first mismatches named by their coordinates.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "reference/conv/conv_shape.hpp"
#include "reference/conv/precision.hpp"

namespace convlab {

/// Which tensor of an element-wise case a value stream fills.
enum class ElementwiseTensor : std::uint64_t {
  x = 0,  ///< the input x[B][C][H][W]
  k = 1   ///< the filters k[M][C][K][K]
};

/// The element-wise inputs: for seed `seed`, shape number `shape_index` (its position in the
/// list of shapes) and tensor x or k, `count` values uniform on [-1, 1).
///
/// The generator is SplitMix64 (Steele, Lea and Flood, 2014) started at
/// `seed ^ (0x9E3779B97F4A7C15 * (2 * shape_index + tensor + 1))`; value i is
/// `(r_i >> 40) * 2^-23 - 1` for the i-th 64-bit output r_i. Every value is a multiple of
/// 2^-23, so it is exact in float32 and the double-precision reference sees the very numbers
/// the code under test sees. The grader, its harness and `convlab check` all call this.
inline std::vector<float> elementwise_values(std::uint64_t seed, std::size_t shape_index,
                                             ElementwiseTensor tensor, std::int64_t count) {
  std::uint64_t state = seed ^ (0x9E3779B97F4A7C15ull * (2 * std::uint64_t{shape_index} +
                                                         static_cast<std::uint64_t>(tensor) + 1));
  std::vector<float> values(static_cast<std::size_t>(count));
  for (float& v : values) {
    state += 0x9E3779B97F4A7C15ull;
    std::uint64_t z = state;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    v = static_cast<float>(static_cast<double>(z >> 40) * 0x1p-23 - 1.0);
  }
  return values;
}

/// y = conv(x, k) for `shape`, every product and sum in double precision (the oracle: no
/// float32 rounding for the team's result to be compared against).
std::vector<double> conv_reference_double(const ConvShape& shape, std::span<const float> x,
                                          std::span<const float> k);

/// maxpool(tanh(y)) of a convolution's output y (laid out as y of `shape`): the oracle of a
/// fused conv + tanh + max-pool launcher, [B][M][pool.out(H_out)][pool.out(W_out)], in double.
std::vector<double> tanh_maxpool_reference(std::span<const double> y, const ConvShape& shape,
                                           const PoolShape& pool);

/// Each pooled output's allowance from its convolution outputs' (`allowed`, laid out as y of
/// `shape`): the largest over its window, as tanh and max-pool never enlarge an error.
std::vector<double> pooled_allowance(std::span<const double> allowed, const ConvShape& shape,
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

/// The same with a per-element allowance: element i passes when |got - want| <= allowed[i].
ElementwiseComparison compare_elementwise_within(std::span<const float> got,
                                                 std::span<const double> want,
                                                 std::span<const double> allowed,
                                                 const OutputDims& dims, std::size_t keep = 10);

/// The largest magnitude in v (0 for none): the max|x| and max|k| of elementwise_bound().
float max_magnitude(std::span<const float> v);
/// Replaces every value of v by its magnitude and returns the largest (0 for none): the |x|
/// and |k| whose convolution gives the sums of |x||k|.
float to_magnitudes(std::span<float> v);
/// Each output's rounding allowance for a convolution of class `p` of `shape` on x and k:
/// elementwise_bound() (reference/conv/precision.hpp) of its sum of |x||k|, in double.
std::vector<double> precision_allowance(Precision p, const ConvShape& shape,
                                        std::span<const float> x, std::span<const float> k);

/// The element-wise rule of every class, written once for `convlab check` and the grader:
/// output i may differ from the float64 reference `want` by
///   atol + rtol |want_i| + elementwise_bound(p, C*K*K, S_i, max|x|, max|k|),
/// S_i its sum of |x||k|. The first two terms are the milestone's (grading.elementwise), the
/// third what a correct kernel of the class can round away in any order of summation: small
/// beside atol on short sums, the allowance of a long one.
std::vector<double> elementwise_allowance(Precision p, const ConvShape& shape,
                                          std::span<const float> x, std::span<const float> k,
                                          std::span<const double> want, double atol, double rtol);

/// "y[0][3][12][7] = nan, expected 0.412345 (|error| = inf)"
std::string describe_mismatch(const ElementMismatch& m);

}  // namespace convlab
