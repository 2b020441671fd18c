/// @file
/// @brief Small generated data sets for tests that need no real data.
#pragma once

#include <cstdint>
#include <filesystem>

#include "reference/data/fashion_mnist.hpp"

namespace convlab::data {

/// A deterministic data set of `count` images (rows x cols) with labels 0..9: each class is a
/// distinct blurred stripe pattern plus noise, so a small network can learn it.
Dataset make_synthetic(std::int64_t count, int rows, int cols, std::uint32_t seed);

/// Writes `train` and `test` into `dir` under the four Fashion-MNIST file names.
void write_dataset_files(const std::filesystem::path& dir, const Dataset& train,
                         const Dataset& test);

}  // namespace convlab::data
