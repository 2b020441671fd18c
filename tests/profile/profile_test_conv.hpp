/// @file
/// @brief The profiler GPU test's own convolution kernel (profile_test_conv.cu).
#pragma once

#include <cuda_runtime_api.h>

#include "reference/conv/conv_shape.hpp"

namespace convlab::test {

/// The demangled name the profiler reports for the kernel below.
inline constexpr const char* kProfileTestConvName =
    "convlab::test::profile_test_conv(float*, float const*, float const*, int, int, int, int, "
    "int, int)";

/// Launches a one-thread-per-output convolution on `stream` (the GPU variant signature).
void launch_profile_test_conv(float* y, const float* x, const float* k, const ConvShape& s,
                              cudaStream_t stream);

}  // namespace convlab::test
