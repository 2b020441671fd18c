/// @file
/// @brief The CPU trainer: seeded initialisation, minibatch SGD (or Adam), deterministic
/// multi-threaded gradients, and float evaluation.
///
/// Determinism: each minibatch is cut into a fixed number of slices (independent of the thread
/// count); each slice's gradient goes to its own buffer, and the buffers are summed in slice
/// order. The same seed and options therefore give bit-identical weights for any
/// CONVLAB_THREADS on one machine (and on any machine with the same compiler and flags).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "reference/data/fashion_mnist.hpp"
#include "reference/model/model.hpp"

namespace convlab::tools {

/// Version of the trainer, recorded in every model file it writes.
inline constexpr std::string_view kTrainerVersion = "1.0.0";

/// Architectures the trainer can build: "ece408", "two-conv".
std::vector<std::string> architecture_names();

/// An untrained network of a named architecture, weights initialised from `seed`
/// (see init_weights). Throws Error for an unknown name.
Model make_architecture(const std::string& arch, std::uint32_t seed);

/// Draws every weight of `model` from `seed`: uniform in +-sqrt(6 / (fan_in + fan_out))
/// (Glorot) for layers followed by tanh or softmax, +-sqrt(6 / fan_in) (He) for layers
/// followed by relu; biases start at zero.
void init_weights(Model& model, std::uint32_t seed);

/// How to train.
struct TrainOptions {
  std::uint32_t seed = 1;  ///< data order (the weights come in already initialised)
  int epochs = 4;
  int batch = 128;                  ///< images per step
  int slices = 8;                   ///< fixed parts of each batch, summed in order
  std::string optimizer = "sgd";    ///< "sgd" (with momentum) or "adam"
  double lr = 0.05;                 ///< peak learning rate
  double momentum = 0.9;            ///< sgd momentum; adam beta1
  double weight_decay = 0.0;        ///< L2 added to every weight (not biases)
  std::string schedule = "cosine";  ///< "cosine" (decay to 0 over all steps) or "constant"
  std::int64_t train_limit = 0;     ///< use only the first N training images (0: all)
  bool parallel = true;             ///< false: run the slices one after another in this thread
};

/// What one epoch achieved.
struct EpochReport {
  int epoch = 0;                ///< 0: before training
  double loss = 0.0;            ///< mean cross-entropy over the epoch's steps
  double train_accuracy = 0.0;  ///< fraction right while training (weights moving)
  double test_accuracy = -1.0;  ///< after the epoch, float, full test set (-1: no test set)
  double seconds = 0.0;         ///< wall time of the epoch
};

/// Called with the model after each epoch (and once before training, epoch 0).
using EpochCallback = std::function<void(const EpochReport&, const Model&)>;

/// Trains `model` in place on `train`, scoring `test` (may be null) after each epoch.
std::vector<EpochReport> train_model(Model& model, const data::Dataset& train,
                                     const data::Dataset* test, const TrainOptions& options,
                                     const EpochCallback& on_epoch);

/// Correct predictions (float, the trainer's arithmetic) among the first n images of `data`.
std::int64_t count_correct(const Model& model, const data::Dataset& data, std::int64_t n);

/// Throws Error unless `model` takes single-channel images of `data`'s size and
/// 1 <= n <= data.count.
void check_data(const Model& model, const data::Dataset& data, std::int64_t n);

/// Mean cross-entropy (float arithmetic) over the first n images of `data`.
double mean_loss(const Model& model, const data::Dataset& data, std::int64_t n);

}  // namespace convlab::tools
