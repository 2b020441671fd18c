/// @file
/// @brief cuDNN error checking, for every user of cuDNN (its convolution, the GPU layers).
#pragma once

#include <cudnn.h>

namespace convlab {

/// Throws CudaError when a cuDNN call fails.
void cudnn_check(cudnnStatus_t status, const char* call, const char* file, int line);

}  // namespace convlab

/// Checks a cuDNN call: throws CudaError naming the call, file and line unless it returns
/// CUDNN_STATUS_SUCCESS.
#define CUDNN_CHECK(call) ::convlab::cudnn_check((call), #call, __FILE__, __LINE__)
