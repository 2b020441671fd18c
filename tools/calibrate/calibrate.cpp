#include "tools/calibrate/calibrate.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <sstream>

#include "reference/core/error.hpp"
#include "reference/core/parallel.hpp"
#include "tools/train/net.hpp"
#include "tools/train/trainer.hpp"

namespace convlab::tools {
namespace {

std::string fmt(const char* format, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, format, v);
  return buf;
}

/// Margin of one image: the predicted class's logit minus the best other logit.
double margin_of(const double* z, std::int64_t classes, int pred) {
  double other = -std::numeric_limits<double>::infinity();
  for (std::int64_t k = 0; k < classes; ++k) {
    if (k != pred) other = std::max(other, z[k]);
  }
  return z[pred] - other;
}

}  // namespace

std::int64_t Evaluation::correct(std::int64_t n) const {
  if (n < 0 || n > count) throw Error("Evaluation::correct: n out of range");
  std::int64_t c = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    if (predictions[static_cast<std::size_t>(i)] == labels[static_cast<std::size_t>(i)]) ++c;
  }
  return c;
}

double Evaluation::margin(std::int64_t i) const {
  return margin_of(logits.data() + i * classes, classes, predictions[static_cast<std::size_t>(i)]);
}

double Evaluation::min_margin() const {
  double m = std::numeric_limits<double>::infinity();
  for (std::int64_t i = 0; i < count; ++i) m = std::min(m, margin(i));
  return m;
}

double Evaluation::max_abs_logit() const {
  double m = 0.0;
  for (double z : logits) m = std::max(m, std::abs(z));
  return m;
}

Evaluation evaluate_exact(const Model& model, const data::Dataset& data, std::int64_t n,
                          bool keep_inputs) {
  check_data(model, data, n);
  const NetPlan plan = make_plan(model);
  const std::vector<double> params = flatten_params<double>(plan, model);
  const LayerPlan& last_fc = plan.layers[static_cast<std::size_t>(plan.logits_layer)];
  Evaluation e;
  e.count = n;
  e.classes = plan.classes;
  e.features = last_fc.in_size();
  e.logits.resize(static_cast<std::size_t>(n * e.classes));
  if (keep_inputs) e.inputs.resize(static_cast<std::size_t>(n * e.features));
  e.predictions.resize(static_cast<std::size_t>(n));
  e.labels.assign(data.labels.begin(), data.labels.begin() + n);
  constexpr std::int64_t kGroup = 16;
  const std::int64_t groups = (n + kGroup - 1) / kGroup;
  const std::int64_t pixels = plan.input_size;
  parallel_for(groups, [&](std::int64_t g0, std::int64_t g1) {
    Workspace<double> ws = make_workspace<double>(plan, static_cast<int>(kGroup));
    for (std::int64_t g = g0; g < g1; ++g) {
      const std::int64_t first = g * kGroup, count = std::min(kGroup, n - first);
      for (std::int64_t k = 0; k < count * pixels; ++k) {
        // The input every float32 implementation sees: byte times scale, rounded to float.
        ws.input[static_cast<std::size_t>(k)] = static_cast<double>(
            static_cast<float>(data.pixels[static_cast<std::size_t>(first * pixels + k)]) *
            model.input_scale);
      }
      forward(plan, params.data(), static_cast<int>(count), ws);
      const double* z = ws.acts[static_cast<std::size_t>(plan.logits_layer)].data();
      std::copy(z, z + count * e.classes, e.logits.begin() + first * e.classes);
      for (std::int64_t j = 0; j < count; ++j) {
        e.predictions[static_cast<std::size_t>(first + j)] =
            argmax_of(z + j * e.classes, e.classes);
      }
      if (keep_inputs) {
        const double* h = plan.logits_layer == 0
                              ? ws.input.data()
                              : ws.acts[static_cast<std::size_t>(plan.logits_layer - 1)].data();
        std::copy(h, h + count * e.features, e.inputs.begin() + first * e.features);
      }
    }
  });
  return e;
}

