#include "tools/train/trainer.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <numbers>

#include "reference/core/error.hpp"
#include "reference/core/parallel.hpp"
#include "tools/train/net.hpp"
#include "tools/train/rng.hpp"

namespace convlab::tools {
namespace {

Layer weighted(LayerKind kind, const std::string& weight, const std::string& bias, Shape w_shape) {
  Layer l;
  l.kind = kind;
  l.weight_name = weight;
  l.weight = Tensor(w_shape);
  if (!bias.empty()) {
    l.bias_name = bias;
    l.bias = Tensor(Shape{w_shape[0]});
  }
  return l;
}

Layer plain(LayerKind kind) {
  Layer l;
  l.kind = kind;
  return l;
}

Layer pool(int size, int stride) {
  Layer l;
  l.kind = LayerKind::maxpool;
  l.pool_size = size;
  l.pool_stride = stride;
  return l;
}

/// Copies images [order[first], ...) of `data` into `input` (scaled) and their labels.
void gather(const data::Dataset& data, const std::uint32_t* order, std::int64_t count, float scale,
            float* input, std::uint8_t* labels) {
  const std::int64_t pixels = std::int64_t{data.rows} * data.cols;
  for (std::int64_t j = 0; j < count; ++j) {
    const std::int64_t img = order != nullptr ? order[j] : j;
    const std::uint8_t* src = data.pixels.data() + img * pixels;
    float* dst = input + j * pixels;
    for (std::int64_t k = 0; k < pixels; ++k) dst[k] = static_cast<float>(src[k]) * scale;
    labels[j] = data.labels[static_cast<std::size_t>(img)];
  }
}

/// Runs fn(correct, loss) over the first n images in fixed groups; used by the evaluations.
struct Score {
  std::int64_t correct = 0;
  double loss = 0.0;
};

Score score(const Model& model, const data::Dataset& data, std::int64_t n) {
  const NetPlan plan = make_plan(model);
  check_data(model, data, n);
  const std::vector<float> params = flatten_params<float>(plan, model);
  constexpr std::int64_t kGroup = 32;
  const std::int64_t groups = (n + kGroup - 1) / kGroup;
  std::vector<Score> per_group(static_cast<std::size_t>(groups));
  parallel_for(groups, [&](std::int64_t g0, std::int64_t g1) {
    Workspace<float> ws = make_workspace<float>(plan, static_cast<int>(kGroup));
    std::vector<std::uint8_t> labels(kGroup);
    for (std::int64_t g = g0; g < g1; ++g) {
      const std::int64_t first = g * kGroup, count = std::min(kGroup, n - first);
      std::vector<std::uint32_t> order(static_cast<std::size_t>(count));
      for (std::int64_t j = 0; j < count; ++j)
        order[static_cast<std::size_t>(j)] = static_cast<std::uint32_t>(first + j);
      gather(data, order.data(), count, model.input_scale, ws.input.data(), labels.data());
      forward(plan, params.data(), static_cast<int>(count), ws);
      const float* logits = ws.acts[static_cast<std::size_t>(plan.logits_layer)].data();
      Score s;
      for (std::int64_t j = 0; j < count; ++j) {
        const float* z = logits + j * plan.classes;
        if (argmax_of(z, plan.classes) == labels[static_cast<std::size_t>(j)]) ++s.correct;
        double mx = z[0];
        for (std::int64_t k = 1; k < plan.classes; ++k) mx = std::max(mx, double{z[k]});
        double sum = 0.0;
        for (std::int64_t k = 0; k < plan.classes; ++k) sum += std::exp(double{z[k]} - mx);
        s.loss += mx + std::log(sum) - z[labels[static_cast<std::size_t>(j)]];
      }
      per_group[static_cast<std::size_t>(g)] = s;
    }
  });
  Score total;
  for (const Score& s : per_group) {
    total.correct += s.correct;
    total.loss += s.loss;
  }
  return total;
}

}  // namespace

std::vector<std::string> architecture_names() {
  return {"ece408", "two-conv"};
}

Model make_architecture(const std::string& arch, std::uint32_t seed) {
  Model m;
  m.name = arch;
  m.input = {1, 28, 28};
  m.input_scale = 1.0f / 255.0f;
  if (arch == "ece408") {
    m.layers = {weighted(LayerKind::conv, "conv1.weight", "", {50, 1, 5, 5}),
                plain(LayerKind::tanh),
                pool(2, 2),
                plain(LayerKind::flatten),
                weighted(LayerKind::fc, "fc1.weight", "fc1.bias", {128, 7200}),
                plain(LayerKind::tanh),
                weighted(LayerKind::fc, "fc2.weight", "fc2.bias", {10, 128}),
                plain(LayerKind::softmax)};
  } else if (arch == "two-conv") {
    m.layers = {weighted(LayerKind::conv, "conv1.weight", "", {8, 1, 5, 5}),
                plain(LayerKind::relu),
                pool(2, 2),
                weighted(LayerKind::conv, "conv2.weight", "", {16, 8, 3, 3}),
                plain(LayerKind::relu),
                pool(2, 2),
                plain(LayerKind::flatten),
                weighted(LayerKind::fc, "fc1.weight", "fc1.bias", {64, 400}),
                plain(LayerKind::relu),
                weighted(LayerKind::fc, "fc2.weight", "fc2.bias", {10, 64}),
                plain(LayerKind::softmax)};
  } else {
    throw Error("unknown architecture '" + arch + "' (known: ece408, two-conv)");
  }
  init_weights(m, seed);
  return m;
}

void init_weights(Model& model, std::uint32_t seed) {
  Rng rng(seed);
  for (std::size_t i = 0; i < model.layers.size(); ++i) {
    Layer& layer = model.layers[i];
    if (layer.kind != LayerKind::conv && layer.kind != LayerKind::fc) continue;
    const Shape& s = layer.weight.shape();
    const std::int64_t receptive = s.size() == 4 ? s[2] * s[3] : 1;
    const double fan_in = static_cast<double>(s[1] * receptive);
    const double fan_out = static_cast<double>(s[0] * receptive);
    // The next activation decides the scale; a layer straight into softmax counts as linear.
    bool relu_next = false;
    for (std::size_t j = i + 1; j < model.layers.size(); ++j) {
      const LayerKind k = model.layers[j].kind;
      if (k == LayerKind::relu) relu_next = true;
      if (k == LayerKind::relu || k == LayerKind::tanh || k == LayerKind::softmax ||
          k == LayerKind::conv || k == LayerKind::fc) {
        break;
      }
    }
    const auto bound = static_cast<float>(relu_next ? std::sqrt(6.0 / fan_in)
                                                    : std::sqrt(6.0 / (fan_in + fan_out)));
    for (float& v : layer.weight.values()) v = rng.symmetric(bound);
    for (float& v : layer.bias.values()) v = 0.0f;
  }
}

namespace {

void check_options(const TrainOptions& options) {
  if (options.batch < 1 || options.slices < 1 || options.epochs < 0) {
    throw Error("batch, slices and epochs must be positive");
  }
  if (options.optimizer != "adam" && options.optimizer != "sgd") {
    throw Error("unknown optimizer '" + options.optimizer + "' (sgd, adam)");
  }
  if (options.schedule != "cosine" && options.schedule != "constant") {
    throw Error("unknown lr schedule '" + options.schedule + "' (cosine, constant)");
  }
}

/// Test-set accuracy of the model as it is now (-1 without a test set).
double test_accuracy(const Model& model, const data::Dataset* test) {
  if (test == nullptr) return -1.0;
  return static_cast<double>(count_correct(model, *test, test->count)) /
         static_cast<double>(test->count);
}

/// Minibatch training of one model: the flat parameters, the optimiser's moments and one
/// workspace per slice of a batch (slices run in parallel; their gradients are summed).
class Trainer {
 public:
  Trainer(const NetPlan& plan, const Model& model, const data::Dataset& train, std::int64_t n_train,
          const TrainOptions& options)
      : options_(options),
        train_(train),
        n_train_(n_train),
        plan_(plan),
        P_(static_cast<std::size_t>(plan_.param_count)),
        S_(options.slices),
        adam_(options.optimizer == "adam"),
        params_(flatten_params<float>(plan_, model)),
        decays_(P_, 0),
        grads_(static_cast<std::size_t>(S_), std::vector<float>(P_)),
        slice_loss_(static_cast<std::size_t>(S_)),
        slice_correct_(static_cast<std::size_t>(S_)),
        m1_(P_, 0.0f),
        m2_(adam_ ? P_ : 0, 0.0f),
        order_(static_cast<std::size_t>(n_train)),
        // The data order has its own stream, so it does not shift when the init changes.
        order_rng_(options.seed * 2654435761u + 0x6a09e667u),
        total_steps_(((n_train + options.batch - 1) / options.batch) * options.epochs) {
    // Which parameters are weights (decayed) rather than biases.
    for (const LayerPlan& L : plan_.layers) {
      if (L.weight_offset >= 0) {
        std::fill_n(decays_.begin() + L.weight_offset, L.weight_size, 1);
      }
    }
    const int capacity = (options.batch + S_ - 1) / S_;
    labels_.assign(static_cast<std::size_t>(S_),
                   std::vector<std::uint8_t>(static_cast<std::size_t>(capacity)));
    for (int s = 0; s < S_; ++s) ws_.push_back(make_workspace<float>(plan_, capacity));
  }

