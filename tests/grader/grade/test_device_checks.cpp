// The referee's output checks on the device against the host rule they replace: the same
// mismatches (count and first), the same worst error and largest allowance, with and without
// pooling, NaN never passing.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "grader/worker/repeat_checks.hpp"
#include "grader/worker/verify_rule.hpp"
#include "reference/conv/elementwise.hpp"
#include "reference/core/device_buffer.hpp"

namespace test_device_checks {

using namespace convlab;
using namespace convlab::grader;

namespace {

struct HostResult {
  std::int64_t mismatches = 0;
  std::int64_t first = -1;
  double worst = 0.0;
  double largest = 0.0;
};

// The host rule: rounding_allowance() per output, the window's largest when pooled.
std::vector<double> host_allowance(const std::vector<float>& sums, const ConvShape& s, int pool,
                                   double max_x, double max_k) {
  std::vector<double> allowed(sums.size());
  for (std::size_t i = 0; i < sums.size(); ++i) {
    allowed[i] = rounding_allowance(Precision::tf32, s, sums[i], max_x, max_k);
  }
  if (pool > 0) allowed = pooled_allowance(allowed, s, PoolShape{pool, pool});
  return allowed;
}

HostResult host_check(const std::vector<float>& got, const std::vector<float>& want,
                      const std::vector<double>& allowed) {
  REQUIRE(allowed.size() == got.size());
  HostResult r;
  for (std::size_t i = 0; i < got.size(); ++i) {
    const double g = got[i], w = want[i];
    const double err = std::isfinite(g) ? std::abs(g - w) : std::numeric_limits<double>::infinity();
    if (std::isfinite(err)) r.worst = std::max(r.worst, err);
    r.largest = std::max(r.largest, allowed[i]);
    if (!(err <= kVerifyAtol + kVerifyRtol * std::abs(w) + allowed[i])) {
      if (r.mismatches++ == 0) r.first = static_cast<std::int64_t>(i);
    }
  }
  return r;
}

}  // namespace

TEST_CASE("compare_with_allowance agrees with the host rule") {
  const ConvShape s{3, 4, 2, 12, 10, 3};  // B M C H W K: outputs 3 x 4 x 10 x 8
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> value(-1.0f, 1.0f), sum(0.0f, 40.0f);
  const double max_x = 1.0, max_k = 0.5;
  std::vector<float> sums(static_cast<std::size_t>(s.y_elements()));
  for (float& v : sums) v = sum(rng);
  DeviceBuffer dsums(s.y_elements());
  dsums.upload(sums);

  for (const int pool : {0, 2}) {
    CAPTURE(pool);
    const std::int64_t n = pool == 0 ? s.y_elements() : PoolShape{pool, pool}.pooled_elements(s);
    std::vector<float> want(static_cast<std::size_t>(n));
    for (float& v : want) v = value(rng);
    // Errors of 0 to 2 times the allowance on every third output, so that some pass and some
    // fail; a NaN; an infinity.
    const std::vector<double> allowed = host_allowance(sums, s, pool, max_x, max_k);
    std::vector<float> got = want;
    std::uniform_real_distribution<double> times(0.0, 2.0);
    for (std::size_t i = 0; i < got.size(); i += 3) {
      got[i] = static_cast<float>(want[i] + times(rng) * allowed[i]);
    }
    got[7] = std::numeric_limits<float>::quiet_NaN();
    got[n - 2] = std::numeric_limits<float>::infinity();

    DeviceBuffer dgot(n), dwant(n);
    dgot.upload(got);
    dwant.upload(want);
    DeviceAllowance a;
    a.abs_sums = dsums.data();
    a.intercept = rounding_allowance(Precision::tf32, s, 0.0, max_x, max_k);
    a.slope = rounding_allowance(Precision::tf32, s, 1.0, max_x, max_k) - a.intercept;
    a.pool = pool;
    a.height = s.H_out();
    a.width = s.W_out();
    const DeviceComparison d =
        compare_with_allowance(dgot.data(), dwant.data(), n, kVerifyAtol, kVerifyRtol, a, nullptr);
    const HostResult h = host_check(got, want, allowed);

    CHECK(h.mismatches > 2);                    // the planted errors matter...
    CHECK(h.mismatches < n / 3);                // ...and most outputs pass
    CHECK(d.mismatches == h.mismatches);
    CHECK(d.first == h.first);
    CHECK(d.worst_error == doctest::Approx(h.worst).epsilon(1e-12));
    CHECK(d.largest_allowance == doctest::Approx(h.largest).epsilon(1e-9));
  }
}

TEST_CASE("compare_on_device: exact equality passes, one changed value is found") {
  std::vector<float> x(1000);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = 0.001f * static_cast<float>(i);
  DeviceBuffer a(1000), b(1000);
  a.upload(x);
  b.upload(x);
  CHECK(compare_on_device(a.data(), b.data(), 1000, 0.0, 0.0, 0.0, nullptr).mismatches == 0);
  x[613] += 1e-6f;
  b.upload(x);
  const DeviceComparison c = compare_on_device(a.data(), b.data(), 1000, 0.0, 0.0, 0.0, nullptr);
  CHECK(c.mismatches == 1);
  CHECK(c.first == 613);
}

}  // namespace test_device_checks
