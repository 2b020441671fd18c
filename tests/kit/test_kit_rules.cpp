// The student kit's rules, checked on the kit this test ships in: no file outside student/
// computes a convolution except the sanctioned library files, and every tree path a Markdown
// file names is a file or folder of the kit. In the staff tree (no RELEASE manifest) those two
// cases skip; test_release checks the release plan there with the same rules. The cases that
// show a convolution being found live in the staff suite, since their fixtures are convolutions.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>

#include "grader/kit/kit_rules.hpp"
#include "reference/core/error.hpp"
#include "tests/support/test_support.hpp"

namespace test_kit_rules {

using convlab::test::read_all;
namespace fs = std::filesystem;
using convlab::kit::find_convolutions;

namespace {

bool in_kit() {
  return fs::exists(convlab::test::source_dir() / "RELEASE");
}

std::string joined(const std::vector<std::string>& lines) {
  std::string text;
  for (const std::string& l : lines) text += l + "\n";
  return text;
}

}  // namespace

TEST_CASE("ordinary loops are not convolutions") {
  // The fully connected layer: a matrix product.
  CHECK(find_convolutions(R"(
    for (int o = 0; o < out; ++o) {
      float acc = bias[o];
      for (int i = 0; i < n; ++i) acc += w[o * n + i] * in[b * n + i];
      y[b * out + o] = acc;
    })")
            .empty());
  // A tiled matrix product, with its shared-memory loads.
  CHECK(find_convolutions(R"(
    __global__ void gemm(const float* A, const float* B, float* C, int n) {
      __shared__ float As[16][16], Bs[16][16];
      const int row = blockIdx.y * 16 + threadIdx.y, col = blockIdx.x * 16 + threadIdx.x;
      float sum = 0.0f;
      for (int t = 0; t < n / 16; ++t) {
        As[threadIdx.y][threadIdx.x] = A[row * n + t * 16 + threadIdx.x];
        Bs[threadIdx.y][threadIdx.x] = B[(t * 16 + threadIdx.y) * n + col];
        __syncthreads();
        for (int k = 0; k < 16; ++k) sum = fmaf(As[threadIdx.y][k], Bs[k][threadIdx.x], sum);
        __syncthreads();
      }
      C[row * n + col] = sum;
    })")
            .empty());
  // Max-pooling reads a window but multiplies nothing.
  CHECK(find_convolutions(R"(
    for (int p = 0; p < size; ++p)
      for (int q = 0; q < size; ++q)
        m = std::max(m, in[(i + p) * width + j + q]);)")
            .empty());
  // A dot product at an offset, and a 1-D running sum: one sum of two variables each.
  CHECK(find_convolutions("for (int i = 0; i < n; ++i) acc += a[base + i] * b[i];").empty());
  CHECK(find_convolutions("s += w[j] * v[i + j]; total += count;").empty());
  // A transpose through a tile copies a window and multiplies nothing.
  CHECK(find_convolutions(R"(
    tile[ty][tx] = in[(by + ty) * w + bx + tx];
    out[(bx + ty) * h + by + tx] = tile[tx][ty];)")
            .empty());
  // The convolution's formula in a comment or a message is the task's statement, not code.
  CHECK(find_convolutions("// acc += x[b][c][h + p][w + q] * k[m][c][p][q];\n"
                          "/* acc += x[(h + p) * W + w + q] * k[p * K + q]; */\n")
            .empty());
  CHECK(
      find_convolutions(R"(const char* msg = "x[b][c][h+p][w+q] * k[m][c][p][q] above";)").empty());
}

TEST_CASE("each sanctioned file holds a convolution the rule finds") {
  // Each is in the kit and in the staff tree. A stale entry, or a rule too narrow to see the
  // library's own code, fails here.
  REQUIRE(convlab::kit::sanctioned_convolutions().size() == 3);
  for (const auto& s : convlab::kit::sanctioned_convolutions()) {
    const std::string path(s.path);
    CAPTURE(path);
    CHECK_FALSE(s.why.empty());
    const std::string text = read_all(convlab::test::source_dir() / path);
    REQUIRE_FALSE(text.empty());
    CHECK_FALSE(find_convolutions(text).empty());
    CHECK(convlab::kit::kit_convolutions(path, text).empty());
  }
}

TEST_CASE("the rule reads every file outside student/ but Markdown and data") {
  using convlab::kit::convolution_rule_reads;
  for (const char* f : {"tests/profile/profile_test_kernel.cu", "reference/core/x.cuh",
                        "tools/setup.sh", "tests/CMakeLists.txt", "reference/conv/variants.def"}) {
    CHECK_MESSAGE(convolution_rule_reads(f), f);
  }
  for (const char* f : {"student/m2/conv_cpu.cpp", "milestones/m2/README.md",
                        "milestones/m2/checks.json", "datasets/models/baseline.safetensors"}) {
    CHECK_MESSAGE(!convolution_rule_reads(f), f);
  }
}

TEST_CASE("the tree paths a Markdown file names") {
  const auto names = [](const std::string& file, const std::string& text) {
    std::vector<std::string> paths;
    for (const auto& p : convlab::kit::markdown_paths(file, text)) {
      paths.push_back(std::to_string(p.line) + " " + p.path);
    }
    return paths;
  };
  CHECK(names("milestones/final/README.md",
              "See `reference/solutions/final/5_best.cu`.\n"
              "Read [the guide](../../docs/student.md#build) and docs/grader.md, then\n"
              "`build/cpu/reference/driver/convlab`, https://x.org/docs/y, "
              "`reference/solutions/*`, `milestones/<id>/checks.json`, "
              "`datasets/models/NAME.safetensors`, [top](#how), [web](https://a.b/c).\n"
              "[out](../../../etc/passwd)") ==
        std::vector<std::string>{"1 reference/solutions/final/5_best.cu", "2 docs/student.md",
                                 "2 docs/grader.md", "3 reference/solutions/",
                                 "4 ../../../etc/passwd"});

  const std::set<std::string> kit{"docs/student.md", "docs/grader.md"};
  const auto exists = [&](const std::string& p) { return kit.contains(p); };
  const auto missing = convlab::kit::missing_markdown_paths(
      "README.md", "[a](docs/student.md) `docs/instructor.md`\n[b](../x.md)", exists);
  CHECK(missing == std::vector<std::string>{
                       "README.md:1: names docs/instructor.md, which the kit does not have",
                       "README.md:2: names ../x.md, which the kit does not have"});
}

TEST_CASE("the kit holds no convolution outside the sanctioned files" * doctest::skip(!in_kit())) {
  const fs::path root = convlab::test::source_dir();
  const auto files = convlab::kit::release_manifest_files(root);
  REQUIRE(files);
  REQUIRE(files->size() > 100);
  std::vector<std::string> found;
  int read = 0;
  for (const std::string& rel : *files) {
    if (!convlab::kit::convolution_rule_reads(rel)) continue;
    ++read;
    for (std::string& f : convlab::kit::kit_convolutions(rel, read_all(root / rel))) {
      found.push_back(std::move(f));
    }
  }
  CHECK(read > 100);
  CHECK_MESSAGE(found.empty(),
                "a convolution outside the sanctioned files (a way to the "
                "answers):\n"
                    << joined(found));
}

TEST_CASE("the kit's Markdown names only files the kit has" * doctest::skip(!in_kit())) {
  const fs::path root = convlab::test::source_dir();
  const auto files = convlab::kit::release_manifest_files(root);
  REQUIRE(files);
  std::set<std::string> have(files->begin(), files->end());
  for (const std::string& f : *files) {
    for (fs::path d = fs::path(f).parent_path(); !d.empty(); d = d.parent_path()) {
      have.insert(d.generic_string());
    }
  }
  const auto exists = [&](std::string p) {
    if (p.ends_with("/")) p.pop_back();
    return have.contains(p);
  };
  std::vector<std::string> missing;
  for (const std::string& rel : *files) {
    if (fs::path(rel).extension() != ".md") continue;
    for (std::string& m :
         convlab::kit::missing_markdown_paths(rel, read_all(root / rel), exists)) {
      missing.push_back(std::move(m));
    }
  }
  CHECK_MESSAGE(missing.empty(), joined(missing));
}

TEST_CASE("Markdown ships without its staff-only blocks") {
  using convlab::kit::kit_markdown;
  const std::string doc =
      "# Title\nFor everyone.\n<!-- staff-only: begin -->\nRun `tools/train`.\n"
      "<!-- staff-only: end -->\nAgain for everyone.\n";
  CHECK(kit_markdown("docs/x.md", doc) == "# Title\nFor everyone.\nAgain for everyone.\n");
  CHECK(kit_markdown("docs/x.md", "no blocks\n") == "no blocks\n");
  // A marker without its partner is an error that names the file and the line.
  CHECK_THROWS_WITH_AS(kit_markdown("docs/x.md", "a\n<!-- staff-only: begin -->\nb\n"),
                       doctest::Contains("docs/x.md:2: a staff-only block without"),
                       convlab::Error);
  CHECK_THROWS_WITH_AS(kit_markdown("docs/x.md", "a\n<!-- staff-only: end -->\n"),
                       doctest::Contains("docs/x.md:2: <!-- staff-only: end --> without"),
                       convlab::Error);
  CHECK_THROWS_WITH_AS(
      kit_markdown("docs/x.md", "<!-- staff-only: begin -->\n<!-- staff-only: begin -->\n"),
      doctest::Contains("docs/x.md:2: <!-- staff-only: begin --> inside the staff-only block "
                        "opened on line 1"),
      convlab::Error);
}

}  // namespace test_kit_rules
