#include "reference/network/exact.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "reference/core/parallel.hpp"
#include "reference/network/network.hpp"

namespace convlab {

namespace {

// Error of a float32 tanh and of storing an activation in float32 (the CPU tanh is accurate to
// about 2e-7, a GPU's tanhf to 2 ulp): a generous per-value allowance.
constexpr double kActivationError = 1e-6;

// One image's activations, [C][H][W] or [F], and the standard deviation of their error.
struct Activations {
  std::vector<double> v;
  int c = 0, h = 0, w = 0;  // w = h = 1 for a vector
  double sigma = 0.0;
};

// The variance of a float32 sum of n terms whose absolute values add to `abs_sum`: each
// partial sum rounded with relative error of variance u^2/3.
double accumulation_variance(std::int64_t n, double abs_sum) {
  return static_cast<double>(n) * kFp32UnitRoundoff * kFp32UnitRoundoff / 3.0 * abs_sum * abs_sum;
}

// Sums of Q neighbouring outputs (h, w..w+Q-1) of map `km`: each output's terms added in the
// same order as one at a time (so the same doubles), the Q chains interleaved so that the
// additions' latencies overlap.
template <int Q>
struct Window {
  double sum[Q] = {}, sq[Q] = {}, abs_sum[Q] = {}, x2[Q] = {};

  Window(const Activations& a, const float* km, int K, int h, int w) {
    for (int c = 0; c < a.c; ++c) {
      for (int i = 0; i < K; ++i) {
        const double* row = a.v.data() + (static_cast<std::size_t>(c) * a.h + h + i) * a.w + w;
        const float* krow = km + (c * K + i) * K;
        for (int j = 0; j < K; ++j) {
          const double kj = krow[j];
          for (int q = 0; q < Q; ++q) {
            const double x = row[j + q];
            const double t = x * kj;
            sum[q] += t;
            sq[q] += t * t;
            abs_sum[q] += std::fabs(t);
            x2[q] += x * x;
          }
        }
      }
    }
  }
};

void conv_layer(const Layer& layer, Precision p, Activations& a) {
  const Tensor& k = layer.weight;
  const int M = static_cast<int>(k.dim(0)), K = static_cast<int>(k.dim(2));
  const int Ho = a.h - K + 1, Wo = a.w - K + 1;
  const std::int64_t n = static_cast<std::int64_t>(a.c) * K * K;
  const double u = input_unit_roundoff(p), e = input_underflow_error(p);
  const double rounding = p == Precision::fp32 ? 0.0 : 2.0 * u * u / 3.0;
  std::vector<double> y(static_cast<std::size_t>(M) * Ho * Wo);
  double var = 0.0;
  for (int m = 0; m < M; ++m) {
    const float* km = k.data() + static_cast<std::int64_t>(m) * n;
    double k2 = 0.0;
    for (std::int64_t j = 0; j < n; ++j) k2 += static_cast<double>(km[j]) * km[j];
    const auto store = [&]<int Q>(const Window<Q>& win, int h, int w) {
      for (int q = 0; q < Q; ++q) {
        y[(static_cast<std::size_t>(m) * Ho + h) * Wo + w + q] = win.sum[q];
        const double v = rounding * win.sq[q] + e * e / 3.0 * (k2 + win.x2[q]) +
                         a.sigma * a.sigma * k2 + accumulation_variance(n, win.abs_sum[q]);
        var = std::max(var, v);
      }
    };
    for (int h = 0; h < Ho; ++h) {
      int w = 0;
      for (; w + 4 <= Wo; w += 4) store(Window<4>(a, km, K, h, w), h, w);
      for (; w < Wo; ++w) store(Window<1>(a, km, K, h, w), h, w);
    }
  }
  a.v = std::move(y);
  a.c = M;
  a.h = Ho;
  a.w = Wo;
  a.sigma = std::sqrt(var);
}

// Outputs o..o+Q-1 of a fully-connected layer, each sum in input order, the Q chains
// interleaved (as Window).
template <int Q>
struct Dot {
  double sum[Q], abs_sum[Q], w2[Q] = {};

