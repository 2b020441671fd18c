/// @file
/// @brief The calibrator: makes a model score an exact count on the test set, with a stated
/// minimum logit margin, so every correct float32 implementation gives that same count.
///
/// All decisions use double arithmetic on the model's float32 weights and inputs ("the exact
/// network"). The margin of an image is its top-1 logit minus its top-2 logit (logits: the
/// output of the last fc layer, before softmax). If every margin is well above the rounding
/// error of a float32 evaluation, any float32 implementation predicts what the exact network
/// predicts.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "reference/data/fashion_mnist.hpp"
#include "reference/model/model.hpp"

namespace convlab::tools {

/// Version of the calibrator, recorded in the model files it writes.
inline constexpr std::string_view kCalibratorVersion = "1.0.0";

/// The exact network's view of the first `count` images.
struct Evaluation {
  std::int64_t count = 0;
  std::int64_t classes = 0;
  std::int64_t features = 0;     ///< inputs of the last fc layer
  std::vector<double> logits;    ///< count * classes
  std::vector<double> inputs;    ///< count * features (only when asked for)
  std::vector<int> predictions;  ///< top logit, first on ties
  std::vector<std::uint8_t> labels;

  /// Correct predictions among the first n images.
  std::int64_t correct(std::int64_t n) const;
  /// Top-1 minus top-2 logit of image i.
  double margin(std::int64_t i) const;
  /// Smallest margin over all images.
  double min_margin() const;
  /// Largest |logit| over all images and classes.
  double max_abs_logit() const;
};

/// Runs `model` in double on the first n images of `data`; keeps the last fc layer's inputs
/// when `keep_inputs`.
Evaluation evaluate_exact(const Model& model, const data::Dataset& data, std::int64_t n,
                          bool keep_inputs);

/// Weights (1 - t) a + t b (computed in double, rounded to float); network and names from b.
/// Throws Error when the two models differ in network or weight shapes.
Model interpolate(const Model& a, const Model& b, double t);

/// Where the target count was found.
struct TargetSearch {
  double t = 0.0;
  std::int64_t correct = 0;
  int evaluations = 0;
  std::vector<std::pair<double, std::int64_t>> scan;  ///< (t, count) of the coarse scan
};

/// Finds t in [0, 1] with exactly `target` correct among the first n images for
/// interpolate(a, b, t): a coarse scan from t = 1 down to 0 (`scan_points` steps), then
/// bisection inside the first bracket met (counts are not monotone in t, but within a bracket
/// whose ends lie on either side of the target, some point hits it when counts move by one).
/// `log` (may be empty) receives a line per evaluation. Throws Error when no bracket exists.
TargetSearch find_target(const Model& a, const Model& b, const data::Dataset& data, std::int64_t n,
                         std::int64_t target, int scan_points,
                         const std::function<void(const std::string&)>& log);

/// What margin repair did.
struct RepairResult {
  int steps = 0;                  ///< accepted update steps
  std::int64_t images_below = 0;  ///< images under the bound at the start
  double min_margin_before = 0.0;
  double min_margin_after = 0.0;
};

/// Raises every image's margin to at least `bound` by small changes of the last fc layer only
/// (weights and bias), pushing each low-margin image towards its current prediction (right or
/// wrong); every final prediction is the one it started with. `eval` must come from
/// evaluate_exact(model, ..., keep_inputs = true). Throws Error if it cannot reach the bound.
RepairResult repair_margins(Model& model, const Evaluation& eval, double bound,
                            const std::function<void(const std::string&)>& log);

/// An independent float32 evaluation (plain loops, std::tanh in float, nothing shared with the
/// trainer's kernels): predictions and logits for the first n images.
std::vector<int> predict_float32(const Model& model, const data::Dataset& data, std::int64_t n,
                                 std::vector<float>* logits);

}  // namespace convlab::tools
