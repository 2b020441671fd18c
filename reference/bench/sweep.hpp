/// @file
/// @brief `convlab sweep`: every point of a variant's parameter grid (conv_<id>_sweep, declared
/// `sweep` in variants.def) checked and timed on a network description's layers, as the bench
/// does, and the table a report needs with the best point.
#pragma once

#include <filesystem>
#include <optional>
#include <ostream>
#include <string>

#include "reference/conv/variants.hpp"

namespace convlab {

/// What `convlab sweep` was asked for.
struct SweepOptions {
  std::string variant;                        ///< a variant declared `sweep`
  std::string net = "ece408";                 ///< a name in datasets/nets or a .json path
  std::optional<int> batch;                   ///< images per call; default: the net's batch
  int runs = 5;                               ///< timed runs per point and layer
  Impl impl = Impl::student;                  ///< the team's grid or the staff one
  std::optional<std::filesystem::path> json;  ///< where to write the bench JSON report
  bool flush_l2 = true;                       ///< flush L2 before every timed run
};

/// The variants that declare a parameter grid, as "a, b" (for messages).
std::string sweep_variant_names();

/// Runs the sweep and prints its table to `out` (progress to `err` when it is a terminal).
/// Returns 0, or 3 when a point was WRONG or failed. Throws Error for a variant without a grid
/// (naming those with one), an empty grid (naming the file to write it in), bad options, a
/// build without CUDA, or no usable GPU.
int run_sweep(const SweepOptions& options, std::ostream& out, std::ostream& err);

}  // namespace convlab
