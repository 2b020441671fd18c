#include "reference/conv/elementwise.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

#include "reference/core/error.hpp"

namespace convlab {

std::vector<double> conv_reference_double(const ConvShape& s, std::span<const float> x,
                                          std::span<const float> k) {
  s.validate();
  if (static_cast<std::int64_t>(x.size()) != s.x_elements() ||
      static_cast<std::int64_t>(k.size()) != s.k_elements()) {
    throw Error("conv_reference_double: x or k does not match " + s.to_string());
  }
  const std::int64_t ho = s.H_out(), wo = s.W_out();
  std::vector<double> y(static_cast<std::size_t>(s.y_elements()), 0.0);
  for (std::int64_t b = 0; b < s.B; ++b) {
    for (std::int64_t m = 0; m < s.M; ++m) {
      double* out = y.data() + (b * s.M + m) * ho * wo;
      for (std::int64_t c = 0; c < s.C; ++c) {
        const float* in = x.data() + (b * s.C + c) * s.H * s.W;
        const float* f = k.data() + (m * s.C + c) * s.K * s.K;
        for (std::int64_t p = 0; p < s.K; ++p) {
          for (std::int64_t q = 0; q < s.K; ++q) {
            const double weight = f[p * s.K + q];
            for (std::int64_t h = 0; h < ho; ++h) {
              const float* row = in + (h + p) * s.W + q;
              double* dst = out + h * wo;
              for (std::int64_t w = 0; w < wo; ++w) dst[w] += weight * static_cast<double>(row[w]);
            }
          }
        }
      }
    }
  }
  return y;
}

namespace {

// The largest f(v) over each pooling window of `y` (laid out as y of `s`), NCHW.
template <class F>
std::vector<double> window_max(std::span<const double> y, const ConvShape& s, const PoolShape& pool,
                               F f, const char* who) {
  pool.validate(s);
  const OutputDims in = conv_output_dims(s), out = pooled_output_dims(s, pool);
  if (static_cast<std::int64_t>(y.size()) != in.elements()) {
    throw Error(std::string(who) + ": y does not match " + s.to_string());
  }
  std::vector<double> r(static_cast<std::size_t>(out.elements()));
  for (std::int64_t nc = 0; nc < out.n * out.c; ++nc) {
    const double* plane = y.data() + nc * in.h * in.w;
    for (std::int64_t h = 0; h < out.h; ++h) {
      for (std::int64_t w = 0; w < out.w; ++w) {
        double best = -std::numeric_limits<double>::infinity();
        for (std::int64_t p = 0; p < pool.size; ++p) {
          for (std::int64_t q = 0; q < pool.size; ++q) {
            best = std::max(best, f(plane[(h * pool.stride + p) * in.w + w * pool.stride + q]));
          }
        }
        r[static_cast<std::size_t>((nc * out.h + h) * out.w + w)] = best;
      }
    }
  }
  return r;
}

}  // namespace

std::vector<double> tanh_maxpool_reference(std::span<const double> y, const ConvShape& s,
                                           const PoolShape& pool) {
  return window_max(y, s, pool, [](double v) { return std::tanh(v); }, "tanh_maxpool_reference");
}

std::vector<double> pooled_allowance(std::span<const double> allowed, const ConvShape& s,
                                     const PoolShape& pool) {
  return window_max(allowed, s, pool, [](double v) { return v; }, "pooled_allowance");
}

std::string OutputDims::to_string() const {
  std::string s;
  for (const std::int64_t d : {n, c, h, w}) {
    s += '[';
    s += std::to_string(d);
    s += ']';
  }
  return s;
}

OutputDims conv_output_dims(const ConvShape& s) {
  return {s.B, s.M, s.H_out(), s.W_out()};
}

OutputDims pooled_output_dims(const ConvShape& s, const PoolShape& pool) {
  return {s.B, s.M, pool.out(s.H_out()), pool.out(s.W_out())};
}

ElementwiseComparison compare_elementwise(std::span<const float> got, std::span<const double> want,
                                          const ConvShape& s, double atol, double rtol,
                                          std::size_t keep) {
  return compare_elementwise(got, want, conv_output_dims(s), atol, rtol, keep);
}

ElementwiseComparison compare_elementwise(std::span<const float> got, std::span<const double> want,
                                          const OutputDims& d, double atol, double rtol,
                                          std::size_t keep) {
  std::vector<double> allowed(want.size());
  for (std::size_t i = 0; i < want.size(); ++i) allowed[i] = atol + rtol * std::fabs(want[i]);
  return compare_elementwise_within(got, want, allowed, d, keep);
}

ElementwiseComparison compare_elementwise_within(std::span<const float> got,
                                                 std::span<const double> want,
                                                 std::span<const double> allowed,
                                                 const OutputDims& d, std::size_t keep) {
  const auto n = static_cast<std::size_t>(d.elements());
  if (got.size() != n || want.size() != n || allowed.size() != n) {
    throw Error("compare_elementwise: " + std::to_string(got.size()) + " and " +
                std::to_string(want.size()) + " elements for an output " + d.to_string());
  }
  ElementwiseComparison c;
  c.elements = static_cast<std::int64_t>(n);
  const auto at = [&](std::size_t i, double error) {
    const auto idx = static_cast<std::int64_t>(i);
    return ElementMismatch{idx / (d.c * d.h * d.w),
                           idx / (d.h * d.w) % d.c,
                           idx / d.w % d.h,
                           idx % d.w,
                           got[i],
                           want[i],
                           error};
  };
  for (std::size_t i = 0; i < n; ++i) {
    const bool finite = std::isfinite(got[i]);
    const double error = finite ? std::fabs(static_cast<double>(got[i]) - want[i])
                                : std::numeric_limits<double>::infinity();
    // Written so that a NaN anywhere fails the test.
    const bool pass = finite && error <= allowed[i];
    if (!c.worst || error > c.worst->error) c.worst = at(i, error);
    if (pass) continue;
    c.ok = false;
    ++c.mismatches;
    c.non_finite += !finite;
    if (c.first.size() < keep) c.first.push_back(at(i, error));
  }
  return c;
}

float max_magnitude(std::span<const float> v) {
  float most = 0.0f;
  for (const float e : v) most = std::max(most, std::fabs(e));
  return most;
}

float to_magnitudes(std::span<float> v) {
  float most = 0.0f;
  for (float& e : v) most = std::max(most, e = std::fabs(e));
  return most;
}

std::vector<double> precision_allowance(Precision p, const ConvShape& shape,
                                        std::span<const float> x, std::span<const float> k) {
  std::vector<float> ax(x.begin(), x.end()), ak(k.begin(), k.end());
  const float max_x = to_magnitudes(ax), max_k = to_magnitudes(ak);
  std::vector<double> allowed = conv_reference_double(shape, ax, ak);
  const std::int64_t n = std::int64_t{shape.C} * shape.K * shape.K;
  for (double& a : allowed) a = elementwise_bound(p, n, a, max_x, max_k);
  return allowed;
}

std::vector<double> elementwise_allowance(Precision p, const ConvShape& shape,
                                          std::span<const float> x, std::span<const float> k,
                                          std::span<const double> want, double atol, double rtol) {
  std::vector<double> allowed = precision_allowance(p, shape, x, k);
  if (want.size() != allowed.size()) {
    throw Error("elementwise_allowance: " + std::to_string(want.size()) +
                " reference outputs for " + shape.to_string());
  }
  for (std::size_t i = 0; i < allowed.size(); ++i) allowed[i] += atol + rtol * std::fabs(want[i]);
  return allowed;
}

std::string describe_mismatch(const ElementMismatch& m) {
  char buf[160];
  std::snprintf(buf, sizeof buf, "y[%lld][%lld][%lld][%lld] = %.9g, expected %.9g (|error| = %.3g)",
                static_cast<long long>(m.b), static_cast<long long>(m.m),
                static_cast<long long>(m.h), static_cast<long long>(m.w),
                static_cast<double>(m.got), m.want, m.error);
  return buf;
}

}  // namespace convlab
