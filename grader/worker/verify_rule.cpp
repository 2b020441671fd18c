#include "grader/worker/verify_rule.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>

namespace convlab::grader {

double rounding_allowance(Precision p, const ConvShape& shape, double abs_sum, double max_abs_x,
                          double max_abs_k) {
  const std::int64_t n = std::int64_t{shape.C} * shape.K * shape.K;
  return 1.01 * (elementwise_bound(p, n, abs_sum, max_abs_x, max_abs_k) +
                 elementwise_bound(Precision::fp32, n, abs_sum, max_abs_x, max_abs_k));
}

double repeat_noise(const ConvShape& shape) {
  // The signal of a kept output is about eps sqrt(sum (x k)^2 / 3), its allowance about
  // 2.02 a_n S <= 2.02 a_n sqrt(n) sqrt(sum (x k)^2): eps = 28 a_n sqrt(n) puts it 8 times over.
  const std::int64_t n = std::int64_t{shape.C} * shape.K * shape.K;
  const double needed = 28.0 * accumulation_bound(n) * std::sqrt(static_cast<double>(n));
  return std::clamp(needed, kRepeatNoiseMin, 0.5);
}

}  // namespace convlab::grader
