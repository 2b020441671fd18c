#include "reference/layers/cpu_layers.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

#include "reference/core/ceil_div.hpp"
#include "reference/core/parallel.hpp"
#include "reference/core/simd.hpp"

namespace convlab::cpu {

namespace {

// tanh of 8 values at once, accurate to about 2e-7 absolute:
//  - |v| < 0.3: the odd Taylor series to v^9 (no cancellation near 0);
//  - otherwise 1 - 2 / (e^(2|v|) + 1), with e^x = 2^n * e^r, |r| <= ln2/2, and a degree-7
//    polynomial for e^r (relative error under 3e-8); |v| is clamped at 10, where tanh rounds
//    to 1 in float;
//  - the sign is copied back, NaN passes through.
// All lanes compute both branches and select, so the loop over it vectorises.
inline v8f tanh8(v8f v) {
  const v8i bits = bits_of(v);
  const v8i sign = bits & static_cast<int>(0x80000000u);
  const v8f a = floats_of(bits & 0x7fffffff);

  const v8f s = a * a;
  const v8f small =
      a * (1.0f + s * (-1.0f / 3 + s * (2.0f / 15 + s * (-17.0f / 315 + s * (62.0f / 2835)))));

  const v8f x = 2.0f * (a < 10.0f ? a : splat8(10.0f));
  const v8f nf =
      __builtin_convertvector(__builtin_convertvector(x * 1.44269504088896341f + 0.5f, v8i), v8f);
  const v8f r = (x - nf * 0.693145751953125f) - nf * 1.42860682030941723e-6f;
  v8f p = splat8(1.0f / 5040.0f);
  p = p * r + 1.0f / 720.0f;
  p = p * r + 1.0f / 120.0f;
  p = p * r + 1.0f / 24.0f;
  p = p * r + 1.0f / 6.0f;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  const v8f e = floats_of(bits_of(p) + (__builtin_convertvector(nf, v8i) << 23));
  const v8f large = 1.0f - 2.0f / (e + 1.0f);

  const v8f t = a < 0.3f ? small : large;
  const v8f out = floats_of(bits_of(t) | sign);
  return v == v ? out : v;
}

constexpr std::int64_t kGrain = 1 << 16;  // elements per parallel chunk for element-wise layers

template <typename F>
void elementwise(std::span<float> values, F f) {
  const auto n = static_cast<std::int64_t>(values.size());
  parallel_for(n / kGrain + 1, [&](std::int64_t c0, std::int64_t c1) {
    const std::int64_t end = std::min(n, c1 * kGrain);
    for (std::int64_t i = c0 * kGrain; i < end; ++i)
      values[static_cast<std::size_t>(i)] = f(values[static_cast<std::size_t>(i)]);
  });
}

}  // namespace

void tanh_inplace(std::span<float> values) {
  const auto n = static_cast<std::int64_t>(values.size());
  parallel_for(n / kGrain + 1, [&](std::int64_t c0, std::int64_t c1) {
    const std::int64_t end = std::min(n, c1 * kGrain);
    std::int64_t i = c0 * kGrain;
    for (; i + 8 <= end; i += 8) store8(values.data() + i, tanh8(load8(values.data() + i)));
    if (i < end) {  // the last few values, through a zero-padded vector
      float tail[8] = {};
      std::copy(values.data() + i, values.data() + end, tail);
      store8(tail, tanh8(load8(tail)));
      std::copy(tail, tail + (end - i), values.data() + i);
    }
  });
}

void relu_inplace(std::span<float> values) {
  elementwise(values, [](float v) { return v > 0.0f ? v : (v == v ? 0.0f : v); });
}

void maxpool(const float* x, float* y, std::int64_t batch, int channels, int height, int width,
             int size, int stride) {
  const int ho = (height - size) / stride + 1;
  const int wo = (width - size) / stride + 1;
  parallel_for(batch * channels, [&](std::int64_t p0, std::int64_t p1) {
    for (std::int64_t plane = p0; plane < p1; ++plane) {
      const float* in = x + plane * height * width;
      float* out = y + plane * ho * wo;
      for (int i = 0; i < ho; ++i) {
        for (int j = 0; j < wo; ++j) {
          float m = in[i * stride * width + j * stride];
          for (int p = 0; p < size; ++p) {
            for (int q = 0; q < size; ++q)
              m = std::max(m, in[(i * stride + p) * width + j * stride + q]);
          }
          out[i * wo + j] = m;
        }
      }
    }
  });
}

void fully_connected(const float* x, const float* w, const float* b, float* y, std::int64_t batch,
                     int in, int out) {
  // GEMM y = x w^T + b, blocked so a slice of w stays in cache while a block of images uses
  // it; the micro-kernel keeps 2 images x 4 outputs of 8-lane partial sums in registers.
  constexpr std::int64_t kImages = 64;
  constexpr int kDepth = 512;
  const int in8 = in / 8 * 8;
  parallel_for(ceil_div(batch, kImages), [&](std::int64_t blk0, std::int64_t blk1) {
    for (std::int64_t blk = blk0; blk < blk1; ++blk) {
      const std::int64_t n0 = blk * kImages;
      const std::int64_t n1 = std::min(batch, n0 + kImages);
      for (std::int64_t n = n0; n < n1; ++n) {
        for (int o = 0; o < out; ++o) y[n * out + o] = b != nullptr ? b[o] : 0.0f;
      }
      for (int d0 = 0; d0 < in8; d0 += kDepth) {
        const int d1 = std::min(in8, d0 + kDepth);
        for (std::int64_t n = n0; n < n1; n += 2) {
          const bool pair = n + 1 < n1;
          const float* xa = x + n * in;
          const float* xb = pair ? xa + in : xa;
          int o = 0;
          for (; o + 4 <= out; o += 4) {
            v8f acc[2][4] = {};
            const float* wr[4] = {w + std::int64_t{o} * in, w + std::int64_t{o + 1} * in,
                                  w + std::int64_t{o + 2} * in, w + std::int64_t{o + 3} * in};
            for (int d = d0; d < d1; d += 8) {
              const v8f va = load8(xa + d), vb = load8(xb + d);
              for (int r = 0; r < 4; ++r) {
                const v8f vw = load8(wr[r] + d);
                acc[0][r] += va * vw;
                acc[1][r] += vb * vw;
              }
            }
            for (int r = 0; r < 4; ++r) {
              y[n * out + o + r] += hsum8(acc[0][r]);
              if (pair) y[(n + 1) * out + o + r] += hsum8(acc[1][r]);
            }
          }
          for (; o < out; ++o) {
            v8f acc[2] = {};
            const float* wr = w + std::int64_t{o} * in;
            for (int d = d0; d < d1; d += 8) {
              acc[0] += load8(xa + d) * load8(wr + d);
              acc[1] += load8(xb + d) * load8(wr + d);
            }
            y[n * out + o] += hsum8(acc[0]);
            if (pair) y[(n + 1) * out + o] += hsum8(acc[1]);
          }
        }
      }
      // The last in % 8 columns.
      for (std::int64_t n = n0; n < n1; ++n) {
        for (int o = 0; o < out; ++o) {
          float s = 0.0f;
          for (int d = in8; d < in; ++d) s += x[n * in + d] * w[std::int64_t{o} * in + d];
          y[n * out + o] += s;
        }
      }
    }
  });
}

void softmax_rows(float* values, std::int64_t rows, int cols) {
  parallel_for(rows, [&](std::int64_t r0, std::int64_t r1) {
    for (std::int64_t r = r0; r < r1; ++r) {
      float* row = values + r * cols;
      const float m = *std::max_element(row, row + cols);
      float sum = 0.0f;
      for (int c = 0; c < cols; ++c) {
        row[c] = std::exp(row[c] - m);
        sum += row[c];
      }
      for (int c = 0; c < cols; ++c) row[c] /= sum;
    }
  });
}

}  // namespace convlab::cpu
