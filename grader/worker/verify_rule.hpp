/// @file
/// @brief The referee's rule for every timed call's output (docs/grader.md, "Timed runs"): how
/// far it may differ from the referee's float32 reference, and how far a repeated call's inputs
/// move so that an output kept from an earlier call cannot pass.
#pragma once

#include "reference/conv/conv_shape.hpp"
#include "reference/conv/precision.hpp"

namespace convlab::grader {

/// Tolerance of the per-call verification (float32 against float32 in another order), to which
/// each output adds the rounding of both sums (rounding_allowance()).
inline constexpr double kVerifyAtol = 1e-4;
inline constexpr double kVerifyRtol = 1e-4;

/// The least a repeated call's inputs move (repeat_noise()).
inline constexpr double kRepeatNoiseMin = 1.0 / 256;

/// What a call of class `p` and the float32 reference (a direct sum) may both round away on an
/// output whose sum of |x||k| is `abs_sum`: elementwise_bound() of each, 1 % over for the
/// float32 sum that measured abs_sum.
double rounding_allowance(Precision p, const ConvShape& shape, double abs_sum, double max_abs_x,
                          double max_abs_k);

/// How far the inputs of a repeated timed call move from the first's (each value times
/// 1 + eps u, u uniform in [-1, 1)): kRepeatNoiseMin, or more on long sums, so that an output
/// kept from an earlier call still misses the moved reference by about 8 times the rounding
/// allowance (eps >= 28 a_n sqrt(n), a_n = accumulation_bound(C*K*K)); at most 1/2.
double repeat_noise(const ConvShape& shape);

}  // namespace convlab::grader
