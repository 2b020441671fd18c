#include "reference/network/runner_gpu.hpp"

#include <utility>

#include "reference/conv/cudnn_conv.hpp"

namespace convlab {

NetworkRunner gpu_runner(const Model& model, GpuConvCall conv, GpuConvTanhPoolCall fused,
                         std::string name) {
  return NetworkRunner(Device::gpu, name,
                       [&model, conv = std::move(conv), fused = std::move(fused), name](
                           const Tensor& in, const TimingOptions& t) {
                         return run_network_gpu(model, in, conv, fused, name, t);
                       });
}

NetworkRunner cudnn_runner(const Model& model, Precision precision, bool fused) {
  const std::string name = precision == Precision::fp32
                               ? "cuDNN"
                               : "cuDNN (" + std::string(precision_name(precision)) + ")";
  return gpu_runner(model, conv_forward_cudnn_of(precision),
                    fused ? GpuConvTanhPoolCall(conv_tanh_maxpool_cudnn_of(precision)) : nullptr,
                    name);
}

}  // namespace convlab
