/// @file
/// @brief `convlab check`: a team's convolution compared element by element with the library
/// convolution (computed in double precision) on awkward random shapes, in this process. The
/// first thing to run after writing code: it names the wrong outputs by (b, m, h, w), where
/// `convlab run` can only say that a count is wrong.
#pragma once

#include <cstdint>
#include <functional>
#include <iosfwd>
#include <string>
#include <vector>

#include "reference/conv/conv_shape.hpp"
#include "reference/conv/variants.hpp"
#include "reference/milestones/milestone.hpp"

namespace convlab {

/// One convolution under test, called with host buffers (a GPU one copies in and out).
struct CheckTarget {
  std::string name;  ///< "cpu" or the variant's name
  std::string file;  ///< where its code lives
  /// y = conv(x, k) for `shape`, host pointers; y holds NaN on entry.
  std::function<void(float* y, const float* x, const float* k, const ConvShape& shape)> call;
};

/// The shapes `convlab check` uses for `seed`: K = 1 to 7, C > 1 in most, odd sizes and
/// outputs that are not multiples of 8, 16 or 32, then the project's layer (B = 2).
std::vector<ConvShape> check_shapes(std::uint64_t seed);

/// What `convlab check` accepts.
struct CheckOptions {
  std::string milestone;    ///< m2, m3 or final
  std::string variant;      ///< a GPU variant, "all", or empty for the milestone's default
  std::uint64_t seed = 0;   ///< inputs and shapes
  bool seed_given = false;  ///< --seed was given (else a fresh seed is drawn and printed)
  bool solution = false;    ///< --impl solution (staff trees only)
};

/// Compares every target on every shape of `seed`, calling each twice with y poisoned with NaN
/// before each call. Prints the outcome to `out`. Returns 0 when every implemented target
/// matches, kExitIncorrect (3) otherwise. A target that throws NotImplemented is reported and
/// skipped; when every target does, the first NotImplemented is thrown on.
int check_targets(const std::vector<CheckTarget>& targets, const std::string& milestone,
                  std::uint64_t seed, double atol, double rtol, std::ostream& out);

/// Compares `target` on `shapes` (shape i's inputs from elementwise_values(seed, i, ...)), calling
/// it twice per shape with y poisoned with NaN before each call. Prints each shape's line to
/// `out`, or with `quiet` only the failing shapes' lines. Returns whether every output matched.
/// A stub's NotImplemented and any other Error go through to the caller.
bool check_target_on(const CheckTarget& target, const std::vector<ConvShape>& shapes,
                     std::uint64_t seed, double atol, double rtol, bool quiet, std::ostream& out);

/// The inputs' seed of `convlab run`'s check: fixed, so that a run repeats exactly.
inline constexpr std::uint64_t kRunCheckSeed = 408;

/// The shapes `convlab run` checks its convolution on before the network: each of the model's
/// conv layers `layers` with min(n, 3) images, and where every layer has C = 1 the first one
/// again with three channels (a wrong channel stride is invisible with one).
std::vector<ConvShape> run_check_shapes(const std::vector<ConvShape>& layers, std::int64_t n);

/// `convlab run`'s check before the network: `target` on `shapes` (run_check_shapes) with
/// check_target_on. Prints nothing when every output is right and returns true; else prints
/// the failing shapes (the `convlab check` lines) and what to do next to `out`, returns false.
bool check_before_run(const CheckTarget& target, const std::vector<ConvShape>& shapes,
                      const std::string& milestone, double atol, double rtol, std::ostream& out);

/// The GPU variants of milestone `ms` that `choice` names (one, or "all") as check targets.
/// Throws Error, saying what to do instead, when there is no usable GPU or (check_cpu_only.cpp)
/// the build has no CUDA.
std::vector<CheckTarget> gpu_check_targets(const Milestone& ms, const std::string& choice,
                                           Impl impl);

/// `convlab check`: validates the options, picks the targets, runs check_targets.
int run_check(const CheckOptions& options, std::ostream& out);

}  // namespace convlab
