/// @file
/// @brief `convlab release`: the student starter kit, copied from the framework tree without
/// the staff solutions, the staff tools, the instructor guide, build and data folders, and
/// without any model file that is not one of the public models. A RELEASE manifest
/// (`sha256sum -c RELEASE` checks it) records every file and its SHA-256.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace convlab::grader {

/// What goes into a release and what stays out.
struct ReleasePlan {
  /// Files of the kit, relative to its top, sorted.
  std::vector<std::string> files;
  /// Kit files copied from another path of the tree (grader/release/kit/X becomes X): kit path
  /// -> tree path. Every other file is copied from the same path.
  std::map<std::string, std::string> sources;
  /// "FILE:LINE: defines NAME" for every shipped file outside student/ that defines a student
  /// entry point (student_api.hpp, variants.def). make_release refuses a non-empty list.
  std::vector<std::string> entry_point_definitions;
  /// "FILE:LINE: what" for every shipped file outside student/ that computes a convolution and
  /// is not one of the sanctioned library files (grader/kit/kit_rules.hpp). make_release
  /// refuses a non-empty list.
  std::vector<std::string> convolutions;
  /// "FILE:LINE: names PATH, ..." for every tree path a shipped Markdown file names that the
  /// kit does not have. make_release refuses a non-empty list.
  std::vector<std::string> missing_paths;
  /// (path, why) of everything left out; a folder left out is one entry.
  std::vector<std::pair<std::string, std::string>> left_out;
  /// Model files (.safetensors) that are not public models: never copied. A non-empty list is
  /// what an instructor must look at (a hidden model inside the framework tree).
  std::vector<std::string> refused_models;
  /// The public models: those a milestone's checks.json names, found in datasets/models.
  std::vector<std::string> public_models;
};

/// Decides, from the framework tree at `root`, what a release holds. Paths under `exclude`
/// (the release's own folder when it lies inside the tree) are skipped.
ReleasePlan plan_release(const std::filesystem::path& root,
                         const std::filesystem::path& exclude = {});

/// What `convlab release` accepts.
struct ReleaseOptions {
  std::filesystem::path root;  ///< the framework tree (convlab_root())
  std::filesystem::path out;   ///< where the starter kit goes
  bool force = false;          ///< replace the contents of a non-empty `out` (a .git folder stays)
};

/// What was written.
struct ReleaseResult {
  ReleasePlan plan;                ///< what was copied and what was left out
  std::filesystem::path manifest;  ///< OUT/RELEASE
  std::uintmax_t bytes = 0;        ///< total size of the copied files
};

/// One line of progress for the terminal.
using ReleaseProgressFn = std::function<void(const std::string& line)>;

/// The student entry points of the tree at `root`: the functions student_api.hpp declares in
/// namespace student and the entry points of every line of variants.def. Throws Error when
/// neither file is there.
std::vector<std::string> student_entry_points(const std::filesystem::path& root);

/// "LINE: defines NAME" for each definition (a name, its parameter list, then a body) of one of
/// `names` in `text`, wherever it is (code, comments or string literals alike).
std::vector<std::string> find_definitions(const std::string& text,
                                          const std::vector<std::string>& names);

/// Copies the plan's files into options.out (Markdown without its staff-only blocks,
/// kit::kit_markdown) and writes the manifest. Throws Error, before
/// writing anything, when a shipped file outside student/ defines a student entry point or
/// computes a convolution, when a shipped Markdown file names a path the kit lacks, when
/// `out` is not empty (without force) or overlaps the framework tree; and when it cannot be
/// written.
ReleaseResult make_release(const ReleaseOptions& options, const ReleaseProgressFn& progress = {});

/// Name of the manifest file at the top of a release.
inline constexpr const char* kReleaseManifest = "RELEASE";

}  // namespace convlab::grader
