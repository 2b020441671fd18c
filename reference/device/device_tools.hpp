/// @file
/// @brief The bench's GPU helpers: random inputs made on the device, the L2 flush, a stream and
/// CUDA-event timing of repeated calls.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <functional>
#include <vector>

#include "reference/core/cuda_stream.hpp"
#include "reference/core/device_buffer.hpp"

namespace convlab {

/// Fills p[0, n) on `stream` with values uniform in [-1, 1), each a hash of (seed, index): the
/// same values on every GPU and every run, at memory speed (hundreds of millions of values per
/// layer would take seconds on the host).
void fill_uniform(float* p, std::int64_t n, std::uint64_t seed, cudaStream_t stream);

/// The stream the bench runs everything on. It is a blocking stream: it synchronises with the
/// legacy default stream, so a kernel launched there by mistake is still inside the timed
/// interval instead of escaping it.
class BenchStream : public CudaStream {
 public:
  BenchStream() : CudaStream(cudaStreamDefault) {}
};

/// Evicts the L2 cache by writing a buffer of twice its size (cudaDeviceProp::l2CacheSize), so
/// every timed run starts from the same state, with none of the layer's tensors in L2: no run
/// profits from what the run before it left in the cache.
class L2Flusher {
 public:
  /// Allocates the buffer when `enabled` (nothing otherwise).
  explicit L2Flusher(bool enabled);
  /// Writes the whole buffer on `stream` (no-op when disabled).
  void flush(cudaStream_t stream) const;
  /// Bytes written per flush (0 when disabled).
  std::int64_t bytes() const { return buffer_.size() * std::int64_t{sizeof(float)}; }

 private:
  DeviceBuffer buffer_;
};

/// Runs `call` `runs` times on `stream`. Before each run, untimed: `prepare` (it poisons the
/// output) and the L2 flush (when `flusher` is given). Each run is timed by CUDA events recorded
/// on `stream` right before and right after `call`; the host waits for each run to finish, so
/// runs do not overlap. Returns the seconds of each run. Throws CudaError on a device error.
std::vector<double> time_calls(const std::function<void()>& prepare,
                               const std::function<void()>& call, int runs, cudaStream_t stream,
                               const L2Flusher* flusher);

}  // namespace convlab
