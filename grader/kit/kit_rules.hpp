/// @file
/// @brief What the student kit may hold, as rules that read file contents: no convolution
/// outside the sanctioned library files, and Markdown that names only files the kit has.
/// `convlab release` refuses a kit that breaks them; the kit's own test (test_kit_rules)
/// checks the kit it ships in.
#pragma once

#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace convlab::kit {

/// One place in a source text that computes a convolution.
struct ConvolutionFinding {
  int line = 0;      ///< 1-based line of the accumulation
  std::string what;  ///< why it counts, in words
};

/// The accumulations in C, C++ or CUDA `source` that add up products read through a sliding
/// window: `acc += x[..(h + p)..w + q..] * k[..]`, its fma() form and `acc = acc + ...`, where
/// the read's index (or a variable or pointer it was computed from, within one function) holds
/// at least two sums of two variables (h + p and w + q), the mark of a 2-D window. Comments are
/// skipped; string literals are read as code too, so a fixture kept in a string is found. A
/// matrix product (`a[i * n + j] * b[j]`), pooling and 1-D offsets are not convolutions here.
std::vector<ConvolutionFinding> find_convolutions(std::string_view source);

/// A kit file allowed to compute a convolution, and why.
struct SanctionedConvolution {
  std::string_view path;  ///< relative to the tree's top
  std::string_view why;
};

/// The files outside student/ that may compute a convolution, each with its reason: the
/// library convolution and the double-precision references. Every other file of the kit is
/// checked.
const std::vector<SanctionedConvolution>& sanctioned_convolutions();

/// Whether the convolution rule reads `rel_path`: every file outside student/ but Markdown
/// (handouts state the task in pseudo-code) and data (JSON, SVG, models, archives).
bool convolution_rule_reads(const std::string& rel_path);

/// "PATH:LINE: what" for each convolution in `text`, the file `rel_path` of a kit; empty for
/// a sanctioned file or one the rule does not read.
std::vector<std::string> kit_convolutions(const std::string& rel_path, std::string_view text);

/// Markdown `text` (the file `rel_path`) as the kit ships it: each block from a line
/// `<!-- staff-only: begin -->` to the next `<!-- staff-only: end -->` line, both included, is
/// left out (staff instructions inside a document both trees hold). Throws Error, naming the
/// file and line, on a marker without its partner.
std::string kit_markdown(const std::string& rel_path, std::string_view text);

/// A repository path a Markdown text names, and where.
struct NamedPath {
  int line = 0;  ///< 1-based
  /// Relative to the tree's top, normalised; a glob stops at its wildcard; a link that leaves
  /// the tree stays as written (../x.md).
  std::string path;
};

/// The tree paths Markdown `text` (the file `rel_path`, as the kit ships it) names: words that
/// start with one of the tree's top folders (`reference/solutions/m2/conv_cpu.cpp`,
/// `docs/grader.md`) and relative link targets (`[guide](../docs/student.md)`). Placeholders
/// (`<id>`, `NAME`, `ID`), build outputs and paths under a build folder are not names of files.
std::vector<NamedPath> markdown_paths(const std::string& rel_path, std::string_view text);

/// "PATH:LINE: names MISSING" for each path Markdown file `rel_path` (as the kit ships it)
/// names that `exists` (a path relative to the kit's top) says is not in the kit. The
/// changelog is history, which names files as they were, and is not read.
std::vector<std::string> missing_markdown_paths(
    const std::string& rel_path, std::string_view text,
    const std::function<bool(const std::string&)>& exists);

/// The kit's files as its RELEASE manifest lists them, or nothing when `root` holds no
/// manifest (the staff tree).
std::optional<std::vector<std::string>> release_manifest_files(const std::filesystem::path& root);

}  // namespace convlab::kit