Model interpolate(const Model& a, const Model& b, double t) {
  if (a.layers.size() != b.layers.size() || a.input != b.input) {
    throw Error("cannot interpolate '" + a.name + "' and '" + b.name + "': different networks");
  }
  Model out = b;
  for (std::size_t i = 0; i < b.layers.size(); ++i) {
    const Layer& la = a.layers[i];
    Layer& lo = out.layers[i];
    if (la.kind != lo.kind || la.weight.shape() != lo.weight.shape() ||
        la.bias.shape() != lo.bias.shape() || la.pool_size != lo.pool_size ||
        la.pool_stride != lo.pool_stride) {
      throw Error("cannot interpolate '" + a.name + "' and '" + b.name + "': layer " +
                  std::to_string(i) + " differs");
    }
    const auto mix = [t](std::span<const float> x, std::span<float> y) {
      for (std::size_t k = 0; k < y.size(); ++k) {
        y[k] = static_cast<float>((1.0 - t) * static_cast<double>(x[k]) +
                                  t * static_cast<double>(y[k]));
      }
    };
    mix(la.weight.values(), lo.weight.values());
    mix(la.bias.values(), lo.bias.values());
  }
  return out;
}

TargetSearch find_target(const Model& a, const Model& b, const data::Dataset& data, std::int64_t n,
                         std::int64_t target, int scan_points,
                         const std::function<void(const std::string&)>& log) {
  if (scan_points < 1) throw Error("scan points must be at least 1");
  TargetSearch result;
  const auto count_at = [&](double t) {
    const std::int64_t c = evaluate_exact(interpolate(a, b, t), data, n, false).correct(n);
    ++result.evaluations;
    if (log) log("  t = " + fmt("%.12f", t) + ": " + std::to_string(c) + " correct");
    return c;
  };
  double t_prev = 1.0;
  std::int64_t c_prev = 0;
  bool bracket = false;
  double t_in = 0.0, t_out = 0.0;  // counts on either side of the target
  std::int64_t c_in = 0;
  for (int k = 0; k <= scan_points; ++k) {
    const double t = 1.0 - static_cast<double>(k) / scan_points;
    const std::int64_t c = count_at(t);
    result.scan.emplace_back(t, c);
    if (c == target) {
      result.t = t;
      result.correct = c;
      return result;
    }
    if (k > 0 && (c_prev - target) * (c - target) < 0) {
      bracket = true;
      t_in = t;
      c_in = c;
      t_out = t_prev;
      break;
    }
    t_prev = t;
    c_prev = c;
  }
  if (!bracket) {
    std::ostringstream s;
    s << "no t in [0, 1] brackets " << target << " correct; scan:";
    for (const auto& [t, c] : result.scan) s << " t=" << t << ":" << c;
    throw Error(s.str());
  }
  for (int it = 0; it < 80; ++it) {
    const double mid = 0.5 * (t_in + t_out);
    if (mid == t_in || mid == t_out) break;
    const std::int64_t c = count_at(mid);
    if (c == target) {
      result.t = mid;
      result.correct = c;
      return result;
    }
    if ((c - target) * (c_in - target) > 0) {
      t_in = mid;
      c_in = c;
    } else {
      t_out = mid;
    }
  }
  throw Error("bisection did not reach exactly " + std::to_string(target) +
              " correct (two images flip at the same t); try other --scan-points");
}

namespace {

/// Margin repair as an optimisation over the last fc layer: parameters as float values held in
/// double, row k holding the weights of class k and then its bias.
class MarginRepair {
 public:
  /// Where a set of parameters stands against the original predictions.
  struct State {
    bool same = true;   ///< every prediction unchanged
    double min = 0.0;   ///< smallest margin, relative to the original predictions
    double loss = 0.0;  ///< 1/2 sum over pairs of max(0, goal - gap)^2
  };

  MarginRepair(const Layer& fc, const Evaluation& eval, double bound)
      : eval_(eval),
        C_(eval.classes),
        F_(eval.features),
        N_(eval.count),
        row_(F_ + 1),
        has_bias_(fc.bias.size() == C_),
        // Aim past the bound so that one step does not leave a neighbour just under it.
        goal_(2.0 * bound),
        z_(static_cast<std::size_t>(N_ * C_)) {
    theta_.assign(static_cast<std::size_t>(C_ * row_), 0.0);
    for (std::int64_t k = 0; k < C_; ++k) {
      for (std::int64_t f = 0; f < F_; ++f) {
        theta_[static_cast<std::size_t>(k * row_ + f)] = fc.weight.data()[k * F_ + f];
      }
      if (has_bias_) theta_[static_cast<std::size_t>(k * row_ + F_)] = fc.bias.data()[k];
    }
  }

