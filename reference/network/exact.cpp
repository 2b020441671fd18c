#include "reference/network/exact.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <string>

#include "reference/core/error.hpp"
#include "reference/core/parallel.hpp"
#include "reference/network/network.hpp"

namespace convlab {

namespace {

// Error of a float32 tanh and of storing an activation in float32 (the CPU tanh is accurate to
// about 2e-7, a GPU's tanhf to 2 ulp): a generous per-value allowance.
constexpr double kActivationError = 1e-6;

// At most this many classes are estimated in one pass (fp32, tf32, fp16).
constexpr std::size_t kMaxClasses = 3;

// The classes one pass estimates the error of, with their input rounding terms.
struct Classes {
  std::size_t n = 0;
  std::array<double, kMaxClasses> rounding{};  // 2u^2/3 of a product of rounded inputs
  std::array<double, kMaxClasses> e2_3{};      // e^2/3 of an input's underflow error e
};

// One image's activations, [C][H][W] or [F], and the standard deviation of their error under
// each class.
struct Activations {
  std::vector<double> v;
  int c = 0, h = 0, w = 0;  // w = h = 1 for a vector
  std::array<double, kMaxClasses> sigma{};
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

void conv_layer(const Layer& layer, const Classes& cls, Activations& a) {
  const Tensor& k = layer.weight;
  const int M = static_cast<int>(k.dim(0)), K = static_cast<int>(k.dim(2));
  const int Ho = a.h - K + 1, Wo = a.w - K + 1;
  const std::int64_t n = static_cast<std::int64_t>(a.c) * K * K;
  std::vector<double> y(static_cast<std::size_t>(M) * Ho * Wo);
  std::array<double, kMaxClasses> var{};
  for (int m = 0; m < M; ++m) {
    const float* km = k.data() + static_cast<std::int64_t>(m) * n;
    double k2 = 0.0;
    for (std::int64_t j = 0; j < n; ++j) k2 += static_cast<double>(km[j]) * km[j];
    const auto store = [&]<int Q>(const Window<Q>& win, int h, int w) {
      for (int q = 0; q < Q; ++q) {
        y[(static_cast<std::size_t>(m) * Ho + h) * Wo + w + q] = win.sum[q];
        const double acc = accumulation_variance(n, win.abs_sum[q]);
        for (std::size_t p = 0; p < cls.n; ++p) {
          const double v = cls.rounding[p] * win.sq[q] + cls.e2_3[p] * (k2 + win.x2[q]) +
                           a.sigma[p] * a.sigma[p] * k2 + acc;
          var[p] = std::max(var[p], v);
        }
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
  for (std::size_t p = 0; p < cls.n; ++p) a.sigma[p] = std::sqrt(var[p]);
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

void fc_layer(const Layer& layer, const Classes& cls, Activations& a) {
  const int out = static_cast<int>(layer.weight.dim(0)), in = static_cast<int>(layer.weight.dim(1));
  std::vector<double> y(static_cast<std::size_t>(out));
  std::array<double, kMaxClasses> var{};
  const auto store = [&]<int Q>(const Dot<Q>& d, int o) {
    for (int q = 0; q < Q; ++q) {
      y[static_cast<std::size_t>(o + q)] = d.sum[q];
      const double acc = accumulation_variance(in + 1, d.abs_sum[q]);
      for (std::size_t p = 0; p < cls.n; ++p) {
        var[p] = std::max(var[p], a.sigma[p] * a.sigma[p] * d.w2[q] + acc);
      }
    }
  };
  int o = 0;
  for (; o + 4 <= out; o += 4) store(Dot<4>(layer, a, o), o);
  for (; o < out; ++o) store(Dot<1>(layer, a, o), o);
  a.v = std::move(y);
  a.c = out;
  a.h = a.w = 1;
  for (std::size_t p = 0; p < cls.n; ++p) a.sigma[p] = std::sqrt(var[p]);
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
  for (double& s : a.sigma) s = std::sqrt(s * s + kActivationError * kActivationError);
}

// The image's logits (the input of a final softmax) and their error estimate.
Activations run_image(const Model& model, const float* pixels, const Classes& cls) {
  Activations a;
  a.c = static_cast<int>(model.input[0]);
  a.h = static_cast<int>(model.input[1]);
  a.w = static_cast<int>(model.input[2]);
  a.v.assign(pixels, pixels + static_cast<std::ptrdiff_t>(a.c) * a.h * a.w);
  for (const Layer& layer : model.layers) {
    switch (layer.kind) {
      case LayerKind::conv:
        conv_layer(layer, cls, a);
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
        fc_layer(layer, cls, a);
        break;
      case LayerKind::softmax:
        return a;  // softmax keeps the order of the logits
    }
  }
  return a;
}

}  // namespace

std::vector<ExactRun> run_network_exact(const Model& model, const Tensor& input,
                                        std::span<const Precision> classes) {
  check_input(model, input);
  model.output_shapes();  // throws if the weights do not chain
  if (classes.empty() || classes.size() > kMaxClasses) {
    throw Error("run_network_exact: 1 to " + std::to_string(kMaxClasses) + " classes, got " +
                std::to_string(classes.size()));
  }
  Classes cls;
  cls.n = classes.size();
  for (std::size_t p = 0; p < cls.n; ++p) {
    const double u = input_unit_roundoff(classes[p]), e = input_underflow_error(classes[p]);
    cls.rounding[p] = classes[p] == Precision::fp32 ? 0.0 : 2.0 * u * u / 3.0;
    cls.e2_3[p] = e * e / 3.0;
  }
  // The first run holds what every class shares; the others get a copy at the end.
  std::vector<ExactRun> runs(cls.n);
  ExactRun& r = runs.front();
  const auto n = static_cast<std::size_t>(input.dim(0));
  for (ExactRun& run : runs) {
    run.images = input.dim(0);
    run.classes = model.classes();
    run.sigma.resize(n);
  }
  r.logits.resize(n * static_cast<std::size_t>(r.classes));
  r.predictions.resize(n);
  r.margins.resize(n);
  const std::int64_t pixels = input.size() / std::max<std::int64_t>(r.images, 1);
  parallel_for(r.images, [&](std::int64_t i0, std::int64_t i1) {
    for (std::int64_t i = i0; i < i1; ++i) {
      const Activations a = run_image(model, input.data() + i * pixels, cls);
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
      for (std::size_t p = 0; p < cls.n; ++p) runs[p].sigma[at] = a.sigma[p];
    }
  });
  for (std::size_t p = 1; p < cls.n; ++p) {
    runs[p].logits = r.logits;
    runs[p].predictions = r.predictions;
    runs[p].margins = r.margins;
  }
  return runs;
}

ExactRun run_network_exact(const Model& model, const Tensor& input, Precision p) {
  const Precision one[] = {p};
  return std::move(run_network_exact(model, input, one).front());
}

}  // namespace convlab
