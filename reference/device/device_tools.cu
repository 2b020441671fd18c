#include <cuda_runtime.h>

#include <algorithm>

#include "reference/device/device_tools.hpp"
#include "reference/core/cuda_check.hpp"

namespace convlab {

namespace {

// SplitMix64's finaliser: a good 64-bit mix of a counter, cheap enough for a fill kernel.
__device__ std::uint64_t mix(std::uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

__global__ void fill_uniform_kernel(float* __restrict__ p, std::int64_t n, std::uint64_t seed) {
  const std::int64_t stride = std::int64_t{gridDim.x} * blockDim.x;
  const std::uint64_t key = mix(seed);
  for (std::int64_t i = std::int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < n; i += stride) {
    // The top 24 bits give a float in [0, 1) exactly; scale to [-1, 1).
    const auto bits = static_cast<std::uint32_t>(mix(key + static_cast<std::uint64_t>(i)) >> 40);
    p[i] = static_cast<float>(bits) * (2.0f / 16777216.0f) - 1.0f;
  }
}

// Owns one CUDA event.
class Event {
 public:
  Event() { CUDA_CHECK(cudaEventCreate(&event_)); }
  ~Event() { cudaEventDestroy(event_); }
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  cudaEvent_t get() const { return event_; }

 private:
  cudaEvent_t event_ = nullptr;
};

}  // namespace

void fill_uniform(float* p, std::int64_t n, std::uint64_t seed, cudaStream_t stream) {
  if (n <= 0) return;
  constexpr int kThreads = 256;
  const auto blocks =
      static_cast<unsigned>(std::min<std::int64_t>(ceil_div<std::int64_t>(n, kThreads), 65535));
  fill_uniform_kernel<<<blocks, kThreads, 0, stream>>>(p, n, seed);
  CUDA_CHECK_LAUNCH();
}

L2Flusher::L2Flusher(bool enabled) {
  if (!enabled) return;
  int device = 0, l2 = 0;
  CUDA_CHECK(cudaGetDevice(&device));
  CUDA_CHECK(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, device));
  // Twice the L2 size, and at least 32 MiB in case a device reports no L2 size.
  const std::int64_t bytes = std::max<std::int64_t>(2 * std::int64_t{l2}, 32 << 20);
  buffer_ = DeviceBuffer(bytes / std::int64_t{sizeof(float)});
}

void L2Flusher::flush(cudaStream_t stream) const {
  if (buffer_.size() == 0) return;
  CUDA_CHECK(cudaMemsetAsync(buffer_.data(), 0, static_cast<std::size_t>(bytes()), stream));
}

std::vector<double> time_calls(const std::function<void()>& prepare,
                               const std::function<void()>& call, int runs, cudaStream_t stream,
                               const L2Flusher* flusher) {
  Event start, stop;
  std::vector<double> seconds;
  for (int r = 0; r < runs; ++r) {
    prepare();
    if (flusher != nullptr) flusher->flush(stream);
    CUDA_CHECK(cudaEventRecord(start.get(), stream));
    call();
    CUDA_CHECK(cudaEventRecord(stop.get(), stream));
    CUDA_CHECK(cudaEventSynchronize(stop.get()));
    CUDA_CHECK(cudaGetLastError());
    float ms = 0.0f;
    CUDA_CHECK(cudaEventElapsedTime(&ms, start.get(), stop.get()));
    seconds.push_back(static_cast<double>(ms) * 1e-3);
  }
  return seconds;
}

}  // namespace convlab