  /// Logits of every image under `th` into z, and the state they give. The gap of (image i,
  /// class j) is z_p - z_j with p the prediction; every gap is linear in theta.
  State evaluate(const std::vector<double>& th) {
    State st;
    st.min = std::numeric_limits<double>::infinity();
    for (std::int64_t i = 0; i < N_; ++i) {
      const double* h = feature(i);
      double* zi = z_.data() + i * C_;
      for (std::int64_t k = 0; k < C_; ++k) {
        const double* w = th.data() + k * row_;
        double s = 0.0;
        for (std::int64_t f = 0; f < F_; ++f) s += w[f] * h[f];
        zi[k] = s + w[F_];
      }
      const int p = pred(i);
      if (argmax_of(zi, C_) != p) st.same = false;
      st.min = std::min(st.min, margin_of(zi, C_, p));
      for (std::int64_t j = 0; j < C_; ++j) {
        const double gap = zi[p] - zi[j];
        if (j != p && gap < goal_) st.loss += 0.5 * (goal_ - gap) * (goal_ - gap);
      }
    }
    return st;
  }

  /// Images whose margin under the last evaluated parameters is below `bound`.
  std::int64_t count_below(double bound) const {
    std::int64_t below = 0;
    for (std::int64_t i = 0; i < N_; ++i) {
      if (margin_of(z_.data() + i * C_, C_, pred(i)) < bound) ++below;
    }
    return below;
  }

  /// dir = -gradient: each pair short of the goal pulls its image's predicted class up and the
  /// other class down along the image's features, by its shortfall.
  void descent_direction(std::vector<double>& dir) const {
    std::fill(dir.begin(), dir.end(), 0.0);
    for (std::int64_t i = 0; i < N_; ++i) {
      const int p = pred(i);
      const double* zi = z_.data() + i * C_;
      const double* h = feature(i);
      for (std::int64_t j = 0; j < C_; ++j) {
        const double gap = zi[p] - zi[j];
        if (j == p || gap >= goal_) continue;
        const double wgt = goal_ - gap;
        double* dp = dir.data() + p * row_;
        double* dj = dir.data() + j * row_;
        for (std::int64_t f = 0; f < F_; ++f) {
          dp[f] += wgt * h[f];
          dj[f] -= wgt * h[f];
        }
        if (has_bias_) {
          dp[F_] += wgt;
          dj[F_] -= wgt;
        }
      }
    }
  }

  /// Exact minimiser along dir while the set of short pairs stays the same.
  double exact_step(const std::vector<double>& dir) const {
    double num = 0.0, den = 0.0;
    for (std::int64_t i = 0; i < N_; ++i) {
      const int p = pred(i);
      const double* zi = z_.data() + i * C_;
      const double* h = feature(i);
      for (std::int64_t j = 0; j < C_; ++j) {
        const double gap = zi[p] - zi[j];
        if (j == p || gap >= goal_) continue;
        double rate = 0.0;
        for (std::int64_t f = 0; f < F_; ++f) {
          rate += (dir[p * row_ + f] - dir[j * row_ + f]) * h[f];
        }
        if (has_bias_) rate += dir[p * row_ + F_] - dir[j * row_ + F_];
        num += (goal_ - gap) * rate;
        den += rate * rate;
      }
    }
    if (!(den > 0.0)) throw Error("repair_margins: no direction raises the short margins");
    return num / den;
  }

  /// Halves the step from `eta` until the loss falls; keeps that point. False when none does.
  bool line_search(const std::vector<double>& dir, double eta, State& current) {
    trial_.resize(theta_.size());
    for (int attempt = 0; attempt < 60; ++attempt, eta *= 0.5) {
      for (std::size_t k = 0; k < theta_.size(); ++k) {
        // Rounded to float: the margins checked are those of the weights that get stored.
        trial_[k] = static_cast<double>(static_cast<float>(theta_[k] + eta * dir[k]));
      }
      if (!has_bias_) {
        for (std::int64_t k = 0; k < C_; ++k) trial_[static_cast<std::size_t>(k * row_ + F_)] = 0.0;
      }
      const State st = evaluate(trial_);
      if (st.loss < current.loss) {
        theta_.swap(trial_);
        current = st;
        return true;
      }
    }
    return false;
  }

  /// The parameters, rounded to float, back into the layer.
  void store(Layer& fc) const {
    for (std::int64_t k = 0; k < C_; ++k) {
      for (std::int64_t f = 0; f < F_; ++f) {
        fc.weight.data()[k * F_ + f] =
            static_cast<float>(theta_[static_cast<std::size_t>(k * row_ + f)]);
      }
      if (has_bias_)
        fc.bias.data()[k] = static_cast<float>(theta_[static_cast<std::size_t>(k * row_ + F_)]);
    }
  }

