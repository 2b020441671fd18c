/// @file
/// @brief Milestones, read from `milestones/<id>/checks.json`: the one parser of that file and
/// the one typed model the driver, the grader, the leaderboard, grade-all and the release use.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "reference/conv/conv_shape.hpp"

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

/// The element-wise check of a milestone ("grading"."elementwise").
struct ElementwiseGrading {
  double points = 0.0;            ///< for the ranked variant
  double atol = 1e-4;             ///< absolute tolerance
  double rtol = 1e-4;             ///< relative tolerance
  std::vector<ConvShape> shapes;  ///< in the file's order (the order seeds the inputs)
  std::vector<std::string> why;   ///< what each shape exercises
};

/// The compute-sanitizer check of a GPU milestone ("grading"."memcheck").
struct MemcheckGrading {
  double points = 0.0;        ///< for the ranked variant
  std::int64_t images = 100;  ///< a short run: memcheck slows kernels down a lot
};

/// How the grader scores a milestone ("grading").
struct MilestoneGrading {
  std::optional<ElementwiseGrading> elementwise;  ///< "elementwise", if any
  double hidden_model_points = 0.0;               ///< per hidden model, ranked variant only
  double other_points_per_check = 0.0;            ///< "other_variants"."points_per_check"
  /// "other_variants"."variant_points": a variant's points, shared equally by its checks,
  /// instead of points_per_check per check (the later editions' menu weights).
  std::map<std::string, double> variant_points;
  double flag_speedup_over = 10.0;          ///< a faster speedup over the reference gets a flag
  std::optional<MemcheckGrading> memcheck;  ///< "memcheck", if any (GPU milestones use it)
};

/// How the leaderboard turns times into points ("ranking").
struct MilestoneRanking {
  /// "stddev_from_median" (the original) or "threshold"; checked by the leaderboard.
  std::string rule = "stddev_from_median";
  double points = 25.0;             ///< full credit
  double points_per_stddev = 6.25;  ///< stddev_from_median: points per standard deviation
  /// "threshold": {full_ms, zero_ms}, if the file gives one.
  std::optional<std::pair<double, double>> threshold_ms;
};

/// What a milestone asks for and how it is checked, graded and ranked.
struct Milestone {
  std::string id;  ///< its folder's name: "m1", "m2", "m3", "final"
  /// The file it was read from (for messages).
  std::filesystem::path file;
  /// One line: what the milestone asks for.
  std::string title;
  std::vector<std::string> team_writes;  ///< the student files it grades (its variants')
  /// The folders whose files of the team's it grades too (its variants' student_folder()).
  std::vector<std::string> team_folders;
  std::vector<std::string> devices;      ///< where it runs: "cpu", "gpu"
  /// Device used when --device is not given.
  std::string default_device;
  std::vector<std::string> variants;  ///< GPU variants it runs, declared (empty for CPU milestones)
  /// Variant used when --variant is not given.
  std::string default_variant;
  /// The variant whose Op Time ranks ("ranked_variant", else default_variant).
  std::string ranked_variant;
  /// Model used when none is named.
  std::string default_model;
  /// N used when none is given.
  std::int64_t default_images = 10000;
  /// Wall-clock limit of one graded run, in seconds.
  double time_limit_s = 0.0;
  /// Timed runs of the ranked check ("timed_runs", else 3).
  int timed_runs = 3;
  /// The expected results the grader checks.
  std::vector<Check> checks;
  /// "grading", if the milestone is graded.
  std::optional<MilestoneGrading> grading;
  /// "ranking", if the file gives one.
  std::optional<MilestoneRanking> ranking;

  /// A team writes code for it, so it can be graded.
  bool graded() const { return !team_writes.empty(); }
  /// No team code: it runs the library convolutions (the CPU reference, cuDNN), as m1 does.
  bool runs_library() const { return team_writes.empty(); }
  /// Whether --device chooses where it runs (it lists more than one device).
  bool device_choice() const { return devices.size() > 1; }
  /// The element-wise tolerance, |got - want| <= atol + rtol * |want| (grading.elementwise;
  /// `convlab check` and the grader use the same); 1e-4 each where the file gives none.
  double elementwise_atol() const;
  double elementwise_rtol() const;  ///< see elementwise_atol

  /// The expected count for (model, images, device) if the milestone lists one.
  std::optional<std::int64_t> expected(const std::string& model, std::int64_t images,
                                       const std::string& device) const;
};

/// The milestone ids: the folders of `root`/milestones that hold a checks.json, in course
/// order (m1, m2, ... by number, then the others, such as final, by name).
std::vector<std::string> milestone_ids(const std::filesystem::path& root = convlab_root());

/// The ids of the milestones a team writes code for, in course order.
std::vector<std::string> graded_milestone_ids(const std::filesystem::path& root = convlab_root());

/// Reads `milestones/<id>/checks.json` under `root`. Throws Error for an unknown id (listing the
/// valid ones) or a malformed file (one error naming the file and the field).
Milestone load_milestone(const std::filesystem::path& root, const std::string& id);

/// Parses one checks.json file (the folder's name is the id it must declare). Throws Error
/// naming `file` and the field for a file that is not a well-formed milestone.
Milestone parse_milestone_file(const std::filesystem::path& file);

}  // namespace convlab
