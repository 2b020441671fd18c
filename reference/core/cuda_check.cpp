#include "reference/core/cuda_check.hpp"

#include <utility>

#include "reference/core/device_buffer.hpp"

namespace convlab {

void cuda_check(cudaError_t status, const char* call, const char* file, int line) {
  if (status == cudaSuccess) return;
  throw CudaError(std::string("CUDA error ") + cudaGetErrorName(status) + " (" +
                      cudaGetErrorString(status) + ") in " + call + " at " + file + ":" +
                      std::to_string(line),
                  status == cudaErrorMemoryAllocation);
}

bool cuda_device_available(std::string* reason) {
  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  if (status == cudaSuccess && count > 0) return true;
  if (reason != nullptr) {
    if (status == cudaErrorInsufficientDriver) {
      *reason =
          "no usable CUDA device: no NVIDIA driver is loaded, or it is older than this "
          "CUDA runtime";
    } else if (status != cudaSuccess) {
      *reason = std::string("no usable CUDA device (") + cudaGetErrorString(status) + ")";
    } else {
      *reason = "no CUDA device in this machine";
    }
  }
  return false;
}

DeviceBuffer::DeviceBuffer(std::int64_t count) : count_(count) {
  if (count > 0) {
    void* data = nullptr;
    CUDA_CHECK(cudaMalloc(&data, static_cast<std::size_t>(count) * sizeof(float)));
    data_ = static_cast<float*>(data);
  }
}

DeviceBuffer::~DeviceBuffer() {
  if (data_ != nullptr) cudaFree(data_);
}

DeviceBuffer::DeviceBuffer(DeviceBuffer&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), count_(std::exchange(other.count_, 0)) {}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& other) noexcept {
  if (this != &other) {
    if (data_ != nullptr) cudaFree(data_);
    data_ = std::exchange(other.data_, nullptr);
    count_ = std::exchange(other.count_, 0);
  }
  return *this;
}

void DeviceBuffer::upload(std::span<const float> host) {
  if (static_cast<std::int64_t>(host.size()) != count_) {
    throw Error("upload of " + std::to_string(host.size()) + " values into a device buffer of " +
                std::to_string(count_));
  }
  CUDA_CHECK(cudaMemcpy(data_, host.data(), host.size_bytes(), cudaMemcpyHostToDevice));
  // From pageable memory cudaMemcpy may return before the DMA lands, and work on a
  // non-blocking stream is not ordered after it: wait, so the data is there for any stream.
  CUDA_CHECK(cudaDeviceSynchronize());
}

std::vector<float> DeviceBuffer::download() const {
  std::vector<float> host(static_cast<std::size_t>(count_));
  CUDA_CHECK(cudaMemcpy(host.data(), data_, host.size() * sizeof(float), cudaMemcpyDeviceToHost));
  return host;
}

void DeviceBuffer::fill_bytes(int byte) {
  CUDA_CHECK(cudaMemset(data_, byte, static_cast<std::size_t>(count_) * sizeof(float)));
  // cudaMemset is asynchronous and not ordered with non-blocking streams: a kernel launched
  // next on one could run before the poison lands and have its results overwritten.
  CUDA_CHECK(cudaDeviceSynchronize());
}

}  // namespace convlab
