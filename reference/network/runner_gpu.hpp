/// @file
/// @brief The shared network runner (runner.hpp) with a GPU convolution under test.
#pragma once

#include <string>

#include "reference/network/network_gpu.hpp"
#include "reference/network/runner.hpp"

namespace convlab {

/// The network on the GPU with `conv` for every conv layer, and where `fused` is set, one call
/// of it for each conv layer followed by tanh and a 2x2 max-pool (run_network_gpu: a stub
/// fused launcher falls back to `conv`). `name` names the convolution in messages.
NetworkRunner gpu_runner(const Model& model, GpuConvCall conv, GpuConvTanhPoolCall fused,
                         std::string name);

}  // namespace convlab
