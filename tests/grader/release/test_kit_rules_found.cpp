// The convolution rule finds convolutions written in every style the course teaches, and the
// one that shipped in the kit before: fixtures/profile_test_conv.cu is the profiler test's
// kernel as it was, a working m3 (staff-only: a convolution must never be in the kit, even as
// a fixture). The kit's own test (tests/kit/test_kit_rules.cpp) shows ordinary code is not one.
#include <doctest/doctest.h>

#include <fstream>
#include <sstream>
#include <string>

#include "grader/kit/kit_rules.hpp"
#include "tests/support/test_support.hpp"

namespace test_kit_rules_found {

using convlab::kit::find_convolutions;

namespace {

std::string fixture(const char* name) {
  std::ifstream in(convlab::test::source_dir() / "tests/grader/release/fixtures" / name);
  REQUIRE(in);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

std::vector<int> lines(const std::string& source) {
  std::vector<int> out;
  for (const auto& f : find_convolutions(source)) out.push_back(f.line);
  return out;
}

}  // namespace

TEST_CASE("the profiler test's old kernel, a working m3, is a convolution") {
  const std::string text = fixture("profile_test_conv.cu");
  REQUIRE(text.find("__global__ void profile_test_conv") != std::string::npos);
  CHECK(lines(text) == std::vector<int>{23});
  const auto found = convlab::kit::kit_convolutions("tests/profile/profile_test_conv.cu", text);
  REQUIRE(found.size() == 1);
  CHECK(found[0].starts_with("tests/profile/profile_test_conv.cu:23: accumulates products"));
  // Inside student/ the same code is a team's answer, which the rule leaves alone.
  CHECK(convlab::kit::kit_convolutions("student/m3/conv_baseline.cu", text).empty());
}

TEST_CASE("the seven loops of m2, as test_cpu_layers held them, are a convolution") {
  CHECK(lines(R"(
    for (int b = 0; b < s.B; ++b)
      for (int m = 0; m < s.M; ++m)
        for (int h = 0; h < s.H_out(); ++h)
          for (int w = 0; w < s.W_out(); ++w) {
            double acc = 0.0;
            for (int c = 0; c < s.C; ++c)
              for (int p = 0; p < s.K; ++p)
                for (int q = 0; q < s.K; ++q)
                  acc += static_cast<double>(x[((b * s.C + c) * s.H + h + p) * s.W + w + q]) *
                         k[((m * s.C + c) * s.K + p) * s.K + q];
            ref[((b * s.M + m) * s.H_out() + h) * s.W_out() + w] = static_cast<float>(acc);
          })") == std::vector<int>{10});
}

TEST_CASE("a convolution is found whatever its style") {
  // Multi-dimensional subscripts and a shared-memory tile.
  CHECK(lines(R"(for (int p = 0; p < K; ++p)
    for (int q = 0; q < K; ++q)
      acc += tile[threadIdx.y + p][threadIdx.x + q] * mask[m][c][p][q];)") == std::vector<int>{3});
  // fma() and acc = acc + ..., with loops stepped in other ways.
  CHECK(lines(R"(for (p = 0; p < K; p++) for (int q = K; q-- > 0;)
    acc = fmaf(x[(h + p) * W + w + q], k[p * K + q], acc);)") == std::vector<int>{2});
  CHECK(lines(R"(int p = 0, q;
    for (; p < K; p += 1) for (q = 0; q < K; ++q) sum = sum + in[c][h + p][w + q] * f[p][q];)") ==
        std::vector<int>{2});
  // The index computed first, the input row as a pointer, the loaded value in a register,
  // std::int64_t{...} casts inside the indices.
  CHECK(lines(R"(void f() {
    for (int p = 0; p < K; ++p) {
      const int row = h + p;
      for (int q = 0; q < K; ++q) {
        const long idx = (std::int64_t{row} * W) + w + q;
        acc += x[idx] * k[kidx];
      }
    }
  })") == std::vector<int>{6});
  CHECK(lines(R"(void f() {
    for (int c = 0; c < C; ++c) for (int p = 0; p < K; ++p) {
      const float* in_row = x + (std::int64_t{c} * H + h + p) * W + w;
      for (int q = 0; q < K; ++q) {
        const float v = in_row[q];
        acc -= v * k[q];
      }
    }
  })") == std::vector<int>{6});
  // Inside a lambda handed to a parallel loop, and an unrolled pair of taps.
  CHECK(lines(R"(parallel_for(n, [&](long t0, long t1) {
    for (int p = 0; p < K; ++p) for (int q = 0; q < K; q += 2)
      acc += x[(h + p) * W + w + q] * k0 + x[(h + p) * W + w + q + 1] * k1;
  });)") == std::vector<int>{3});
  // A fixture kept in a string literal, line for line.
  CHECK(lines("int a;\nconst char* fixture =\n    \"for (int p = 0; p < K; ++p) {\\n\"\n"
              "    \"  for (int q = 0; q < K; ++q) acc += x[(h + p) * W + w + q] * k[q];\\n\"\n"
              "    \"}\\n\";\n") == std::vector<int>{4});
  CHECK(lines("auto s = R\"(\nfor (int p = 0; p < K; ++p) for (int q = 0; q < K; ++q) {\n"
              "  acc += x[h + p][w + q] * k[q];\n})\";") == std::vector<int>{3});
}

TEST_CASE("what one function learns about its variables stays in that function") {
  // `row` is a window row in f only; g's `row` is a matrix row.
  CHECK(lines(R"(
    void f(const float* x) {
      for (int p = 0; p < K; ++p) { const float* row = x + (h + p) * W + p; y[0] = row[0]; }
    }
    void g() { for (int j = 0; j < n; ++j) { const float* row = a + i * n; acc += row[j] * b[j]; } })")
            .empty());
  // A pointer moved by a plain offset, then indexed by a loop: the matrix product of the
  // fully connected layer (xb = xa + in, then xb + d), one window sum, not two.
  CHECK(lines(R"(void fc() {
    const float* xb = pair ? xa + in : xa;
    for (int d = d0; d < d1; d += 8) acc += load8(xb + d) * load8(wr + d);
  })")
            .empty());
}

}  // namespace test_kit_rules_found
