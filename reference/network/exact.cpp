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

void conv_layer(const Layer& layer, Precision p, Activations& a) {
  const Tensor& k = layer.weight;
  const int M = static_cast<int>(k.dim(0)), C = a.c, K = static_cast<int>(k.dim(2));
  const int Ho = a.h - K + 1, Wo = a.w - K + 1;
  const std::int64_t n = static_cast<std::int64_t>(C) * K * K;
  const double u = input_unit_roundoff(p), e = input_underflow_error(p);
  const double rounding = p == Precision::fp32 ? 0.0 : 2.0 * u * u / 3.0;
  std::vector<double> y(static_cast<std::size_t>(M) * Ho * Wo);
  double var = 0.0;
  for (int m = 0; m < M; ++m) {
    const float* km = k.data() + static_cast<std::int64_t>(m) * n;
    double k2 = 0.0;
    for (std::int64_t j = 0; j < n; ++j) k2 += static_cast<double>(km[j]) * km[j];
    for (int h = 0; h < Ho; ++h) {
      for (int w = 0; w < Wo; ++w) {
        double sum = 0.0, sq = 0.0, abs_sum = 0.0, x2 = 0.0;
        for (int c = 0; c < C; ++c) {
          for (int i = 0; i < K; ++i) {
            const double* row = a.v.data() + (static_cast<std::size_t>(c) * a.h + h + i) * a.w + w;
            const float* krow = km + (c * K + i) * K;
            for (int j = 0; j < K; ++j) {
              const double t = row[j] * krow[j];
              sum += t;
              sq += t * t;
              abs_sum += std::fabs(t);
              x2 += row[j] * row[j];
            }
          }
        }
        y[(static_cast<std::size_t>(m) * Ho + h) * Wo + w] = sum;
        const double v = rounding * sq + e * e / 3.0 * (k2 + x2) + a.sigma * a.sigma * k2 +
                         accumulation_variance(n, abs_sum);
        var = std::max(var, v);
      }
    }
  }
  a.v = std::move(y);
  a.c = M;
  a.h = Ho;
  a.w = Wo;
  a.sigma = std::sqrt(var);
}

void fc_layer(const Layer& layer, Activations& a) {
  const int out = static_cast<int>(layer.weight.dim(0)), in = static_cast<int>(layer.weight.dim(1));
  std::vector<double> y(static_cast<std::size_t>(out));
  double var = 0.0;
  for (int o = 0; o < out; ++o) {
    const float* w = layer.weight.data() + static_cast<std::int64_t>(o) * in;
    double sum = layer.bias.data()[o], abs_sum = std::fabs(sum), w2 = 0.0;
    for (int i = 0; i < in; ++i) {
      sum += w[i] * a.v[static_cast<std::size_t>(i)];
      abs_sum += std::fabs(w[i] * a.v[static_cast<std::size_t>(i)]);
      w2 += static_cast<double>(w[i]) * w[i];
    }
    y[static_cast<std::size_t>(o)] = sum;
    var = std::max(var, a.sigma * a.sigma * w2 + accumulation_variance(in + 1, abs_sum));
  }
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
