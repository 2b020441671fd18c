/// @file
/// @brief The values the commands' options accept, from their one source (the milestone list,
/// the variant registry), for the checks and for `--help`.
#pragma once

#include <string>
#include <vector>

#include "reference/conv/variant_table.hpp"
#include "reference/milestones/milestone.hpp"

namespace convlab {

/// Every GPU variant's name (what --variant selects), in declaration order; the same in a
/// build without CUDA.
inline const std::vector<std::string>& variant_names() {
  static const std::vector<std::string> names = variant_ids({}, "gpu");
  return names;
}

/// What --variant accepts: a variant's name or "all".
inline std::vector<std::string> variant_choices() {
  std::vector<std::string> v = variant_names();
  v.push_back("all");
  return v;
}

/// "a, b, c" of `values`.
inline std::string joined(const std::vector<std::string>& values) {
  std::string text;
  for (const std::string& v : values) text += (text.empty() ? "" : ", ") + v;
  return text;
}

/// The variant names for a --help line.
inline std::string variant_names_help() {
  return joined(variant_names());
}

/// "m3: a; final: b, c": the GPU variants of each milestone, for a --help line.
inline std::string variants_by_milestone_help() {
  std::vector<std::string> milestones;
  for (const Variant& v : variants()) {
    if (v.gpu() && (milestones.empty() || milestones.back() != v.milestone)) {
      milestones.emplace_back(v.milestone);
    }
  }
  std::string text;
  for (const std::string& m : milestones) {
    text += (text.empty() ? "" : "; ") + m + ": " + joined(variant_ids(m, "gpu"));
  }
  return text;
}

}  // namespace convlab
