/// @file
/// @brief Runs a model's network on the GPU, timing the convolution under test (Op Time).
#pragma once

#include <cuda_runtime_api.h>

#include <functional>
#include <string>

#include "reference/conv/gpu_launcher.hpp"
#include "reference/network/network.hpp"

namespace convlab {

/// Runs `model` on `input` ([N, C, H, W], host) on the GPU: the images and weights are copied
/// to the device first, `conv` is called for every conv layer (device synchronised before and
/// after, that interval is the layer's Op Time; `timing` sets warm-up calls and timed runs),
/// cuDNN and cuBLAS do the other layers, and the output comes back to the host. The output of
/// each conv layer is poisoned (NaN) before every call, so a run that leaves elements unwritten
/// cannot pass on a previous call's values. A CUDA error raised by `conv` is reported as coming
/// from the convolution, with `conv_name` in the message.
NetworkRun run_network_gpu(const Model& model, const Tensor& input, const GpuConvCall& conv,
                           const std::string& conv_name, const TimingOptions& timing = {1, 1});

/// A fused GPU call for a conv layer and the tanh and max-pool after it (the signature of
/// GpuConvTanhPoolFn): y = maxpool(tanh(conv(x, k))), device pointers, one stream.
using GpuConvTanhPoolCall = std::function<void(float* y, const float* x, const float* k,
                                               const ConvShape&, const PoolShape&, cudaStream_t)>;

/// As above, and where `conv_tanh_pool` is set and a conv layer is followed by tanh and then a
/// 2x2 stride-2 max-pool (fuses_tanh_maxpool2), the runner makes one call of `conv_tanh_pool`
/// for the three layers instead of calling `conv` and running its own tanh and max-pool. That
/// call is timed like a conv call (its output, the pooled tensor, is poisoned before each call)
/// and is the layer's Op Time; the layer's ConvLayerTime::fused says kFusedTanhMaxpool2. When
/// `conv_tanh_pool` throws NotImplemented (a stub), the run goes on unfused for that layer and
/// every later one.
NetworkRun run_network_gpu(const Model& model, const Tensor& input, const GpuConvCall& conv,
                           const GpuConvTanhPoolCall& conv_tanh_pool, const std::string& conv_name,
                           const TimingOptions& timing = {1, 1});

/// The device in use, e.g. "NVIDIA H100 80GB HBM3", and its drivers.
struct GpuInfo {
  /// Device name, as the driver reports it.
  std::string name;
  /// NVIDIA kernel driver version, e.g. "580.159.04" ("unknown" where it cannot be read).
  std::string driver;
  /// Highest CUDA version the driver supports, "major.minor".
  std::string cuda_driver;
  /// Number of streaming multiprocessors.
  int sm_count = 0;
  int compute_capability = 0;  ///< e.g. 90
};
/// Describes the current device; throws CudaError when there is none.
GpuInfo gpu_info();

}  // namespace convlab
