/// @file
/// @brief Runs a model's network on the GPU, timing the convolution under test (Op Time).
#pragma once

#include <cuda_runtime_api.h>

#include <functional>
#include <string>

#include "reference/network/network.hpp"

namespace convlab {

/// A GPU convolution the runner calls for every conv layer (device pointers, one stream).
using GpuConvCall =
    std::function<void(float* y, const float* x, const float* k, const ConvShape&, cudaStream_t)>;

/// Runs `model` on `input` ([N, C, H, W], host) on the GPU: the images and weights are copied
/// to the device first, `conv` is called for every conv layer (device synchronised before and
/// after, that interval is the layer's Op Time; `timing` sets warm-up calls and timed runs),
/// cuDNN and cuBLAS do the other layers, and the output comes back to the host. The output of
/// each conv layer is poisoned (NaN) before every call, so a run that leaves elements unwritten
/// cannot pass on a previous call's values. A CUDA error raised by `conv` is reported as coming
/// from the convolution, with `conv_name` in the message.
NetworkRun run_network_gpu(const Model& model, const Tensor& input, const GpuConvCall& conv,
                           const std::string& conv_name, const TimingOptions& timing = {1, 1});

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