  /// One pass over the training set in a fresh random order; the weights go back into `model`.
  EpochReport epoch(Model& model) {
    shuffle();
    double epoch_loss = 0.0;
    std::int64_t epoch_correct = 0;
    for (std::int64_t start = 0; start < n_train_; start += options_.batch) {
      const std::int64_t n = std::min<std::int64_t>(options_.batch, n_train_ - start);
      gradients(start, n, model.input_scale);
      for (int s = 0; s < S_; ++s) {
        epoch_loss += slice_loss_[static_cast<std::size_t>(s)];
        epoch_correct += slice_correct_[static_cast<std::size_t>(s)];
      }
      update(n);
    }
    store_params(plan_, params_, model);
    EpochReport r;
    r.loss = epoch_loss / static_cast<double>(n_train_);
    r.train_accuracy = static_cast<double>(epoch_correct) / static_cast<double>(n_train_);
    return r;
  }

 private:
  void shuffle() {
    for (std::size_t k = 0; k < order_.size(); ++k) order_[k] = static_cast<std::uint32_t>(k);
    for (std::size_t k = order_.size(); k > 1; --k) {
      std::swap(order_[k - 1], order_[order_rng_.below(static_cast<std::uint32_t>(k))]);
    }
  }

  /// Gradients, loss and correct count of the n images from `start` of the order, per slice.
  void gradients(std::int64_t start, std::int64_t n, float input_scale) {
    const auto run_slice = [&](std::int64_t s) {
      const auto su = static_cast<std::size_t>(s);
      std::fill(grads_[su].begin(), grads_[su].end(), 0.0f);
      slice_loss_[su] = 0.0;
      slice_correct_[su] = 0;
      const std::int64_t lo = n * s / S_, hi = n * (s + 1) / S_, count = hi - lo;
      if (count == 0) return;
      gather(train_, order_.data() + start + lo, count, input_scale, ws_[su].input.data(),
             labels_[su].data());
      forward(plan_, params_.data(), static_cast<int>(count), ws_[su]);
      slice_loss_[su] = backward(plan_, params_.data(), labels_[su].data(), static_cast<int>(count),
                                 ws_[su], grads_[su].data(), &slice_correct_[su]);
    };
    if (options_.parallel) {
      parallel_for(S_, [&](std::int64_t s0, std::int64_t s1) {
        for (std::int64_t s = s0; s < s1; ++s) run_slice(s);
      });
    } else {
      for (std::int64_t s = 0; s < S_; ++s) run_slice(s);
    }
  }