  /// The current parameters.
  const std::vector<double>& theta() const { return theta_; }

 private:
  const double* feature(std::int64_t i) const { return eval_.inputs.data() + i * F_; }
  int pred(std::int64_t i) const { return eval_.predictions[static_cast<std::size_t>(i)]; }

  const Evaluation& eval_;
  std::int64_t C_, F_, N_, row_;
  bool has_bias_;
  double goal_;
  std::vector<double> theta_, trial_, z_;
};

}  // namespace

RepairResult repair_margins(Model& model, const Evaluation& eval, double bound,
                            const std::function<void(const std::string&)>& log) {
  const NetPlan plan = make_plan(model);
  Layer& fc = model.layers[static_cast<std::size_t>(plan.logits_layer)];
  if (eval.inputs.size() != static_cast<std::size_t>(eval.count * eval.features) ||
      fc.weight.dim(1) != eval.features || fc.weight.dim(0) != eval.classes) {
    throw Error("repair_margins: the evaluation does not match the model (keep_inputs?)");
  }
  MarginRepair repair(fc, eval, bound);
  RepairResult result;
  MarginRepair::State current = repair.evaluate(repair.theta());
  if (!current.same) {
    throw Error("repair_margins: the evaluation's predictions do not match the model");
  }
  result.min_margin_before = current.min;
  result.images_below = repair.count_below(bound);
  // Gradient descent on the squared hinge loss, which is smooth and convex in theta (the
  // features stay fixed). Its minimum is zero (every gap >= goal): scaling theta up separates
  // the original predictions as far as wanted. Once every margin is above the bound, every
  // prediction is the original one again, whatever happened on the way; demanding that each
  // step keep every prediction instead can stall at a point where two margins trade off.
  std::vector<double> dir(repair.theta().size());
  constexpr int kMaxSteps = 20000;
  while (current.min < bound) {
    if (result.steps >= kMaxSteps) {
      throw Error("repair_margins: no convergence after " + std::to_string(kMaxSteps) +
                  " steps (min margin " + fmt("%.3e", current.min) + ")");
    }
    repair.descent_direction(dir);
    if (!repair.line_search(dir, repair.exact_step(dir), current)) {
      throw Error("repair_margins: no step lowers the shortfall (min margin " +
                  fmt("%.3e", current.min) + ")");
    }
    ++result.steps;
    if (log) {
      log("  repair step " + std::to_string(result.steps) + ": min margin " +
          fmt("%.6e", current.min) + ", shortfall " + fmt("%.3e", current.loss));
    }
    // z must describe theta for the next direction (the last evaluate may have been a reject).
    repair.evaluate(repair.theta());
  }
  repair.store(fc);
  if (!current.same) throw Error("repair_margins: a prediction changed (internal error)");
  result.min_margin_after = current.min;
  return result;
}

