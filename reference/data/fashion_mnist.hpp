/// @file
/// @brief Locating and loading the Fashion-MNIST data set.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string_view>
#include <vector>

#include "reference/core/tensor.hpp"

/// Data sets: the Fashion-MNIST reader, the IDX format and synthetic data for tests.
namespace convlab::data {

/// Where Debian's package dataset-fashion-mnist installs the files.
inline constexpr std::string_view kDefaultDataDir = "/usr/share/datasets/fashion-mnist";

/// The data directory: `flag` (--data) if given, else $CONVLAB_DATA if set, else kDefaultDataDir.
std::filesystem::path data_dir(const std::optional<std::filesystem::path>& flag);

/// Which half of the data set.
enum class Split { train, test };

/// Images as bytes and their labels, in file order.
struct Dataset {
  /// Number of images.
  std::int64_t count = 0;
  /// Image height in pixels (28).
  int rows = 0;
  /// Image width in pixels (28).
  int cols = 0;
  std::vector<std::uint8_t> pixels;  ///< count * rows * cols, row-major
  std::vector<std::uint8_t> labels;  ///< count, each 0..9

  /// The first n images as a float tensor [n, 1, rows, cols], each pixel times `scale`.
  /// Throws Error when n is not in 1..count.
  Tensor images(std::int64_t n, float scale) const;
  /// Writes the first n images to `path` as a gzipped IDX file ([n][rows][cols] bytes, the
  /// format the loader reads). Throws Error when n is not in 1..count, or the file cannot be
  /// written.
  void write_images(const std::filesystem::path& path, std::int64_t n) const;
};

/// Loads `split` from `dir` ({train,t10k}-{images-idx3,labels-idx1}-ubyte.gz).
/// Throws Error when a file is missing or bad, when counts of images and labels differ, or a
/// label is over 9; the message names the file and says how to get the data
/// (apt-get install dataset-fashion-mnist, datasets/fetch-fashion-mnist.sh, --data, CONVLAB_DATA).
Dataset load_fashion_mnist(const std::filesystem::path& dir, Split split);

}  // namespace convlab::data
