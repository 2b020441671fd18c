// `convlab run`'s check before the network: a wrong m2 stops with the `convlab check` message and
// exit 3 at N = 100 as at N = 10000, a right one prints the original lines only, and a stub still
// gives its own message. The wrong convolutions are the library convolution on altered inputs or
// with an output left unwritten, each one a mistake students make.
#include <doctest/doctest.h>

#include <algorithm>
#include <sstream>

#include "reference/commands/check_command.hpp"
#include "reference/commands/run_steps.hpp"
#include "reference/conv/library_conv.hpp"
#include "reference/conv/student_api.hpp"
#include "reference/core/error.hpp"
#include "tests/support/test_support.hpp"

namespace test_run_check {

using namespace convlab;

namespace {

std::vector<float> copy_of(const float* v, std::int64_t n) {
  return std::vector<float>(v, v + n);
}

void right(float* y, const float* x, const float* k, const ConvShape& s) {
  conv_forward_reference(y, x, k, s);
}

// A wrong filter index: k[m][c][K-1-p][K-1-q] (the filter flipped) instead of k[m][c][p][q].
void wrong_filter_index(float* y, const float* x, const float* k, const ConvShape& s) {
  std::vector<float> flipped = copy_of(k, s.k_elements());
  const std::int64_t kk = std::int64_t{s.K} * s.K;
  for (std::int64_t f = 0; f < s.k_elements(); f += kk) {
    std::reverse(flipped.begin() + f, flipped.begin() + f + kk);
  }
  conv_forward_reference(y, x, flipped.data(), s);
}

// A missed border column: the last output column is never written.
void misses_last_column(float* y, const float* x, const float* k, const ConvShape& s) {
  std::vector<float> full(static_cast<std::size_t>(s.y_elements()));
  conv_forward_reference(full.data(), x, k, s);
  for (std::int64_t i = 0; i < s.y_elements(); ++i) {
    if (i % s.W_out() != s.W_out() - 1) y[i] = full[static_cast<std::size_t>(i)];
  }
}

// A wrong channel stride: channel c of image b read at c * H_out * W_out instead of c * H * W
// (the same values when C = 1).
void wrong_channel_stride(float* y, const float* x, const float* k, const ConvShape& s) {
  std::vector<float> as_read(static_cast<std::size_t>(s.x_elements()));
  const std::int64_t image = std::int64_t{s.C} * s.H * s.W, plane = std::int64_t{s.H} * s.W;
  for (std::int64_t b = 0; b < s.B; ++b) {
    for (std::int64_t c = 0; c < s.C; ++c) {
      std::copy_n(x + b * image + c * s.H_out() * s.W_out(), plane,
                  as_read.begin() + b * image + c * plane);
    }
  }
  conv_forward_reference(y, as_read.data(), k, s);
}

void stub(float*, const float*, const float*, const ConvShape&) {
  not_implemented("the m2 CPU convolution", "student/m2/conv_cpu.cpp", "milestones/m2/README.md");
}

struct Run {
  int code = 0;
  std::string out;
  std::string err;
};

// `convlab run m2 <model> <n>` as the command runs it, with `fn` as the team's m2.
Run run_m2(CpuConvFn fn, std::int64_t n, const std::string& model = "ece408-high") {
  RunOptions opt;
  opt.milestone = "m2";
  opt.model = model;
  opt.images = n;
  RunPlan plan = plan_run(opt, /*fuse=*/true);
  plan.cpu_code = fn;
  std::ostringstream out, err;
  Run r;
  const RunResult result = execute_run(plan, out);
  r.code = report_run(plan, result, out, err);
  r.out = out.str();
  r.err = err.str();
  return r;
}

bool has(const std::string& text, const std::string& what) {
  return text.find(what) != std::string::npos;
}

}  // namespace

TEST_CASE("the shapes of the run's check: the model's layers with a few images, C > 1 too") {
  const std::vector<ConvShape> layers{{128, 50, 1, 28, 28, 5}, {128, 20, 50, 12, 12, 3}};
  const auto shapes = run_check_shapes(layers, 100);
  REQUIRE(shapes.size() == 2);  // a layer with C > 1 is there already
  CHECK(shapes[0].B == 3);
  CHECK(shapes[0].M == 50);
  CHECK(shapes[1].C == 50);

  const auto one_image = run_check_shapes({{128, 50, 1, 28, 28, 5}}, 1);
  REQUIRE(one_image.size() == 2);
  CHECK(one_image[0].B == 1);
  CHECK(one_image[0].C == 1);
  CHECK(one_image[1].C == 3);  // the first layer again, with channels
  CHECK(one_image[1].K == 5);
  CHECK(one_image[1].H == 28);
}

TEST_CASE("check_before_run: silent when right; the check's lines and the next step when wrong") {
  const auto shapes = run_check_shapes({{1, 50, 1, 28, 28, 5}}, 100);
  std::ostringstream out;
  CHECK(check_before_run({"cpu", "student/m2/conv_cpu.cpp", right}, shapes, "m2", 1e-4, 1e-4,
                         out));
  CHECK(out.str().empty());

  CHECK_FALSE(check_before_run({"cpu", "student/m2/conv_cpu.cpp", wrong_channel_stride}, shapes,
                               "m2", 1e-4, 1e-4, out));
  const std::string text = out.str();
  CAPTURE(text);
  CHECK(has(text, "cpu (student/m2/conv_cpu.cpp) is WRONG, so the network did not run"));
  CHECK(has(text, "of its first layer with C = 3 input channels too"));
  CHECK(has(text, "B=1 M=50 C=3 H=28 W=28 K=5"));  // only the failing shape is listed
  CHECK_FALSE(has(text, "C=1 H=28"));
  CHECK(has(text, "    worst  y["));
  CHECK(has(text, "then run convlab check m2: it names the wrong outputs"));
}

TEST_CASE("a wrong m2 stops `convlab run m2 ece408-high N` with exit 3, at N = 100 and 10000") {
  std::string why;
  if (!test::real_data_dir(&why)) test::skip(why);
  struct Mistake {
    const char* name;
    CpuConvFn fn;
    const char* says;  // what the message must show
  };
  const Mistake mistakes[] = {
      {"wrong filter index", wrong_filter_index, "outputs wrong"},
      {"missed border column", misses_last_column, "never written (y holds NaN"},
      {"wrong channel stride", wrong_channel_stride, "C=3 H=28 W=28 K=5"},
  };
  for (const Mistake& m : mistakes) {
    for (const std::int64_t n : {100, 10000}) {
      CAPTURE(m.name);
      CAPTURE(n);
      const Run r = run_m2(m.fn, n);
      CAPTURE(r.out);
      CAPTURE(r.err);
      CHECK(r.code == kExitIncorrect);
      CHECK(has(r.out, "Loading model... done\ncpu (student/m2/conv_cpu.cpp) is WRONG"));
      CHECK(has(r.out, "WRONG: "));
      CHECK(has(r.out, m.says));
      CHECK(has(r.out, "Fix student/m2/conv_cpu.cpp"));
      // The network did not run: no figures that could be read as a result.
      CHECK_FALSE(has(r.out, "Op Time"));
      CHECK_FALSE(has(r.out, "Correctness"));
    }
  }
}

TEST_CASE("a right m2 passes the check silently: the original four lines, exit 0") {
  std::string why;
  if (!test::real_data_dir(&why)) test::skip(why);
  const Run r = run_m2(right, 100);
  CAPTURE(r.out);
  CAPTURE(r.err);
  CHECK(r.code == 0);
  CHECK(r.out.starts_with("Loading fashion-mnist data... done\nLoading model... done\nOp Time: "));
  CHECK(has(r.out, "Correctness: "));
  CHECK_FALSE(has(r.out, "WRONG"));
}

TEST_CASE("a stub still gives its own message, not a wrong-output report") {
  std::string why;
  if (!test::real_data_dir(&why)) test::skip(why);
  try {
    run_m2(stub, 100);
    FAIL("a stub ran");
  } catch (const NotImplemented& e) {
    CHECK(has(e.what(), "student/m2/conv_cpu.cpp"));
  }
}

}  // namespace test_run_check
