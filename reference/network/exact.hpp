/// @file
/// @brief The network in float64 on the CPU: the reference predictions and logit margins the
/// precision rule judges a tf32 or fp16 variant by, and each image's estimated logit error.
///
/// The error estimate follows the rounding through the network as independent, zero-mean
/// errors (the probabilistic model of Higham and Mary, 2019): a product of two inputs rounded
/// with unit roundoff u has relative error of variance 2u^2/3; a layer's output error has
/// variance sum_i w_i^2 sigma_in^2 from its input's error, plus its own rounding; tanh, ReLU
/// and max-pool do not enlarge it. Each layer keeps the largest variance over its outputs, so
/// the estimate is an upper one per image. docs/grader.md states the rule built on it.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "reference/conv/precision.hpp"
#include "reference/core/tensor.hpp"
#include "reference/model/model.hpp"

namespace convlab {

/// What the float64 network says about each image.
struct ExactRun {
  std::int64_t images = 0;       ///< N
  std::int64_t classes = 0;      ///< logits per image
  std::vector<double> logits;    ///< images * classes: the last layer's input if it is softmax
  std::vector<int> predictions;  ///< the top logit (first on ties)
  std::vector<double> margins;   ///< top-1 minus top-2 logit
  std::vector<double> sigma;     ///< estimated standard deviation of a logit's error
};

/// Runs `model` on `input` ([N, C, H, W] as for run_network_cpu) in float64, every weight and
/// input value as the float32 implementations see it, and estimates the logit error of a
/// float32 network whose convolutions are computed in class `p`. Throws Error on a shape
/// mismatch.
ExactRun run_network_exact(const Model& model, const Tensor& input, Precision p);

/// The same pass for several classes at once (1 to 3): one ExactRun per class, in order. The
/// logits, predictions and margins do not depend on the class (only the error estimate does),
/// so one pass costs about what one class costs alone. Throws Error on a shape mismatch or a
/// count of classes out of range.
std::vector<ExactRun> run_network_exact(const Model& model, const Tensor& input,
                                        std::span<const Precision> classes);

}  // namespace convlab
