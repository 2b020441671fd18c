/// @file
/// @brief Helpers shared by the test suites: paths, temp dirs, random tensors, comparisons.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "reference/conv/conv_shape.hpp"
#include "reference/core/error.hpp"
#include "reference/data/fashion_mnist.hpp"

namespace convlab::test {

/// The source tree (models, milestone data).
std::filesystem::path source_dir();
/// The whole of file `p` ("" when it cannot be read).
std::string read_all(const std::filesystem::path& p);
/// How many times `what` occurs in `text` (overlapping ones too).
std::size_t occurrences(const std::string& text, const std::string& what);
/// True when `what` occurs in `text`.
bool contains(const std::string& text, const std::string& what);
/// The message of the convlab::Error that `body()` throws; "" when it throws none.
std::string error_of(auto&& body) {
  try {
    body();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}
/// The shipped model files (datasets/models/*.safetensors), sorted.
std::vector<std::filesystem::path> shipped_models();
/// The convlab executable of this build.
std::filesystem::path convlab_binary();
/// The Fashion-MNIST directory the data tests use, or nullopt (and `why`) when absent.
std::optional<std::filesystem::path> real_data_dir(std::string* why);
/// The real Fashion-MNIST test set, loaded once; skips the test binary (exit 77, reason
/// printed) when the files are not installed.
const data::Dataset& real_test_set();
/// Notes that code a suite would test is not written yet (a stub's NotImplemented message).
/// The suite goes on; at its end, if every test passed, it exits 77 (CTest: Skipped) and
/// prints each note, so an unwritten milestone reads as "skipped: write ..." and never as a
/// failure.
void note_not_implemented(const std::string& what);
/// The exit code of a test binary whose doctest run returned `result`: 1 when its filters
/// selected no test case, `result` when it failed or nothing was noted, else 77 after printing
/// the notes.
int finish(int result);
/// Exits the test binary with 77 (CTest: Skipped) after printing `reason`.
[[noreturn]] void skip(const std::string& reason);

/// A fresh empty directory under the system temp dir, removed when the object dies.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

/// n values uniform in [-1, 1) from a fixed-seed generator.
std::vector<float> random_values(std::int64_t n, std::uint32_t seed);

/// Result of comparing an output with its reference element-wise.
struct Comparison {
  bool ok = true;
  double worst_error = 0.0;  ///< largest |out - ref|
  std::int64_t mismatches = 0;
  std::string report;  ///< first mismatches with NCHW coordinates
};

/// Checks |out - ref| <= atol + rtol * |ref| for every element of y (shape's output layout).
Comparison compare_conv_output(const std::vector<float>& out, const std::vector<float>& ref,
                               const ConvShape& shape, double atol = 1e-4, double rtol = 1e-4);
/// As above, and element i may also be off by extra[i] (a tf32 or fp16 variant's
/// precision_allowance, reference/conv/elementwise.hpp); an empty `extra` adds nothing.
Comparison compare_conv_output(const std::vector<float>& out, const std::vector<float>& ref,
                               const ConvShape& shape, std::span<const double> extra,
                               double atol = 1e-4, double rtol = 1e-4);

/// Runs `args` through the shell, capturing stdout+stderr; returns the exit code.
int run_command(const std::string& command, std::string* output);

}  // namespace convlab::test
