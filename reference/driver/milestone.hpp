/// @file
/// @brief Milestone definitions, read from `milestones/<id>/checks.json`.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace convlab {

/// The convlab tree the driver reads models and milestone data from: $CONVLAB_ROOT if set, else
/// PREFIX/share/convlab for an installed convlab (PREFIX/bin/convlab), else the source tree it
/// was built from.
std::filesystem::path convlab_root();

/// One expected result: the correct-prediction count of `model` on the first `images` test
/// images.
struct Check {
  /// Model name, e.g. "ece408-high".
  std::string model;
  /// N: how many test images, counted from the first.
  std::int64_t images = 0;
  /// How many of those images the network must classify correctly.
  std::int64_t expected_correct = 0;
  std::string device;  ///< "cpu" or "gpu" where a milestone runs on both, else empty
  /// Points the grader gives when the count matches.
  int points = 0;
};

/// What a milestone asks for and how it is checked.
struct Milestone {
  std::string id;  ///< "m1", "m2", "m3" or "final"
  /// One line: what the milestone asks for.
  std::string title;
  std::vector<std::string> team_writes;  ///< the student files it grades (its variants')
  std::vector<std::string> devices;      ///< where it runs: "cpu", "gpu"
  /// Device used when --device is not given.
  std::string default_device;
  std::vector<std::string> variants;  ///< GPU variants it runs, declared (empty for CPU milestones)
  /// Variant used when --variant is not given.
  std::string default_variant;
  /// Model used when none is named.
  std::string default_model;
  /// N used when none is given.
  std::int64_t default_images = 10000;
  /// Wall-clock limit of one graded run, in seconds.
  double time_limit_s = 0.0;
  /// The expected results the grader checks.
  std::vector<Check> checks;
  /// The element-wise tolerance, |got - want| <= atol + rtol * |want| (grading.elementwise;
  /// `convlab check` and the grader use the same).
  double elementwise_atol = 1e-4;
  double elementwise_rtol = 1e-4;  ///< see elementwise_atol

  /// The expected count for (model, images, device) if the milestone lists one.
  std::optional<std::int64_t> expected(const std::string& model, std::int64_t images,
                                       const std::string& device) const;
};

/// The milestone ids, in course order.
const std::vector<std::string>& milestone_ids();

/// Reads `milestones/<id>/checks.json` under `root`. Throws Error for an unknown id (listing the
/// valid ones) or a malformed file.
Milestone load_milestone(const std::filesystem::path& root, const std::string& id);

}  // namespace convlab
