/// @file
/// @brief Network descriptions for `convlab bench`: a named list of conv layers and their
/// shapes, read from `datasets/nets/*.json` (the format is in datasets/nets/README.md).
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "reference/conv/conv_shape.hpp"

namespace convlab {

/// One conv layer of a network description.
struct NetLayer {
  /// Layer name as the tables print it, e.g. "conv1-2".
  std::string name;
  /// The layer's sizes; B is the description's batch.
  ConvShape shape;
};

/// A network description: the conv layers of a network, in order, and the batch they are
/// benchmarked at by default.
struct NetDescription {
  /// Short name, e.g. "vgg16".
  std::string name;
  /// One or two sentences on where the shapes come from.
  std::string description;
  /// The file it was read from.
  std::filesystem::path file;
  /// Default batch: images per convolution call.
  int batch = 0;
  /// Model files (datasets/models) whose conv layers these are, if any.
  std::vector<std::string> models;
  /// The conv layers, in network order.
  std::vector<NetLayer> layers;

  /// The layers' shapes with B = `batch`. Throws Error naming the file when `batch` is not
  /// positive or a tensor of some layer would exceed 2^31 elements at that batch.
  std::vector<ConvShape> shapes(int batch) const;
};

/// Parses a network description from JSON text; `origin` (usually the file name) starts every
/// error message. Throws Error, saying what to fix, for invalid JSON, a missing or mistyped key,
/// an unknown key, a size that is not a positive integer, a filter larger than its input, or
/// duplicate layer names.
NetDescription parse_net(const std::string& json_text, const std::string& origin);

/// Reads and parses `file` (see parse_net()); throws Error naming the file if it cannot be read.
NetDescription load_net(const std::filesystem::path& file);

/// The names of the descriptions in `nets_dir` (its `*.json` files without the extension),
/// sorted.
std::vector<std::string> net_names(const std::filesystem::path& nets_dir);

/// Where the description `name_or_path` lives: a path to an existing file (anything containing
/// '/' or ending in ".json"), else `<nets_dir>/<name>.json`. Throws Error listing the known
/// names when neither exists.
std::filesystem::path find_net(const std::string& name_or_path,
                               const std::filesystem::path& nets_dir);

}  // namespace convlab
