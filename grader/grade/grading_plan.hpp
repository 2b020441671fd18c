/// @file
/// @brief Which checks a milestone grades and for how many points, read from
/// `milestones/<id>/checks.json` ("checks", "grading"), before anything runs.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "grader/result/grade_result.hpp"
#include "reference/conv/conv_shape.hpp"
#include "reference/milestones/milestone.hpp"

namespace convlab::grader {

/// The element-wise check of a milestone (reference/milestones/milestone.hpp).
using ElementwiseSpec = ElementwiseGrading;

/// The compute-sanitizer check of a GPU milestone (reference/milestones/milestone.hpp).
using MemcheckSpec = MemcheckGrading;

/// One milestone as the grader sees it: its model (parsed once, reference/milestones/milestone.hpp)
/// and what the grader derives from it.
struct MilestoneSpec {
  Milestone milestone;  ///< the milestone's data (reference/milestones/milestone.hpp)
  bool gpu = false;     ///< its checks run on the GPU
  /// The variants it grades, ranked one first: "cpu" for m2, the registry names otherwise.
  std::vector<std::string> variants;
  std::string ranked_variant;  ///< the one whose Op Time ranks ("ranked_variant", else default)
  int timed_runs = 3;          ///< "timed_runs", else 3
  std::optional<ElementwiseSpec> elementwise;  ///< "grading"."elementwise", if any
  double hidden_model_points = 0.0;            ///< per hidden model, ranked variant only
  double other_points_per_check = 0.0;         ///< each check of a variant that is not ranked
  /// A variant's points instead, shared by its checks ("variant_points")
  std::map<std::string, double> variant_points;
  double flag_speedup_over = 10.0;             ///< a faster speedup over the reference gets a flag
  std::optional<MemcheckSpec> memcheck;        ///< "grading"."memcheck" of a GPU milestone, if any
};

/// The milestones `id` grades: one a team writes code for (m2, m3, final), or all of them in
/// course order. Throws Error for another id or a malformed file.
std::vector<MilestoneSpec> load_milestone_specs(const std::filesystem::path& root,
                                                const std::string& id);

/// A staff model from a --models folder that carries its expected counts.
struct HiddenModel {
  std::filesystem::path file;  ///< the model file
  std::string name;            ///< the file's stem (only in staff reports)
  int number = 0;              ///< what students read: "hidden model <number>"
  std::int64_t images = 0;     ///< the largest N its metadata lists
  std::int64_t expected = 0;   ///< correct predictions expected on those N images
};

/// Every *.safetensors of `dirs` (each folder in name order) whose "convlab.expected" metadata
/// lists counts, numbered from 1; `skipped` gets one line per model file without counts.
/// Throws Error for a folder that does not exist or a model file that cannot be read.
std::vector<HiddenModel> find_hidden_models(const std::vector<std::filesystem::path>& dirs,
                                            std::int64_t max_images,
                                            std::vector<std::string>* skipped = nullptr);

/// One check to run.
struct PlannedCheck {
  /// id, name, kind, milestone, variant, model, images, expected_correct, max_score, hidden.
  CheckResult check;
  std::filesystem::path model_file;  ///< network, memcheck and time checks
  bool gpu = false;                  ///< runs on the GPU
  /// The network check on the milestone's default model and N of the ranked variant: it runs
  /// with the timed runs and the reference, and its run also serves the time check.
  bool timed = false;
  const MilestoneSpec* spec = nullptr;  ///< the milestone it belongs to
};

/// Every check of `specs` after files, build and symbols, in the order they run: per milestone,
/// the ranked variant first (network checks in the file's order, hidden models, element-wise,
/// memcheck, time), then each other variant (its default network check, element-wise, and an
/// unscored memcheck). Public models are found under `models_dir`.
std::vector<PlannedCheck> plan_checks(const std::vector<MilestoneSpec>& specs,
                                      const std::vector<HiddenModel>& hidden,
                                      const std::filesystem::path& models_dir);

/// True when `id` matches one of `globs` (fnmatch without flags: `*` also crosses `/`), or when
/// `globs` is empty.
bool id_selected(const std::string& id, const std::vector<std::string>& globs);

/// Where a grade's reports go without --out: `cwd`/grade-TEAM, unless that lies inside the
/// submission (a team grading its own checkout), then the submission's build/grade-MILESTONE,
/// which the submission scan, the framework's hash, the kit's tests and `git status` leave
/// alone.
std::filesystem::path default_out_dir(const std::filesystem::path& submission,
                                      const std::string& team, const std::string& milestone,
                                      const std::filesystem::path& cwd);

}  // namespace convlab::grader
