/// @file
/// @brief A sequential network laid out for training: shapes, a flat parameter vector, and
/// forward and backward passes over a small group of images, in float or double.
///
/// The same code runs in float (training) and in double (gradient checks, calibration), so
/// what the calibrator measures is exactly the network the trainer optimised.
#pragma once

#include <cstdint>
#include <vector>

#include "reference/model/model.hpp"

namespace convlab::tools {

/// One layer as the trainer sees it: kind, per-image shapes, parameter location.
struct LayerPlan {
  LayerKind kind = LayerKind::tanh;
  std::int64_t in_c = 0, in_h = 0, in_w = 0;     ///< per-image input [C, H, W]
  std::int64_t out_c = 0, out_h = 0, out_w = 0;  ///< per-image output [C, H, W]
  int kernel = 0;                                ///< conv: K
  int pool_size = 0;                             ///< maxpool window
  int pool_stride = 0;                           ///< maxpool stride
  std::int64_t weight_offset = -1;  ///< conv, fc: start of the weights in the parameter vector
  std::int64_t weight_size = 0;
  std::int64_t bias_offset = -1;  ///< fc with a bias: start of the bias
  std::int64_t bias_size = 0;
  std::int64_t col_size = 0;      ///< conv: elements of one image's unrolled input (C*K*K * Ho*Wo)
  bool needs_input_grad = false;  ///< some earlier layer has parameters

  /// Elements of one image's input.
  std::int64_t in_size() const { return in_c * in_h * in_w; }
  /// Elements of one image's output.
  std::int64_t out_size() const { return out_c * out_h * out_w; }
};

/// A whole network: layers in order, sizes, parameter layout.
struct NetPlan {
  std::vector<LayerPlan> layers;
  std::int64_t input_size = 0;   ///< elements of one input image
  std::int64_t param_count = 0;  ///< length of the flat parameter vector
  std::int64_t classes = 0;      ///< outputs of the last layer
  std::int64_t max_size = 0;     ///< largest per-image activation (input included)
  int logits_layer = -1;         ///< index of the last fc layer, whose output are the logits
};

/// Plans `model`'s network. Throws Error unless it is a chain the trainer handles: shapes fit,
/// every weighted layer has its tensors, and the last layer is a softmax right after the last fc.
NetPlan make_plan(const Model& model);

/// The model's weights in plan order, converted to T.
template <typename T>
std::vector<T> flatten_params(const NetPlan& plan, const Model& model);

/// Stores `params` (plan order, rounded to float) into the model's weight tensors.
template <typename T>
void store_params(const NetPlan& plan, const std::vector<T>& params, Model& model);

/// Buffers for running the network on up to `capacity` images at a time.
template <typename T>
struct Workspace {
  int capacity = 0;
  std::vector<T> input;                           ///< capacity * input_size, filled by the caller
  std::vector<std::vector<T>> acts;               ///< per layer: capacity * out_size
  std::vector<std::vector<T>> cols;               ///< per conv layer: capacity * col_size
  std::vector<std::vector<std::int32_t>> argmax;  ///< per maxpool layer: source index per output
  std::vector<T> grad_a, grad_b;                  ///< backward ping-pong, capacity * max_size
  std::vector<T> scratch;                         ///< one image's unrolled-input gradient
};

/// Allocates a workspace for `plan` and groups of up to `capacity` images.
template <typename T>
Workspace<T> make_workspace(const NetPlan& plan, int capacity);

/// Runs the network on the `n` images in ws.input; fills ws.acts (the softmax layer's output
/// holds probabilities, ws.acts[plan.logits_layer] the logits).
template <typename T>
void forward(const NetPlan& plan, const T* params, int n, Workspace<T>& ws);

/// After forward(): adds the gradient of the summed cross-entropy loss of the `n` images
/// (labels 0..classes-1) to `grad` (plan order). Returns the summed loss; adds the number of
/// images whose top logit is the label to `*correct` when not null.
template <typename T>
double backward(const NetPlan& plan, const T* params, const std::uint8_t* labels, int n,
                Workspace<T>& ws, T* grad, std::int64_t* correct);

/// Index of the largest of `values[0..n)` (the first one on ties).
template <typename T>
int argmax_of(const T* values, std::int64_t n);

/// tanh in float through a branch-free exp that vectorises; within 2e-7 of std::tanh.
float fast_tanh(float x);

}  // namespace convlab::tools
