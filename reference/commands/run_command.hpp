/// @file
/// @brief `convlab run`: loads the data and a model, runs a milestone's convolution(s) in the
/// network, and prints Op Time and Correctness in the original course's format.
#pragma once

#include <cstdint>
#include <filesystem>
#include <iosfwd>
#include <optional>
#include <string>
#include <vector>

#include "reference/conv/variants.hpp"

namespace convlab {

/// Everything `convlab run` accepts.
struct RunOptions {
  std::string milestone;                          ///< m1, m2, m3, final
  std::optional<std::string> model;               ///< name or path; default: the milestone's
  std::optional<std::int64_t> images;             ///< N; default: the milestone's (10000)
  std::optional<std::string> variant;             ///< a GPU variant name or "all"
  Impl impl = Impl::student;                      ///< the team's code or the staff solutions
  std::optional<std::filesystem::path> json;      ///< where to write the JSON report
  std::optional<std::filesystem::path> data;      ///< Fashion-MNIST directory (--data)
  std::optional<std::string> device;              ///< m1 only: cpu or gpu
  std::vector<std::filesystem::path> model_dirs;  ///< extra model directories (--models)
  int runs = 1;  ///< timed calls per conv layer; Op Time keeps the fastest (--runs)
  /// GPU runs: print nvprof's summary table of every kernel, copy and CUDA call (--profile).
  bool profile = false;
  /// Also write that profile as JSON to this file; implies `profile` (--profile-json).
  std::optional<std::filesystem::path> profile_json;
};

/// Exit code of a run whose correct count differs from the expected one.
inline constexpr int kExitIncorrect = 3;

/// Runs the milestone; prints the run's lines to `out` and advice to `err`. Returns 0, or
/// kExitIncorrect when a run's count differs from the expected count. Throws Error on bad
/// input (unknown milestone, model or variant, N out of range, missing data, a stub).
int run_milestone(const RunOptions& options, std::ostream& out, std::ostream& err);

/// run_milestone with `fuse` false for --no-fuse: every conv layer is timed alone, even where
/// the variant has a fused conv + tanh + max-pool launcher.
int run_milestone(const RunOptions& options, bool fuse, std::ostream& out, std::ostream& err);

}  // namespace convlab