  /// One optimiser step with the summed gradients of a batch of n images.
  void update(std::int64_t n) {
    double lr = options_.lr;
    if (options_.schedule == "cosine" && total_steps_ > 0) {
      lr *= 0.5 * (1.0 + std::cos(std::numbers::pi * static_cast<double>(step_) /
                                  static_cast<double>(total_steps_)));
    }
    ++step_;
    const auto lr_f = static_cast<float>(lr);
    const auto inv_n = static_cast<float>(1.0 / static_cast<double>(n));
    const auto wd = static_cast<float>(options_.weight_decay);
    const auto mom = static_cast<float>(options_.momentum);
    const float beta2 = 0.999f;
    const auto bias1 =
        static_cast<float>(1.0 - std::pow(options_.momentum, static_cast<double>(step_)));
    const auto bias2 = static_cast<float>(1.0 - std::pow(0.999, static_cast<double>(step_)));
    // Element-wise update: each element's arithmetic is fixed, so the split does not matter.
    const auto update = [&](std::int64_t k0, std::int64_t k1) {
      for (std::int64_t k = k0; k < k1; ++k) {
        const auto ku = static_cast<std::size_t>(k);
        float g = 0.0f;
        for (int s = 0; s < S_; ++s) g += grads_[static_cast<std::size_t>(s)][ku];
        g *= inv_n;
        if (decays_[ku] != 0) g += wd * params_[ku];
        if (adam_) {
          m1_[ku] = mom * m1_[ku] + (1.0f - mom) * g;
          m2_[ku] = beta2 * m2_[ku] + (1.0f - beta2) * g * g;
          params_[ku] -= lr_f * (m1_[ku] / bias1) / (std::sqrt(m2_[ku] / bias2) + 1e-8f);
        } else {
          m1_[ku] = mom * m1_[ku] + g;
          params_[ku] -= lr_f * m1_[ku];
        }
      }
    };
    if (options_.parallel) {
      parallel_for(static_cast<std::int64_t>(P_), update);
    } else {
      update(0, static_cast<std::int64_t>(P_));
    }
  }