namespace {

/// Shape of one image's activations between layers.
struct Chw {
  std::int64_t C, H, W;
};

void conv_float32(const Layer& L, std::vector<float>& cur, std::vector<float>& next, Chw& shape) {
  std::int64_t& C = shape.C;
  std::int64_t& H = shape.H;
  std::int64_t& W = shape.W;
  const std::int64_t M = L.weight.dim(0), K = L.weight.dim(2);
  const std::int64_t Ho = H - K + 1, Wo = W - K + 1;
  const float* k = L.weight.data();
  next.assign(static_cast<std::size_t>(M * Ho * Wo), 0.0f);
  for (std::int64_t m = 0; m < M; ++m) {
    for (std::int64_t h = 0; h < Ho; ++h) {
      for (std::int64_t w = 0; w < Wo; ++w) {
        float acc = 0.0f;
        for (std::int64_t c = 0; c < C; ++c) {
          for (std::int64_t p = 0; p < K; ++p) {
            for (std::int64_t q = 0; q < K; ++q) {
              acc += cur[static_cast<std::size_t>((c * H + h + p) * W + w + q)] *
                     k[((m * C + c) * K + p) * K + q];
            }
          }
        }
        next[static_cast<std::size_t>((m * Ho + h) * Wo + w)] = acc;
      }
    }
  }
  C = M;
  H = Ho;
  W = Wo;
  cur.swap(next);
}

void maxpool_float32(const Layer& L, std::vector<float>& cur, std::vector<float>& next,
                     Chw& shape) {
  const std::int64_t C = shape.C;
  std::int64_t& H = shape.H;
  std::int64_t& W = shape.W;
  const std::int64_t S = L.pool_size, st = L.pool_stride;
  const std::int64_t Ho = (H - S) / st + 1, Wo = (W - S) / st + 1;
  next.assign(static_cast<std::size_t>(C * Ho * Wo), 0.0f);
  for (std::int64_t c = 0; c < C; ++c) {
    for (std::int64_t h = 0; h < Ho; ++h) {
      for (std::int64_t w = 0; w < Wo; ++w) {
        float best = -std::numeric_limits<float>::infinity();
        for (std::int64_t p = 0; p < S; ++p) {
          for (std::int64_t q = 0; q < S; ++q) {
            best = std::max(best,
                            cur[static_cast<std::size_t>((c * H + h * st + p) * W + w * st + q)]);
          }
        }
        next[static_cast<std::size_t>((c * Ho + h) * Wo + w)] = best;
      }
    }
  }
  H = Ho;
  W = Wo;
  cur.swap(next);
}

/// One layer of the float32 network on one image: `cur` in, `cur` out (`next` is scratch).
void forward_float32(const Layer& L, std::vector<float>& cur, std::vector<float>& next,
                     Chw& shape) {
  std::int64_t& C = shape.C;
  std::int64_t& H = shape.H;
  std::int64_t& W = shape.W;
  switch (L.kind) {
    case LayerKind::conv:
      conv_float32(L, cur, next, shape);
      break;
    case LayerKind::tanh:
      for (float& v : cur) v = std::tanh(v);
      break;
    case LayerKind::relu:
      for (float& v : cur) v = std::max(v, 0.0f);
      break;
    case LayerKind::maxpool:
      maxpool_float32(L, cur, next, shape);
      break;
    case LayerKind::flatten:
      C = C * H * W;
      H = W = 1;
      break;
    case LayerKind::fc: {
      const std::int64_t out = L.weight.dim(0), in = L.weight.dim(1);
      next.assign(static_cast<std::size_t>(out), 0.0f);
      for (std::int64_t o = 0; o < out; ++o) {
        float acc = 0.0f;
        for (std::int64_t k = 0; k < in; ++k) {
          acc += L.weight.data()[o * in + k] * cur[static_cast<std::size_t>(k)];
        }
        next[static_cast<std::size_t>(o)] = acc + (L.bias.size() > 0 ? L.bias.data()[o] : 0.0f);
      }
      C = out;
      H = W = 1;
      cur.swap(next);
      break;
    }
    case LayerKind::softmax:
      break;
  }
}

}  // namespace

std::vector<int> predict_float32(const Model& model, const data::Dataset& data, std::int64_t n,
                                 std::vector<float>* logits) {
  check_data(model, data, n);
  std::int64_t last_fc = -1;
  for (std::size_t i = 0; i < model.layers.size(); ++i) {
    if (model.layers[i].kind == LayerKind::fc) last_fc = static_cast<std::int64_t>(i);
  }
  if (last_fc < 0) throw Error("model '" + model.name + "' has no fc layer");
  const std::int64_t classes = model.layers[static_cast<std::size_t>(last_fc)].weight.dim(0);
  std::vector<int> preds(static_cast<std::size_t>(n));
  if (logits != nullptr) logits->assign(static_cast<std::size_t>(n * classes), 0.0f);
  const std::int64_t pixels = std::int64_t{data.rows} * data.cols;
  parallel_for(n, [&](std::int64_t i0, std::int64_t i1) {
    std::vector<float> cur, next;
    for (std::int64_t img = i0; img < i1; ++img) {
      cur.resize(static_cast<std::size_t>(pixels));
      for (std::int64_t k = 0; k < pixels; ++k) {
        cur[static_cast<std::size_t>(k)] =
            static_cast<float>(data.pixels[static_cast<std::size_t>(img * pixels + k)]) *
            model.input_scale;
      }
      Chw shape{1, data.rows, data.cols};
      for (std::int64_t li = 0; li <= last_fc; ++li) {
        forward_float32(model.layers[static_cast<std::size_t>(li)], cur, next, shape);
      }
      int best = 0;
      for (std::int64_t k = 1; k < classes; ++k) {
        if (cur[static_cast<std::size_t>(k)] > cur[static_cast<std::size_t>(best)])
          best = static_cast<int>(k);
      }
      preds[static_cast<std::size_t>(img)] = best;
      if (logits != nullptr) {
        std::copy(cur.begin(), cur.begin() + classes, logits->begin() + img * classes);
      }
    }
  });
  return preds;
}

}  // namespace convlab::tools
