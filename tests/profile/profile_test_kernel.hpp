/// @file
/// @brief The profiler GPU test's own kernel in the conv layer's place (profile_test_kernel.cu),
/// so the test knows the row name to look for whichever staff or student code this build has.
#pragma once

#include <cuda_runtime_api.h>

#include "reference/conv/conv_shape.hpp"

namespace convlab::test {

/// The demangled name the profiler reports for the kernel below.
inline constexpr const char* kProfileTestKernelName =
    "convlab::test::profile_test_kernel(float*, float const*, float const*, int, int, int, int, "
    "int, int)";

/// Launches the kernel on `stream` with the GPU variant signature. It copies part of x to y and
/// is not a convolution.
void launch_profile_test_kernel(float* y, const float* x, const float* k, const ConvShape& s,
                                cudaStream_t stream);

}  // namespace convlab::test
