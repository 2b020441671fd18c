/// @file
/// @brief `convlab check` and `convlab run` on the GPU: a GPU variant as a check target
/// (check_gpu.cpp).
#pragma once

#include "reference/commands/check_command.hpp"
#include "reference/conv/variants.hpp"

namespace convlab {

/// A GPU launcher called on host buffers: copies in, poisons y on the device, launches,
/// synchronises and copies out.
CheckTarget gpu_check_target(const GpuVariant& variant, Impl impl);

}  // namespace convlab