  const TrainOptions& options_;
  const data::Dataset& train_;
  std::int64_t n_train_;
  NetPlan plan_;
  std::size_t P_;
  int S_;
  bool adam_;
  std::vector<float> params_;
  std::vector<unsigned char> decays_;
  std::vector<Workspace<float>> ws_;
  std::vector<std::vector<float>> grads_;
  std::vector<std::vector<std::uint8_t>> labels_;
  std::vector<double> slice_loss_;
  std::vector<std::int64_t> slice_correct_;
  std::vector<float> m1_, m2_;
  std::vector<std::uint32_t> order_;
  Rng order_rng_;
  std::int64_t total_steps_;
  std::int64_t step_ = 0;
};

}  // namespace

std::vector<EpochReport> train_model(Model& model, const data::Dataset& train,
                                     const data::Dataset* test, const TrainOptions& options,
                                     const EpochCallback& on_epoch) {
  using clock = std::chrono::steady_clock;
  const NetPlan plan = make_plan(model);
  const std::int64_t n_train =
      options.train_limit > 0 ? std::min(options.train_limit, train.count) : train.count;
  check_data(model, train, n_train);
  check_options(options);
  Trainer trainer(plan, model, train, n_train, options);

  std::vector<EpochReport> reports;
  EpochReport initial;
  initial.test_accuracy = test_accuracy(model, test);
  reports.push_back(initial);
  if (on_epoch) on_epoch(initial, model);
  for (int epoch = 1; epoch <= options.epochs; ++epoch) {
    const auto t0 = clock::now();
    EpochReport r = trainer.epoch(model);
    r.epoch = epoch;
    r.test_accuracy = test_accuracy(model, test);
    r.seconds = std::chrono::duration<double>(clock::now() - t0).count();
    reports.push_back(r);
    if (on_epoch) on_epoch(r, model);
  }
  return reports;
}

std::int64_t count_correct(const Model& model, const data::Dataset& data, std::int64_t n) {
  return score(model, data, n).correct;
}

double mean_loss(const Model& model, const data::Dataset& data, std::int64_t n) {
  return score(model, data, n).loss / static_cast<double>(n);
}

void check_data(const Model& model, const data::Dataset& data, std::int64_t n) {
  if (model.input.size() != 3 || model.input[0] != 1 || model.input[1] != data.rows ||
      model.input[2] != data.cols) {
    throw Error("model '" + model.name + "' expects input " + shape_string(model.input) +
                ", data has " + std::to_string(data.rows) + "x" + std::to_string(data.cols) +
                " images");
  }
  if (n < 1 || n > data.count) {
    throw Error("asked for " + std::to_string(n) + " images, data has " +
                std::to_string(data.count));
  }
}

}  // namespace convlab::tools
