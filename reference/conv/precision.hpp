/// @file
/// @brief Precision classes (fp32, tf32, fp16) and the rules a variant of each is judged by
/// (docs/grader.md, "Precision classes").
///
/// An fp32 variant keeps the exact counts. A tf32 or fp16 variant rounds the convolution's
/// inputs to a 10-bit mantissa, so its outputs move by up to about 2^-11 relative per product:
/// it is judged element-wise against a bound derived from that rounding, and on the network
/// by its predictions on the images whose float64 logit margin is safely above the class's
/// error estimate (run_network_exact() in reference/network/exact.hpp).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace convlab {

/// The arithmetic a variant's convolution uses (its declaration's precision field).
enum class Precision {
  fp32,  ///< float32 inputs and accumulation: exact counts
  tf32,  ///< inputs rounded to TF32 (10-bit mantissa, float32 range), float32 accumulation
  fp16   ///< inputs rounded to IEEE half (10-bit mantissa, max 65504), float32 accumulation
};

/// Every class, in the order reports list them: fp32, tf32, fp16.
std::span<const Precision> precision_classes();
/// "fp32", "tf32", "fp16"
std::string_view precision_name(Precision p);
/// Parses a declaration's precision; throws Error otherwise.
Precision parse_precision(std::string_view text);

/// Unit roundoff of float32: 2^-24.
inline constexpr double kFp32UnitRoundoff = 0x1p-24;
/// Unit roundoff u of the format the class rounds a convolution's inputs to: 2^-24 (fp32),
/// 2^-11 (tf32 and fp16: 10 stored mantissa bits, round to nearest).
double input_unit_roundoff(Precision p);
/// Largest absolute rounding error of a tiny value in the class's input format (fp16's
/// subnormal spacing 2^-24 halved); 0 for the float32-range formats at the magnitudes here.
double input_underflow_error(Precision p);

/// Rounds `v` to the class's input format, to nearest, ties to even (what a tensor core or a
/// half conversion sees); fp32 returns v. Emulates a variant of the class on the CPU.
float round_to_precision(Precision p, float v);

/// λ of the probabilistic accumulation bound (accumulation_bound()).
inline constexpr double kAccumulationLambda = 10.0;

/// The bound on a float32 sum of n products in any order, relative to S = sum |x||k|: the
/// smaller of the worst case gamma_n = n u / (1 - n u) (Higham, Theorem 3.1) and Higham and
/// Mary's probabilistic bound exp(λ sqrt(n) u + n u^2 / (1 - u)) - 1 (SIAM J. Sci. Comput.
/// 2019), u = 2^-24, λ = kAccumulationLambda. The second holds unless the rounding errors
/// conspire, with probability at most 2n exp(-λ^2 (1 - u)^2 / 2), about 4e-22 n per output; it
/// is the smaller from n = 101 on, so the allowance of a long sum grows like sqrt(n), not n.
double accumulation_bound(std::int64_t n);

/// The bound on |y - y64| for one output of a convolution of sum length n (C*K*K) computed in
/// class `p`: inputs rounded (relative error u each, so 2u + u^2 per product, plus the
/// underflow term for fp16), the sum accumulated in float32 (accumulation_bound(), a_n):
///   |err| <= (2u + u^2) S + a_n (1 + u)^2 S + n e (max|x| + max|k| + e)
/// where S = sum |x||k| over the output's terms and e the underflow error. For fp32 (inputs
/// exact, u's terms vanish) it is a_n S.
double elementwise_bound(Precision p, std::int64_t n, double abs_sum, double max_abs_x,
                         double max_abs_k);

/// How many standard deviations of the estimated logit error a margin must clear, per logit:
/// an image is judged when its float64 margin is at least 2 * kMarginSigmas * sigma.
inline constexpr double kMarginSigmas = 6.0;

/// The network rule's verdict on a tf32 or fp16 variant's predictions.
struct PrecisionVerdict {
  Precision precision = Precision::fp32;  ///< the class judged
  std::int64_t images = 0;                ///< compared
  std::int64_t under_bound = 0;           ///< margin below the bound: either prediction is accepted
  /// Images above the bound whose prediction differs from the float64 network's, by index.
  std::vector<std::int64_t> wrong;
  /// Images under the bound whose prediction differs (allowed; reported).
  std::int64_t moved_under_bound = 0;
  /// No image above the bound differs.
  bool ok() const { return wrong.empty(); }
};

/// Judges `got` (one prediction per image) against the float64 network's predictions, margins
/// and per-image logit error estimates (sigma): image i must match when
/// margins[i] >= 2 * kMarginSigmas * sigma[i]. Throws Error when the sizes differ.
PrecisionVerdict judge_predictions(Precision p, std::span<const int> got, std::span<const int> want,
                                   std::span<const double> margins, std::span<const double> sigma);

/// One line: "tf32 rule: 9993 of 10000 images above the bound all match the float64 network;
/// 7 under it (1 of them differs, allowed)", or the wrong images by index.
std::string describe_verdict(const PrecisionVerdict& v);

}  // namespace convlab
