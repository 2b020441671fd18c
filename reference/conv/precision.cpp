#include "reference/conv/precision.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>

#include "reference/core/error.hpp"

namespace convlab {

std::span<const Precision> precision_classes() {
  static constexpr Precision kAll[] = {Precision::fp32, Precision::tf32, Precision::fp16};
  return kAll;
}

std::string_view precision_name(Precision p) {
  switch (p) {
    case Precision::fp32:
      return "fp32";
    case Precision::tf32:
      return "tf32";
    case Precision::fp16:
      return "fp16";
  }
  return "fp32";
}

Precision parse_precision(std::string_view text) {
  for (Precision p : precision_classes()) {
    if (precision_name(p) == text) return p;
  }
  throw Error("unknown precision class '" + std::string(text) + "': use fp32, tf32 or fp16");
}

double input_unit_roundoff(Precision p) {
  return p == Precision::fp32 ? kFp32UnitRoundoff : 0x1p-11;
}

double input_underflow_error(Precision p) {
  return p == Precision::fp16 ? 0x1p-25 : 0.0;
}

namespace {

// v rounded to nearest, ties to even, keeping `bits` of float32's 23 stored mantissa bits.
float round_mantissa(float v, int bits) {
  if (!std::isfinite(v)) return v;
  std::uint32_t u = std::bit_cast<std::uint32_t>(v);
  const int drop = 23 - bits;
  const std::uint32_t half = 1u << (drop - 1), mask = (1u << drop) - 1;
  const std::uint32_t rest = u & mask;
  u &= ~mask;
  if (rest > half || (rest == half && (u & (1u << drop)) != 0)) u += 1u << drop;
  return std::bit_cast<float>(u);
}

// v as IEEE half and back: 10-bit mantissa, subnormals below 2^-14, infinity above 65504.
float round_half(float v) {
  if (!std::isfinite(v)) return v;
  const float a = std::fabs(v);
  if (a >= 65520.0f) return std::copysign(std::numeric_limits<float>::infinity(), v);
  if (a < 0x1p-14f) {
    // Subnormal: a multiple of 2^-24, to nearest even (float32 holds these exactly).
    return std::copysign(std::nearbyint(a * 0x1p24f) * 0x1p-24f, v);
  }
  return round_mantissa(v, 10);
}

}  // namespace

float round_to_precision(Precision p, float v) {
  switch (p) {
    case Precision::fp32:
      return v;
    case Precision::tf32:
      return round_mantissa(v, 10);
    case Precision::fp16:
      return round_half(v);
  }
  return v;
}

double accumulation_bound(std::int64_t n) {
  const double u = kFp32UnitRoundoff;
  const double nu = static_cast<double>(n) * u;
  const double worst = nu < 1.0 ? nu / (1.0 - nu) : std::numeric_limits<double>::infinity();
  const double likely =
      std::expm1(kAccumulationLambda * std::sqrt(static_cast<double>(n)) * u + nu * u / (1 - u));
  return std::min(worst, likely);
}

double elementwise_bound(Precision p, std::int64_t n, double abs_sum, double max_abs_x,
                         double max_abs_k) {
  const double u = input_unit_roundoff(p);
  const double e = input_underflow_error(p);
  const double rounding = p == Precision::fp32 ? 0.0 : 2 * u + u * u;
  const double growth = p == Precision::fp32 ? 1.0 : (1 + u) * (1 + u);
  return rounding * abs_sum + accumulation_bound(n) * growth * abs_sum +
         static_cast<double>(n) * e * (max_abs_x + max_abs_k + e);
}

PrecisionVerdict judge_predictions(Precision p, std::span<const int> got, std::span<const int> want,
                                   std::span<const double> margins, std::span<const double> sigma) {
  if (got.size() != want.size() || margins.size() != want.size() || sigma.size() != want.size()) {
    throw Error("the precision rule needs one prediction, margin and error estimate per image (" +
                std::to_string(got.size()) + " predictions for " + std::to_string(want.size()) +
                " reference images)");
  }
  PrecisionVerdict v;
  v.precision = p;
  v.images = static_cast<std::int64_t>(want.size());
  for (std::size_t i = 0; i < want.size(); ++i) {
    const bool judged = margins[i] >= 2 * kMarginSigmas * sigma[i];
    if (!judged) {
      ++v.under_bound;
      v.moved_under_bound += got[i] != want[i];
    } else if (got[i] != want[i]) {
      v.wrong.push_back(static_cast<std::int64_t>(i));
    }
  }
  return v;
}

std::string describe_verdict(const PrecisionVerdict& v) {
  const std::string name(precision_name(v.precision));
  const std::int64_t above = v.images - v.under_bound;
  std::string s = name + " rule: ";
  if (v.ok()) {
    s += "all " + std::to_string(above) + " of " + std::to_string(v.images) +
         " images above the bound match the float64 network";
  } else {
    s += std::to_string(v.wrong.size()) + " of the " + std::to_string(above) +
         " images above the bound differ from the float64 network: image";
    s += v.wrong.size() == 1 ? " " : "s ";
    for (std::size_t i = 0; i < v.wrong.size() && i < 10; ++i) {
      s += (i > 0 ? ", " : "") + std::to_string(v.wrong[i]);
    }
    if (v.wrong.size() > 10) s += ", ...";
  }
  s += "; " + std::to_string(v.under_bound) + " under the bound";
  if (v.moved_under_bound > 0) {
    s += " (" + std::to_string(v.moved_under_bound) + " of them differ" +
         (v.moved_under_bound == 1 ? "s" : "") + ", allowed)";
  }
  return s;
}

}  // namespace convlab
