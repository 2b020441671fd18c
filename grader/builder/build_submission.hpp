/// @file
/// @brief Builds one submission: scans its files (only the milestone's student files are
/// taken), overlays them on a pristine copy of the framework, compiles them with a time limit
/// in the sandbox, refuses includes from outside the framework and calls into cuDNN, cuBLAS,
/// the library convolution or the staff solutions, and links the team's harness
/// (`convlab-team`, grader/worker/) against them.
#pragma once

#include <filesystem>
#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace convlab::grader {

/// Which files of a submission were taken and which were refused.
struct SubmissionFiles {
  /// Paths relative to the framework root, e.g. "student/final/5_best.cu": the allowed files,
  /// then the team's own files in an allowed folder ("student/final/best/tiles.cu").
  std::vector<std::string> accepted;
  /// Where each accepted file is in the submission (same order as `accepted`).
  std::vector<std::filesystem::path> accepted_sources;
  /// (path in the submission, why it was refused), e.g. ("reference/network/network.cpp",
  /// "only these files are graded: ..."). Files identical to the framework's copy are ignored
  /// silently (a team may hand in its whole checkout).
  std::vector<std::pair<std::string, std::string>> rejected;
  /// Allowed files the submission does not contain (the pristine stub is graded for them).
  std::vector<std::string> missing;
};

/// What to build.
struct BuildRequest {
  std::filesystem::path submission;        ///< the team's folder
  std::vector<std::string> allowed_files;  ///< the milestone's team_writes
  /// The milestone's team_folders: the team's own files in them are graded too.
  std::vector<std::string> allowed_folders;
  std::filesystem::path framework_root;    ///< the pristine framework (convlab_root())
  std::filesystem::path work_dir;          ///< a fresh folder for this submission
  std::filesystem::path cache_dir;         ///< where the framework is built once and reused
  double time_limit_s = 600.0;             ///< wall clock of the submission's build
  /// Memory limit of each process of the team's build (compiler, assembler, linker).
  std::uint64_t memory_limit_bytes = 4ull << 30;
  bool cuda = true;                        ///< build the GPU parts
  /// Paths the submission's build may not read (hidden models, the data set): mounted over
  /// where the sandbox has a mount namespace. framework_root/reference/solutions is always
  /// added.
  std::vector<std::filesystem::path> hide_paths;
  /// Wall clock of the framework's own build (once per framework version, not the team's).
  double framework_time_limit_s = 3600.0;
  /// Parallel compile jobs; 0: Ninja's default (the number of cores + 2).
  int jobs = 0;
  /// CMAKE_CUDA_ARCHITECTURES for both builds; empty: the framework's default (this machine's
  /// GPU, else Ampere and Hopper).
  std::string cuda_architectures;
};

/// How the build went. reason: ok, build_failed, timeout, forbidden_include,
/// forbidden_symbol, framework_build_failed (the grader's own problem: reported, not blamed
/// on the team).
struct BuildResult {
  bool ok = false;
  std::string reason = "ok";
  SubmissionFiles files;
  /// The compiler's output (capped), for the student to read.
  std::string log;
  /// One line per refused include or symbol: "student/final/5_best.cu: calls
  /// cudnnConvolutionForward (cuDNN is not allowed in your code; write the convolution yourself)".
  std::vector<std::string> forbidden;
  /// The team's harness, convlab-team, linked with the team's code (meaningful when ok).
  std::filesystem::path worker;
  /// The trusted referee, convlab-check, from the cached framework build: it never holds a
  /// team's code (meaningful when ok).
  std::filesystem::path referee;
  /// Wall clock of the whole call, and of the team's part alone (configure, compile, link:
  /// what each submission costs once the framework is cached).
  double wall_s = 0.0;
  double submission_build_s = 0.0;
  /// The cached framework build used (cache_dir/<key>), whether it was already there, and
  /// how long building it took when it was not.
  std::filesystem::path framework_build;
  bool framework_reused = false;
  double framework_build_s = 0.0;
};

/// Progress lines for the terminal.
using BuildProgressFn = std::function<void(const std::string&)>;

/// Scans the submission's files against `allowed` and `allowed_folders` (see SubmissionFiles)
/// without building.
SubmissionFiles scan_submission(const std::filesystem::path& submission,
                                const std::vector<std::string>& allowed,
                                const std::filesystem::path& framework_root,
                                const std::vector<std::string>& allowed_folders = {});

/// Builds the submission. Never throws for anything the submission contains; throws Error
/// only when the request itself is unusable (no such folder, work_dir not writable).
BuildResult build_submission(const BuildRequest& request, const BuildProgressFn& progress = {});

}  // namespace convlab::grader
