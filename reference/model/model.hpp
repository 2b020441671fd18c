/// @file
/// @brief A sequential network described by a model file's metadata, and its weights.
///
/// The safetensors metadata key "convlab.network" holds JSON:
///
///     {"name": "ece408-high", "input": [1, 28, 28], "input_scale": 0.00392156862745098,
///      "layers": [{"type": "conv", "weight": "conv1.weight"},
///                 {"type": "tanh"}, {"type": "maxpool", "size": 2, "stride": 2},
///                 {"type": "flatten"},
///                 {"type": "fc", "weight": "fc1.weight", "bias": "fc1.bias"}, {"type": "tanh"},
///                 {"type": "fc", "weight": "fc2.weight", "bias": "fc2.bias"},
///                 {"type": "softmax"}]}
///
/// conv weights are [M][C][K][K] (no bias); fc weights are [out][in] with bias [out], so
/// y = x W^T + b. Optional keys "convlab.provenance" (how the weights were made) and
/// "convlab.expected" ({"correct": {"100": n, ...}, "min_margin": m}) are JSON too.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "reference/conv/conv_shape.hpp"
#include "reference/core/tensor.hpp"

namespace convlab {

/// The kinds of layer a model may hold.
enum class LayerKind { conv, tanh, relu, maxpool, flatten, fc, softmax };

/// "conv", "tanh", ...
std::string layer_kind_name(LayerKind kind);

/// One layer, with its weights where it has any.
struct Layer {
  /// What the layer computes.
  LayerKind kind = LayerKind::tanh;
  int pool_size = 0;        ///< maxpool window (square)
  int pool_stride = 0;      ///< maxpool stride
  std::string weight_name;  ///< tensor name of the weight in the file (conv, fc)
  std::string bias_name;    ///< tensor name of the bias in the file (fc)
  Tensor weight;            ///< conv: [M][C][K][K]; fc: [out][in]
  Tensor bias;              ///< fc: [out]
};

/// A whole model: network, weights, and what it is expected to score.
struct Model {
  /// Model name, e.g. "ece408-high" (what the Correctness line prints).
  std::string name;
  Shape input;               ///< per image: [C, H, W]
  float input_scale = 1.0f;  ///< pixel byte -> input value factor
  /// The layers, applied in order.
  std::vector<Layer> layers;
  /// Expected correct predictions on the first N test images, by N (from "convlab.expected").
  std::map<std::int64_t, std::int64_t> expected_correct;
  /// Smallest top-1/top-2 logit margin over the test set, as recorded by the calibrator.
  std::optional<double> min_margin;
  /// Raw JSON of "convlab.provenance", empty if absent.
  std::string provenance;

  /// Per-image shape after each layer (index i: output of layers[i]). Throws Error if the
  /// weights do not fit the shapes flowing through the network.
  std::vector<Shape> output_shapes() const;
  /// The convolution each conv layer performs on a batch of `batch` images, in layer order.
  std::vector<ConvShape> conv_shapes(int batch) const;
  /// Number of classes (size of the last layer's output).
  std::int64_t classes() const;
};

/// Reads a model file. Throws Error naming the file when it cannot be read, the metadata is
/// missing or malformed, a layer names an absent tensor, or shapes do not chain
/// (for example, a header whose tensor shapes lie about the network).
Model load_model(const std::filesystem::path& path);

/// Writes `model` (metadata included) as a safetensors file.
void save_model(const std::filesystem::path& path, const Model& model);

/// Where the model called `name` lives: `name` itself if it is a path to an existing file,
/// else `<dir>/<name>.safetensors` for each dir in `search_dirs`. Throws Error listing the
/// models that exist when none matches.
std::filesystem::path find_model(const std::string& name,
                                 const std::vector<std::filesystem::path>& search_dirs);

}  // namespace convlab
