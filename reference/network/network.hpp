/// @file
/// @brief Runs a model's network over a batch of images and times its convolutions (Op Time).
///
/// Op Time is the wall-clock time of the convolution call(s) alone, with the device
/// synchronised before and after each call, summed over the network's conv layers. Per-layer
/// figures are kept. Everything else (data loading, copies, other layers) is outside it, except
/// where a GPU run uses a fused launcher: that one call computes a conv layer together with the
/// tanh and 2x2 max-pool after it, and its time is that layer's Op Time (ConvLayerTime::fused).
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <span>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "reference/conv/conv_shape.hpp"
#include "reference/core/tensor.hpp"
#include "reference/model/model.hpp"
#include "reference/network/op_timer.hpp"

namespace convlab {

/// The time one conv layer spent in the convolution under test.
struct ConvLayerTime {
  int layer = 0;    ///< index in Model::layers
  ConvShape shape;  ///< the call's sizes
  /// Op Time of this layer: seconds in the convolution call, device synchronised before and
  /// after; the fastest timed call (the original rule: keep the minimum).
  double seconds = 0.0;
  std::vector<double> samples;  ///< every timed call, in order
  /// Empty for a plain conv call. kFusedTanhMaxpool2 when the timed call was a fused launcher
  /// that also computed the tanh and the 2x2 max-pool after the conv layer: the figures above
  /// then include those two layers.
  std::string fused;
  /// Layer Time of this layer, where the runner measured it (TimingOptions::layer_time): the
  /// same call fed from host memory, with the host-side prolog and epilog of a layer (device
  /// buffers allocated, x and k copied in, y copied back, buffers freed); the fastest run.
  std::optional<double> layer_seconds;

  /// Median of the samples.
  double median() const;
};

/// ConvLayerTime::fused of a call that computed conv, tanh and a 2x2 stride-2 max-pool at once.
inline constexpr std::string_view kFusedTanhMaxpool2 = "tanh+maxpool2";

/// True when layers[layer] is a conv layer followed by tanh and then a max-pool of size 2 and
/// stride 2: the three layers a fused launcher (GpuConvTanhPoolFn) can compute in one call.
bool fuses_tanh_maxpool2(const Model& model, std::size_t layer);

/// How the runner times each convolution.
struct TimingOptions {
  /// Makes one timed call and returns its seconds.
  using Clock = std::function<double(const std::function<void()>& call)>;

  /// `warmup_calls` untimed and `timed_runs` timed calls; `own_clock` as `clock` below.
  TimingOptions(int warmup_calls = 0, int timed_runs = 1, Clock own_clock = {})
      : warmup(warmup_calls), runs(timed_runs), clock(std::move(own_clock)) {}

  int warmup = 0;  ///< untimed calls before the timed ones (module loading, caches)
  int runs = 1;    ///< timed calls; the layer's figure is the fastest
  /// Where set, makes each timed call and returns its seconds instead of the runner's own
  /// clock: for a caller that measures the call itself (the grader's referee, whose
  /// convolution runs in another process).
  Clock clock;
  /// Also measure each conv layer's Layer Time (ConvLayerTime::layer_seconds): `runs` more
  /// calls, each fed from host memory. Only for a convolution that may be called on buffers
  /// the runner allocates itself (not the grader's, whose team process maps only its own).
  bool layer_time = false;
  /// Stop after the last conv layer (and the layers fused into its call): for timed passes
  /// whose output nobody reads. NetworkRun::output is then empty.
  bool through_last_conv = false;
};

/// How many of model.layers a run with `timing` computes: all of them, or with
/// through_last_conv those up to the last conv layer.
std::size_t layers_to_run(const Model& model, const TimingOptions& timing);

/// What a run of the network produced.
struct NetworkRun {
  /// [N, classes]: the last layer's output (probabilities after softmax); empty after a run
  /// with TimingOptions::through_last_conv
  Tensor output;
  std::vector<ConvLayerTime> conv_layers;  ///< one entry per conv layer, in order

  /// Op Time: seconds summed over conv_layers.
  double op_time() const;
  /// Sum of the conv layers' Layer Times, where every layer has one.
  std::optional<double> layer_time() const;
};

/// A CPU convolution the runner calls for every conv layer (host pointers).
using CpuConvCall = std::function<void(float* y, const float* x, const float* k, const ConvShape&)>;

/// Runs `model` on `input` ([N, C, H, W] matching model.input) on the CPU, calling `conv` for
/// every conv layer and the CPU layers for the rest. Images go through the network 128 at a
/// time (so intermediates stay in cache): `conv` is called once per chunk with B <= 128, and a
/// layer's Op Time is the sum over its calls. Throws Error on a shape mismatch.
NetworkRun run_network_cpu(const Model& model, const Tensor& input, const CpuConvCall& conv,
                           const TimingOptions& timing = {});

/// Index of the largest value of each row of `output` (first one on ties).
std::vector<int> predictions(const Tensor& output);

/// How many predictions equal their label (the first predictions.size() labels are used).
std::int64_t count_correct(std::span<const int> predictions, std::span<const std::uint8_t> labels);

/// Runs `call` timing.warmup times untimed, then timing.runs times timed with time_call(sync),
/// running `prepare` (untimed: it poisons the output) before every call. Returns the layer's
/// figures. Shared by the CPU and GPU runners.
template <typename Prepare, typename Sync, typename Call>
ConvLayerTime time_conv_layer(int layer, const ConvShape& shape, const TimingOptions& timing,
                              Prepare&& prepare, Sync&& sync, Call&& call);

/// Throws Error unless `input` is [N, C, H, W] with [C, H, W] == model.input and N >= 1.
void check_input(const Model& model, const Tensor& input);

template <typename Prepare, typename Sync, typename Call>
ConvLayerTime time_conv_layer(int layer, const ConvShape& shape, const TimingOptions& timing,
                              Prepare&& prepare, Sync&& sync, Call&& call) {
  for (int i = 0; i < timing.warmup; ++i) {
    prepare();
    call();
  }
  ConvLayerTime t{layer, shape, 0.0, {}, {}, {}};
  for (int i = 0; i < std::max(1, timing.runs); ++i) {
    prepare();
    t.samples.push_back(timing.clock ? timing.clock([&] { call(); }) : time_call(sync, call));
  }
  t.seconds = *std::min_element(t.samples.begin(), t.samples.end());
  return t;
}

}  // namespace convlab
