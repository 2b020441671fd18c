/// @file
/// @brief Helpers of the build suites: a submission folder, a request against this source
/// tree and the shared framework cache, and a readable summary of a result.
#pragma once

#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <string>
#include <vector>

#include "grader/builder/build_submission.hpp"
#include "tests/support/test_support.hpp"

namespace convlab::test {

/// Whether this build compiles the GPU parts (and so builds submissions with them).
#ifdef CONVLAB_HAVE_CUDA
inline constexpr bool kCudaBuild = true;
#else
inline constexpr bool kCudaBuild = false;
#endif

/// The framework cache every grader suite of this build tree shares.
inline std::filesystem::path grader_cache_dir() {
  return CONVLAB_GRADER_CACHE_DIR;
}

/// Writes `text` to dir/rel, creating folders.
inline void write_file(const std::filesystem::path& dir, const std::string& rel,
                       const std::string& text) {
  std::filesystem::create_directories((dir / rel).parent_path());
  std::ofstream(dir / rel, std::ios::binary) << text;
}

/// The staff solution of a student file (or of a file in a variant's folder), rewritten as a
/// team's file (namespace convlab::student): realistic code that every check must accept. Empty
/// when this tree has no staff solutions.
inline std::string solution_as_team_file(const std::string& student_file) {
  const std::filesystem::path path =
      source_dir() / "reference/solutions" / student_file.substr(std::string("student/").size());
  std::ifstream in(path, std::ios::binary);
  if (!in) return {};
  std::string text{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  const std::string from = "convlab::solution", to = "convlab::student";
  for (auto at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size())) {
    text.replace(at, from.size(), to);
  }
  return text;
}

/// A submission folder and a work folder, and the request that builds one into the other.
struct BuildFixture {
  TempDir submission;
  TempDir work;

  grader::BuildRequest request(const std::vector<std::string>& allowed,
                               const std::vector<std::string>& folders = {}) const {
    grader::BuildRequest r;
    r.submission = submission.path();
    r.allowed_files = allowed;
    r.allowed_folders = folders;
    r.framework_root = source_dir();
    r.work_dir = work.path() / "work";
    r.cache_dir = grader_cache_dir();
    r.time_limit_s = 900.0;
    r.cuda = kCudaBuild;
    return r;
  }
};

/// The result in a few lines, for CAPTURE.
inline std::string summary(const grader::BuildResult& r) {
  std::string text = "reason " + r.reason + ", " + std::to_string(r.wall_s) + " s\n";
  for (const std::string& line : r.forbidden) text += "forbidden: " + line + "\n";
  return text + "log:\n" + r.log;
}

/// Builds, printing progress and the time taken.
inline grader::BuildResult build_and_report(const grader::BuildRequest& request,
                                            const std::string& what) {
  std::cout << what << ":\n";
  const grader::BuildResult r = grader::build_submission(
      request, [](const std::string& line) { std::cout << "  " << line << "\n"; });
  std::cout << "  -> " << r.reason << " in " << r.wall_s << " s (the team's build "
            << r.submission_build_s << " s; framework "
            << (r.framework_build.empty() ? std::string("not needed")
                : r.framework_reused      ? std::string("cached")
                                     : "built in " + std::to_string(r.framework_build_s) + " s")
            << ")\n";
  for (const std::string& line : r.forbidden) std::cout << "  forbidden: " << line << "\n";
  if (!r.ok && r.forbidden.empty()) std::cout << "  log:\n" << r.log;
  std::cout << std::flush;
  return r;
}

}  // namespace convlab::test
