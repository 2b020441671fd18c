#include <algorithm>
#include <vector>

#include "reference/conv/library_conv.hpp"
#include "reference/core/parallel.hpp"
#include "reference/core/simd.hpp"

namespace convlab {

namespace {

using cpu::load8;
using cpu::splat8;
using cpu::store8;
using cpu::v8f;

constexpr int kFilters = 4;  // filters computed together: they share every input load

// Output columns [w0, w0 + 8*NV) of row h for filters m0..m0+3: NV*4 accumulators stay in
// registers while the C*K*K terms stream past. Filters past M repeat the last one (a cheap way
// to keep the loop counts fixed) and are not stored.
template <int NV>
void row_block(float* y, const float* xb, const float* k, const ConvShape& s, int m0, int h,
               int w0) {
  const int kk = s.K, ho = s.H_out(), wo = s.W_out();
  const std::int64_t k_filter = std::int64_t{s.C} * kk * kk;
  const float* kf[kFilters];
  for (int f = 0; f < kFilters; ++f) kf[f] = k + std::min(m0 + f, s.M - 1) * k_filter;
  v8f acc[kFilters][NV] = {};
  for (int c = 0; c < s.C; ++c) {
    for (int p = 0; p < kk; ++p) {
      const float* row = xb + (std::int64_t{c} * s.H + h + p) * s.W + w0;
      const std::int64_t kc = (std::int64_t{c} * kk + p) * kk;
      for (int q = 0; q < kk; ++q) {
        v8f xv[NV];
        for (int v = 0; v < NV; ++v) xv[v] = load8(row + q + 8 * v);
        for (int f = 0; f < kFilters; ++f) {
          const v8f kv = splat8(kf[f][kc + q]);
          for (int v = 0; v < NV; ++v) acc[f][v] += xv[v] * kv;
        }
      }
    }
  }
  for (int f = 0; f < kFilters && m0 + f < s.M; ++f) {
    float* out = y + (std::int64_t{m0 + f} * ho + h) * wo + w0;
    for (int v = 0; v < NV; ++v) store8(out + 8 * v, acc[f][v]);
  }
}

}  // namespace

void conv_forward_reference(float* y, const float* x, const float* k, const ConvShape& s) {
  s.validate();
  const int ho = s.H_out(), wo = s.W_out(), kk = s.K;
  const std::int64_t x_image = std::int64_t{s.C} * s.H * s.W;
  const std::int64_t y_image = std::int64_t{s.M} * ho * wo;
  const std::int64_t k_filter = std::int64_t{s.C} * kk * kk;
  const int groups = (s.M + kFilters - 1) / kFilters;
  // One task per (image, group of filters).
  parallel_for(std::int64_t{s.B} * groups, [&](std::int64_t t0, std::int64_t t1) {
    for (std::int64_t t = t0; t < t1; ++t) {
      const std::int64_t b = t / groups;
      const int m0 = static_cast<int>(t % groups) * kFilters;
      const float* xb = x + b * x_image;
      float* yb = y + b * y_image;
      for (int h = 0; h < ho; ++h) {
        int w0 = 0;
        for (; w0 + 24 <= wo; w0 += 24) row_block<3>(yb, xb, k, s, m0, h, w0);
        for (; w0 + 8 <= wo; w0 += 8) row_block<1>(yb, xb, k, s, m0, h, w0);
        // Remaining columns, one at a time.
        for (int w = w0; w < wo; ++w) {
          for (int m = m0; m < std::min(m0 + kFilters, s.M); ++m) {
            float acc = 0.0f;
            for (int c = 0; c < s.C; ++c) {
              for (int p = 0; p < kk; ++p) {
                for (int q = 0; q < kk; ++q) {
                  acc += xb[(std::int64_t{c} * s.H + h + p) * s.W + w + q] *
                         k[m * k_filter + (std::int64_t{c} * kk + p) * kk + q];
                }
              }
            }
            yb[(std::int64_t{m} * ho + h) * wo + w] = acc;
          }
        }
      }
    }
  });
}

void conv_forward_rounded(Precision p, float* y, const float* x, const float* k,
                          const ConvShape& shape) {
  std::vector<float> xr(x, x + shape.x_elements()), kr(k, k + shape.k_elements());
  for (float& v : xr) v = round_to_precision(p, v);
  for (float& v : kr) v = round_to_precision(p, v);
  conv_forward_reference(y, xr.data(), kr.data(), shape);
}

}  // namespace convlab
