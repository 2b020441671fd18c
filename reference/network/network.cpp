#include "reference/network/network.hpp"

#include <algorithm>
#include <limits>
#include <string>

#include "reference/core/error.hpp"
#include "reference/layers/cpu_layers.hpp"

namespace convlab {

double NetworkRun::op_time() const {
  double total = 0.0;
  for (const ConvLayerTime& t : conv_layers) total += t.seconds;
  return total;
}

std::optional<double> NetworkRun::layer_time() const {
  double total = 0.0;
  for (const ConvLayerTime& t : conv_layers) {
    if (!t.layer_seconds) return std::nullopt;
    total += *t.layer_seconds;
  }
  return total;
}

void check_input(const Model& model, const Tensor& input) {
  if (input.rank() != 4 || input.dim(0) < 1 ||
      Shape(input.shape().begin() + 1, input.shape().end()) != model.input) {
    throw Error("model " + model.name + " takes images of shape " + shape_string(model.input) +
                ", got a batch of shape " + shape_string(input.shape()));
  }
}

std::size_t layers_to_run(const Model& model, const TimingOptions& timing) {
  if (!timing.through_last_conv) return model.layers.size();
  std::size_t end = 0;
  for (std::size_t i = 0; i < model.layers.size(); ++i) {
    if (model.layers[i].kind == LayerKind::conv) end = i + 1;
  }
  return end;
}

bool fuses_tanh_maxpool2(const Model& model, std::size_t layer) {
  const std::vector<Layer>& l = model.layers;
  return layer + 2 < l.size() && l[layer].kind == LayerKind::conv &&
         l[layer + 1].kind == LayerKind::tanh && l[layer + 2].kind == LayerKind::maxpool &&
         l[layer + 2].pool_size == 2 && l[layer + 2].pool_stride == 2;
}

double ConvLayerTime::median() const {
  if (samples.empty()) return seconds;
  std::vector<double> s = samples;
  std::sort(s.begin(), s.end());
  const std::size_t mid = s.size() / 2;
  return s.size() % 2 == 1 ? s[mid] : 0.5 * (s[mid - 1] + s[mid]);
}

namespace {

// The CPU runner sends images through the whole network this many at a time, so every
// intermediate tensor stays in cache instead of streaming gigabytes through memory. The layers
// are per image, so the result does not depend on it; a conv layer's Op Time is the sum over
// the chunks' calls.
constexpr std::int64_t kCpuChunk = 128;

// Runs images [first, first + count) of `input` through the network; adds the conv layers'
// timed samples to `timings` and writes the outputs to `output`.
void run_chunk(const Model& model, const std::vector<Shape>& shapes, const Tensor& input,
               std::int64_t first, std::int64_t count, const CpuConvCall& conv,
               const TimingOptions& timing, std::vector<ConvLayerTime>& timings, Tensor& output) {
  const std::int64_t image = shape_elements(model.input);
  Shape in_shape = input.shape();
  in_shape[0] = count;
  Tensor current(in_shape, std::vector<float>(input.data() + first * image,
                                              input.data() + (first + count) * image));
  std::size_t conv_index = 0;
  const std::size_t end = layers_to_run(model, timing);
  for (std::size_t i = 0; i < end; ++i) {
    const Layer& layer = model.layers[i];
    Shape out_shape = shapes[i];
    out_shape.insert(out_shape.begin(), count);
    const Shape& cur = current.shape();
    switch (layer.kind) {
      case LayerKind::conv: {
        const ConvShape s{static_cast<int>(count),  static_cast<int>(layer.weight.dim(0)),
                          static_cast<int>(cur[1]), static_cast<int>(cur[2]),
                          static_cast<int>(cur[3]), static_cast<int>(layer.weight.dim(2))};
        s.validate();
        Tensor y(out_shape);
        const ConvLayerTime t = time_conv_layer(
            static_cast<int>(i), s, timing,
            [&] {
              std::fill(y.values().begin(), y.values().end(),
                        std::numeric_limits<float>::quiet_NaN());
            },
            [] {}, [&] { conv(y.data(), current.data(), layer.weight.data(), s); });
        ConvLayerTime& total = timings[conv_index++];
        if (total.samples.empty()) {
          total = t;
          total.shape.B = 0;
        } else {
          for (std::size_t r = 0; r < t.samples.size(); ++r) total.samples[r] += t.samples[r];
        }
        total.shape.B += s.B;
        current = std::move(y);
        break;
      }
      case LayerKind::tanh:
        cpu::tanh_inplace(current.values());
        break;
      case LayerKind::relu:
        cpu::relu_inplace(current.values());
        break;
      case LayerKind::maxpool: {
        Tensor y(out_shape);
        cpu::maxpool(current.data(), y.data(), count, static_cast<int>(cur[1]),
                     static_cast<int>(cur[2]), static_cast<int>(cur[3]), layer.pool_size,
                     layer.pool_stride);
        current = std::move(y);
        break;
      }
      case LayerKind::flatten:
        current.reshape(out_shape);
        break;
      case LayerKind::fc: {
        Tensor y(out_shape);
        cpu::fully_connected(current.data(), layer.weight.data(), layer.bias.data(), y.data(),
                             count, static_cast<int>(layer.weight.dim(1)),
                             static_cast<int>(layer.weight.dim(0)));
        current = std::move(y);
        break;
      }
      case LayerKind::softmax:
        cpu::softmax_rows(current.data(), count, static_cast<int>(current.size() / count));
        break;
    }
  }
  if (timing.through_last_conv) return;  // run.output is empty
  std::copy(current.values().begin(), current.values().end(),
            output.data() + first * (output.size() / output.dim(0)));
}

}  // namespace

NetworkRun run_network_cpu(const Model& model, const Tensor& input, const CpuConvCall& conv,
                           const TimingOptions& timing) {
  check_input(model, input);
  const std::int64_t n = input.dim(0);
  const std::vector<Shape> shapes = model.output_shapes();
  NetworkRun run;
  if (!timing.through_last_conv) run.output = Tensor({n, shape_elements(shapes.back())});
  std::size_t convs = 0;
  for (const Layer& layer : model.layers) convs += layer.kind == LayerKind::conv;
  run.conv_layers.resize(convs);
  for (std::int64_t first = 0; first < n; first += kCpuChunk) {
    run_chunk(model, shapes, input, first, std::min(kCpuChunk, n - first), conv, timing,
              run.conv_layers, run.output);
  }
  for (ConvLayerTime& t : run.conv_layers) {
    t.seconds = *std::min_element(t.samples.begin(), t.samples.end());
  }
  return run;
}

std::vector<int> predictions(const Tensor& output) {
  const std::int64_t rows = output.dim(0);
  const std::int64_t cols = output.size() / std::max<std::int64_t>(rows, 1);
  std::vector<int> pred(static_cast<std::size_t>(rows));
  for (std::int64_t r = 0; r < rows; ++r) {
    const float* row = output.data() + r * cols;
    pred[static_cast<std::size_t>(r)] = static_cast<int>(std::max_element(row, row + cols) - row);
  }
  return pred;
}

std::int64_t count_correct(std::span<const int> predictions, std::span<const std::uint8_t> labels) {
  if (labels.size() < predictions.size()) {
    throw Error("only " + std::to_string(labels.size()) + " labels for " +
                std::to_string(predictions.size()) + " predictions");
  }
  std::int64_t correct = 0;
  for (std::size_t i = 0; i < predictions.size(); ++i) correct += predictions[i] == labels[i];
  return correct;
}

}  // namespace convlab
