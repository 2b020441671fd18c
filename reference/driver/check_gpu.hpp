// `convlab check` and `convlab run` on the GPU: a GPU variant as a check target (check_gpu.cpp).
#pragma once

#include "reference/conv/variants.hpp"
#include "reference/driver/check_command.hpp"

namespace convlab {

// A GPU launcher called on host buffers: copies in, poisons y on the device, launches,
// synchronises and copies out.
CheckTarget gpu_check_target(const GpuVariant& variant, Impl impl);

}  // namespace convlab