  Dot(const Layer& layer, const Activations& a, int o) {
    const int in = static_cast<int>(layer.weight.dim(1));
    const float* w[Q];
    for (int q = 0; q < Q; ++q) {
      w[q] = layer.weight.data() + static_cast<std::int64_t>(o + q) * in;
      sum[q] = layer.bias.data()[o + q];
      abs_sum[q] = std::fabs(sum[q]);
    }
    for (int i = 0; i < in; ++i) {
      const double x = a.v[static_cast<std::size_t>(i)];
      for (int q = 0; q < Q; ++q) {
        sum[q] += w[q][i] * x;
        abs_sum[q] += std::fabs(w[q][i] * x);
        w2[q] += static_cast<double>(w[q][i]) * w[q][i];
      }
    }
  }
};

void fc_layer(const Layer& layer, Activations& a) {
  const int out = static_cast<int>(layer.weight.dim(0)), in = static_cast<int>(layer.weight.dim(1));
  std::vector<double> y(static_cast<std::size_t>(out));
  double var = 0.0;
  const auto store = [&]<int Q>(const Dot<Q>& d, int o) {
    for (int q = 0; q < Q; ++q) {
      y[static_cast<std::size_t>(o + q)] = d.sum[q];
      var = std::max(var, a.sigma * a.sigma * d.w2[q] + accumulation_variance(in + 1, d.abs_sum[q]));
    }
  };
  int o = 0;
  for (; o + 4 <= out; o += 4) store(Dot<4>(layer, a, o), o);
  for (; o < out; ++o) store(Dot<1>(layer, a, o), o);
  a.v = std::move(y);
  a.c = out;
  a.h = a.w = 1;
  a.sigma = std::sqrt(var);
}

void maxpool_layer(const Layer& layer, Activations& a) {
  const int s = layer.pool_size, st = layer.pool_stride;
  const int Ho = (a.h - s) / st + 1, Wo = (a.w - s) / st + 1;
  std::vector<double> y(static_cast<std::size_t>(a.c) * Ho * Wo);
  for (int c = 0; c < a.c; ++c) {
    for (int h = 0; h < Ho; ++h) {
      for (int w = 0; w < Wo; ++w) {
        double m = -std::numeric_limits<double>::infinity();
        for (int i = 0; i < s; ++i) {
          for (int j = 0; j < s; ++j) {
            m = std::max(m,
                         a.v[(static_cast<std::size_t>(c) * a.h + h * st + i) * a.w + w * st + j]);
          }
        }
        y[(static_cast<std::size_t>(c) * Ho + h) * Wo + w] = m;
      }
    }
  }
  a.v = std::move(y);
  a.h = Ho;
  a.w = Wo;
}

// Adds the error a float32 layer makes on every value to the estimate.
void add_activation_error(Activations& a) {
  a.sigma = std::sqrt(a.sigma * a.sigma + kActivationError * kActivationError);
}

// The image's logits (the input of a final softmax) and their error estimate.
Activations run_image(const Model& model, const float* pixels, Precision p) {
  Activations a;
  a.c = static_cast<int>(model.input[0]);
  a.h = static_cast<int>(model.input[1]);
  a.w = static_cast<int>(model.input[2]);
  a.v.assign(pixels, pixels + static_cast<std::ptrdiff_t>(a.c) * a.h * a.w);
  for (const Layer& layer : model.layers) {
    switch (layer.kind) {
      case LayerKind::conv:
        conv_layer(layer, p, a);
        break;
      case LayerKind::tanh:
        for (double& v : a.v) v = std::tanh(v);
        add_activation_error(a);
        break;
      case LayerKind::relu:
        for (double& v : a.v) v = std::max(v, 0.0);
        add_activation_error(a);
        break;
      case LayerKind::maxpool:
        maxpool_layer(layer, a);
        break;
      case LayerKind::flatten:
        a.c *= a.h * a.w;
        a.h = a.w = 1;
        break;
      case LayerKind::fc:
        fc_layer(layer, a);
        break;
      case LayerKind::softmax:
        return a;  // softmax keeps the order of the logits
    }
  }
  return a;
}

}  // namespace

ExactRun run_network_exact(const Model& model, const Tensor& input, Precision p) {
  check_input(model, input);
  model.output_shapes();  // throws if the weights do not chain
  ExactRun r;
  r.images = input.dim(0);
  r.classes = model.classes();
  const auto n = static_cast<std::size_t>(r.images);
  r.logits.resize(n * static_cast<std::size_t>(r.classes));
  r.predictions.resize(n);
  r.margins.resize(n);
  r.sigma.resize(n);
  const std::int64_t pixels = input.size() / std::max<std::int64_t>(r.images, 1);
  parallel_for(r.images, [&](std::int64_t i0, std::int64_t i1) {
    for (std::int64_t i = i0; i < i1; ++i) {
      const Activations a = run_image(model, input.data() + i * pixels, p);
      const auto at = static_cast<std::size_t>(i);
      std::copy(a.v.begin(), a.v.end(),
                r.logits.begin() + static_cast<std::ptrdiff_t>(at) * r.classes);
      const auto top = std::max_element(a.v.begin(), a.v.end());
      double second = -std::numeric_limits<double>::infinity();
      for (auto it = a.v.begin(); it != a.v.end(); ++it) {
        if (it != top) second = std::max(second, *it);
      }
      r.predictions[at] = static_cast<int>(top - a.v.begin());
      r.margins[at] = *top - second;
      r.sigma[at] = a.sigma;
    }
  });
  return r;
}

}  // namespace convlab
