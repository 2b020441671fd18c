/// @file
/// @brief CUDA error checking and small launch helpers, defined once for all GPU code.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <string>

#include "reference/core/ceil_div.hpp"
#include "reference/core/error.hpp"

namespace convlab {

/// A CUDA runtime, cuDNN or cuBLAS call failed.
class CudaError : public Error {
 public:
  using Error::Error;
  /// A failed call described by `what`; `out_of_memory` when it failed for want of device memory.
  CudaError(const std::string& what, bool out_of_memory)
      : Error(what), out_of_memory_(out_of_memory) {}
  /// The call failed for want of device memory (the grader tells the team's share from it).
  bool out_of_memory() const { return out_of_memory_; }

 private:
  bool out_of_memory_ = false;
};

/// Throws CudaError with the call, file and line when `status` is not cudaSuccess.
void cuda_check(cudaError_t status, const char* call, const char* file, int line);

/// True when at least one CUDA device can be used (never throws).
bool cuda_device_available(std::string* reason = nullptr);

}  // namespace convlab

/// Checks a CUDA runtime call: CUDA_CHECK(cudaMalloc(&p, bytes));
#define CUDA_CHECK(call) ::convlab::cuda_check((call), #call, __FILE__, __LINE__)
/// Checks the launch just made (bad configuration, missing kernel image).
#define CUDA_CHECK_LAUNCH() \
  ::convlab::cuda_check(cudaGetLastError(), "kernel launch", __FILE__, __LINE__)
