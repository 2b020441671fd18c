// `convlab check`'s comparison and report, on convolutions made wrong on purpose: every shape
// kind the handouts promise, the worst error and the first mismatches by (b, m, h, w), outputs
// never written named as such, a second call that differs, a stub, and a reproducible seed.
#include <doctest/doctest.h>

#include <algorithm>
#include <set>
#include <sstream>

#include "reference/commands/check_command.hpp"
#include "reference/commands/run_command.hpp"
#include "reference/conv/library_conv.hpp"
#include "reference/conv/student_api.hpp"
#include "reference/core/error.hpp"

namespace test_check {

using namespace convlab;

namespace {

void right(float* y, const float* x, const float* k, const ConvShape& s) {
  conv_forward_reference(y, x, k, s);
}

// Forgets the last output column.
void skips_last_column(float* y, const float* x, const float* k, const ConvShape& s) {
  std::vector<float> full(static_cast<std::size_t>(s.y_elements()));
  conv_forward_reference(full.data(), x, k, s);
  for (std::int64_t i = 0; i < s.y_elements(); ++i) {
    if (i % s.W_out() != s.W_out() - 1) y[i] = full[static_cast<std::size_t>(i)];
  }
}

// Right only for C = 1: reads channel 0 only.
void first_channel_only(float* y, const float* x, const float* k, const ConvShape& s) {
  ConvShape one = s;
  one.C = 1;
  std::vector<float> x1(static_cast<std::size_t>(one.x_elements()));
  std::vector<float> k1(static_cast<std::size_t>(one.k_elements()));
  for (int b = 0; b < s.B; ++b) {
    std::copy_n(x + static_cast<std::int64_t>(b) * s.C * s.H * s.W, s.H * s.W,
                x1.begin() + static_cast<std::int64_t>(b) * s.H * s.W);
  }
  for (int m = 0; m < s.M; ++m) {
    std::copy_n(k + static_cast<std::int64_t>(m) * s.C * s.K * s.K, s.K * s.K,
                k1.begin() + static_cast<std::int64_t>(m) * s.K * s.K);
  }
  conv_forward_reference(y, x1.data(), k1.data(), one);
}

// Accumulates into y across calls: right once, wrong the second time.
void keeps_state(float* y, const float* x, const float* k, const ConvShape& s) {
  static int calls = 0;
  conv_forward_reference(y, x, k, s);
  if (++calls % 2 == 0) y[0] += 1.0f;
}

void stub(float*, const float*, const float*, const ConvShape&) {
  not_implemented("the m2 CPU convolution", "student/m2/conv_cpu.cpp", "milestones/m2/README.md");
}

struct Run {
  int code = 0;
  std::string text;
};

Run check_fn(CpuConvFn fn, std::uint64_t seed = 5) {
  std::ostringstream out;
  Run r;
  r.code = check_targets({{"cpu", "student/m2/conv_cpu.cpp", fn}}, "m2", seed, 1e-4, 1e-4, out);
  r.text = out.str();
  return r;
}

}  // namespace

TEST_CASE("the shapes: K = 1 to 7, C > 1, outputs that are no multiple of 8, the project's layer") {
  const auto shapes = check_shapes(99);
  std::set<int> ks;
  bool multi_channel = false;
  for (const ConvShape& s : shapes) {
    CAPTURE(s.to_string());
    ks.insert(s.K);
    multi_channel = multi_channel || s.C > 1;
    if (s.M != 50) {
      CHECK(s.H_out() % 8 != 0);
      CHECK(s.W_out() % 8 != 0);
    }
    CHECK_NOTHROW(s.validate());
  }
  CHECK(ks == std::set<int>{1, 2, 3, 4, 5, 6, 7});
  CHECK(multi_channel);
  CHECK(shapes.back().M == 50);
  // The seed decides the shapes: the same seed, the same shapes.
  const auto again = check_shapes(99);
  CHECK(std::equal(shapes.begin(), shapes.end(), again.begin(),
                   [](const ConvShape& a, const ConvShape& b) {
                     return a.to_string() == b.to_string();
                   }));
}

TEST_CASE("a right convolution passes every shape and says what to run next") {
  const Run r = check_fn(&right);
  CAPTURE(r.text);
  CHECK(r.code == 0);
  CHECK(r.text.find("seed 5") != std::string::npos);
  CHECK(r.text.find("every output right on 8 shapes") != std::string::npos);
  CHECK(r.text.find("WRONG") == std::string::npos);
}

TEST_CASE("outputs never written are named, with their (b, m, h, w)") {
  const Run r = check_fn(&skips_last_column);
  CAPTURE(r.text);
  CHECK(r.code == kExitIncorrect);
  CHECK(r.text.find("never written (y holds NaN before each call)") != std::string::npos);
  CHECK(r.text.find("worst  y[") != std::string::npos);
  CHECK(r.text.find("first  y[0][0][0][") != std::string::npos);
  CHECK(r.text.find("NaN or infinite") != std::string::npos);
  CHECK(r.text.find("--seed 5 again") != std::string::npos);
}

TEST_CASE("code right only for C = 1 fails on the shapes with C > 1") {
  const Run r = check_fn(&first_channel_only);
  CAPTURE(r.text);
  CHECK(r.code == kExitIncorrect);
  CHECK(r.text.find("outputs wrong") != std::string::npos);
  CHECK(r.text.find("C=1 ") != std::string::npos);
  CHECK(r.text.find("ok (worst error") != std::string::npos);  // the C = 1 shapes pass
}

TEST_CASE("a second call that differs from the first is caught") {
  const Run r = check_fn(&keeps_state);
  CAPTURE(r.text);
  CHECK(r.code == kExitIncorrect);
  CHECK(r.text.find("on the second call") != std::string::npos);
}

TEST_CASE("a stub is the stub's message, not a comparison") {
  CHECK_THROWS_WITH_AS(check_fn(&stub), doctest::Contains("student/m2/conv_cpu.cpp"),
                       NotImplemented);
}

}  // namespace test_check
