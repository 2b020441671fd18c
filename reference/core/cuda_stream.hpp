/// @file
/// @brief An owning CUDA stream, written once for every part that queues work on its own
/// stream (the GPU network runner, the grader's harness, the bench).
#pragma once

#include <cuda_runtime_api.h>

#include "reference/core/cuda_check.hpp"

namespace convlab {

/// A CUDA stream, destroyed with the object. Non-blocking by default: it does not wait for
/// the legacy default stream.
class CudaStream {
 public:
  /// Creates the stream with cudaStreamCreateWithFlags(`flags`); throws CudaError on failure.
  explicit CudaStream(unsigned flags = cudaStreamNonBlocking) {
    CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, flags));
  }
  ~CudaStream() { cudaStreamDestroy(stream_); }
  CudaStream(const CudaStream&) = delete;
  CudaStream& operator=(const CudaStream&) = delete;

  /// The CUDA stream.
  cudaStream_t get() const { return stream_; }
  /// Waits for the stream's work and throws CudaError if anything on the device failed.
  void sync() const {
    CUDA_CHECK(cudaStreamSynchronize(stream_));
    CUDA_CHECK(cudaGetLastError());
  }

 private:
  cudaStream_t stream_ = nullptr;
};

}  // namespace convlab
