/// @file
/// @brief The network runner that `convlab run` and the grader's referee share: one way to run
/// a model with the convolution under test, and with the library convolution it is compared
/// with, so that a grade times and checks what `convlab run` shows.
#pragma once

#include <functional>
#include <string>
#include <utility>

#include "reference/conv/precision.hpp"
#include "reference/conv/variant_table.hpp"
#include "reference/network/network.hpp"

namespace convlab {

/// A model's network with one convolution, on one device: called with a batch of images and
/// the timing wanted, it runs every layer and returns the output and the conv layers' times.
/// It refers to the model it was made for, which must outlive it.
class NetworkRunner {
 public:
  /// Runs the network on `input` ([N, C, H, W], host memory).
  using Run = std::function<NetworkRun(const Tensor& input, const TimingOptions& timing)>;

  /// A runner named `name` (in messages and tables) that runs on `device` by calling `run`.
  NetworkRunner(Device device, std::string name, Run run)
      : device_(device), name_(std::move(name)), run_(std::move(run)) {}

  /// Where the convolution runs.
  Device device() const { return device_; }
  /// The convolution's name.
  const std::string& name() const { return name_; }
  /// Runs the network on `input` with `timing`.
  NetworkRun operator()(const Tensor& input, const TimingOptions& timing) const {
    return run_(input, timing);
  }

 private:
  Device device_;
  std::string name_;
  Run run_;
};

/// Untimed runs of the convolution before the timed ones: one on the GPU (module loading,
/// first-touch costs), none on the CPU.
int warmup_calls(Device device);

/// `convlab run`'s timing of each conv call on `device`: warmup_calls(device) untimed, `runs`
/// timed, and on the GPU each layer's Layer Time beside its Op Time.
TimingOptions run_timing(Device device, int runs);

/// Whether any conv layer of `run` was a fused conv + tanh + max-pool call.
bool any_fused(const NetworkRun& run);

/// The network on the CPU with `conv` for every conv layer (run_network_cpu).
NetworkRunner cpu_runner(const Model& model, CpuConvCall conv, std::string name);

/// What a run on `device` is compared with: the library convolution on the CPU
/// (conv_forward_reference), cuDNN in precision class `precision` on the GPU. `fused`: the run
/// under test fused conv, tanh and max-pool (any_fused()), and cuDNN then does the same, so
/// that both time the same work. Throws Error for the GPU in a build without CUDA.
NetworkRunner library_runner(const Model& model, Device device,
                             Precision precision = Precision::fp32, bool fused = false);

/// cuDNN's convolution in precision class `precision` (runner_gpu.cpp); with `fused`, its
/// conv + tanh + max-pool wherever the network has those three layers in a row. Throws Error
/// in a build without CUDA.
NetworkRunner cudnn_runner(const Model& model, Precision precision, bool fused);

}  // namespace convlab
