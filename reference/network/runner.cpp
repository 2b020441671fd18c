#include "reference/network/runner.hpp"

#include <algorithm>

#include "reference/conv/library_conv.hpp"

namespace convlab {

int warmup_calls(Device device) {
  return device == Device::gpu ? 1 : 0;
}

TimingOptions run_timing(Device device, int runs) {
  TimingOptions t{warmup_calls(device), runs};
  t.layer_time = device == Device::gpu;
  return t;
}

bool any_fused(const NetworkRun& run) {
  return std::any_of(run.conv_layers.begin(), run.conv_layers.end(),
                     [](const ConvLayerTime& t) { return !t.fused.empty(); });
}

NetworkRunner cpu_runner(const Model& model, CpuConvCall conv, std::string name) {
  return NetworkRunner(Device::cpu, std::move(name),
                       [&model, conv = std::move(conv)](const Tensor& in, const TimingOptions& t) {
                         return run_network_cpu(model, in, conv, t);
                       });
}

NetworkRunner library_runner(const Model& model, Device device, Precision precision, bool fused) {
  if (device == Device::gpu) return cudnn_runner(model, precision, fused);
  return cpu_runner(model, conv_forward_reference, "the library convolution");
}

}  // namespace convlab
