/// @file
/// @brief Helpers of the grade suites: submissions made from the staff solutions (or broken
/// on purpose), grading them through grade_submission() with this build tree's shared
/// framework cache, and finding a check in the result.
#pragma once

#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "grader/grade/grade.hpp"
#include "reference/conv/variant_table.hpp"
#include "tests/support/test_support.hpp"

namespace convlab::test {

/// The framework cache every grader suite of this build tree shares.
inline std::filesystem::path grade_cache_dir() {
  return CONVLAB_GRADER_CACHE_DIR;
}

/// The text of a file of the source tree.
inline std::string source_text(const std::string& rel) {
  std::ifstream in(source_dir() / rel);
  REQUIRE_MESSAGE(in, "cannot read " << rel);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

/// The staff solution of student file `student_rel` ("student/m2/conv_cpu.cpp", or a file of a
/// variant's folder) as a team would hand it in: the same code in namespace convlab::student.
inline std::string solution_as_student(const std::string& student_rel) {
  std::string text = source_text("reference/solutions/" + student_rel.substr(8));
  const std::string from = "convlab::solution", to = "convlab::student";
  for (std::size_t at = text.find(from); at != std::string::npos; at = text.find(from, at)) {
    text.replace(at, from.size(), to);
    at += to.size();
  }
  return text;
}

/// Writes `text` to dir/rel, creating folders.
inline void put_file(const std::filesystem::path& dir, const std::string& rel,
                     const std::string& text) {
  std::filesystem::create_directories((dir / rel).parent_path());
  std::ofstream(dir / rel, std::ios::binary) << text;
}

/// A team folder (named `team`) with its student files, and an output folder.
struct Submission {
  TempDir root;
  std::filesystem::path dir() const { return root.path() / team; }
  std::filesystem::path out() const { return root.path() / "out"; }
  std::string team = "team-test";

  explicit Submission(const std::string& name = "team-test") : team(name) {
    std::filesystem::create_directories(dir());
  }
  /// Hands in the staff solution of each of `files`, and the files of its variant's staff folder
  /// in the variant's student folder (the best kernel's routes, student/final/best/).
  void add_solutions(const std::vector<std::string>& files) const {
    for (const std::string& f : files) {
      put_file(dir(), f, solution_as_student(f));
      const Variant* v = variant_of_student_file(f);
      const std::filesystem::path staff = source_dir() / (v ? v->staff_folder() : "");
      if (v == nullptr || !std::filesystem::is_directory(staff)) continue;
      for (const auto& e : std::filesystem::directory_iterator(staff)) {
        const std::string rel = v->student_folder() + e.path().filename().string();
        put_file(dir(), rel, solution_as_student(rel));
      }
    }
  }
  /// Options that grade it for `milestone` with a fixed seed and the shared cache.
  grader::GradeOptions options(const std::string& milestone,
                               const std::vector<std::string>& only = {}) const {
    grader::GradeOptions o;
    o.submission = dir();
    o.milestone = milestone;
    o.out = out();
    o.cache = grade_cache_dir();
    o.seed = 20240601;
    o.only = only;
    // The suites run in containers that may refuse a namespace; the refusal has its own test.
    o.allow_degraded = true;
    return o;
  }
};

/// Grades, printing progress (the first grade of a test run builds the framework: minutes).
inline grader::GradeResult grade(const grader::GradeOptions& o) {
  std::cout << "grading " << o.submission.filename().string() << " for " << o.milestone << "\n";
  grader::GradeResult r = grader::grade_submission(
      o, [](const std::string& line) { std::cout << "  " << line << "\n"; });
  std::cout << std::flush;
  return r;
}

/// The check `id` of `r`; fails the test when there is none.
inline const grader::CheckResult& check_of(const grader::GradeResult& r, const std::string& id) {
  for (const grader::CheckResult& c : r.checks) {
    if (c.id == id) return c;
  }
  std::string ids;
  for (const grader::CheckResult& c : r.checks) ids += " " + c.id;
  FAIL("no check " << id << " among:" << ids);
  static grader::CheckResult none;
  return none;
}

/// Whether `r` has a check `id`.
inline bool has_check(const grader::GradeResult& r, const std::string& id) {
  for (const grader::CheckResult& c : r.checks) {
    if (c.id == id) return true;
  }
  return false;
}

/// "id: status (reason)\noutput" of every check, for INFO.
inline std::string describe(const grader::GradeResult& r) {
  std::string text;
  for (const grader::CheckResult& c : r.checks) {
    text += c.id + ": " + grader::status_name(c.status) + " (" + c.reason + ") " +
            std::to_string(c.score) + "/" + std::to_string(c.max_score) + "\n" + c.output + "\n";
  }
  return text;
}

/// Skips unless the Fashion-MNIST test set is installed.
inline void require_data() {
  std::string why;
  if (!real_data_dir(&why)) skip(why);
}

}  // namespace convlab::test
