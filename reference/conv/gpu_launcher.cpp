#include "reference/conv/gpu_launcher.hpp"

#include <algorithm>
#include <memory>
#include <utility>

#include "reference/core/cuda_check.hpp"

namespace convlab {

std::size_t GpuLauncher::workspace_bytes(const ConvShape& shape) const {
  return bytes_ == nullptr ? 0 : bytes_(shape);
}

PinnedBuffer::PinnedBuffer(std::int64_t count) : count_(count) {
  void* p = nullptr;
  CUDA_CHECK(cudaMallocHost(&p, static_cast<std::size_t>(std::max<std::int64_t>(count, 1)) *
                                    sizeof(float)));
  data_ = static_cast<float*>(p);
}

PinnedBuffer::~PinnedBuffer() {
  if (data_ != nullptr) cudaFreeHost(data_);
}

void PinnedBuffer::download(const float* src, cudaStream_t stream) {
  CUDA_CHECK(cudaMemcpyAsync(data_, src, static_cast<std::size_t>(count_) * sizeof(float),
                             cudaMemcpyDeviceToHost, stream));
  CUDA_CHECK(cudaStreamSynchronize(stream));
}

void PinnedBuffer::upload(float* dst, cudaStream_t stream) const {
  CUDA_CHECK(cudaMemcpyAsync(dst, data_, static_cast<std::size_t>(count_) * sizeof(float),
                             cudaMemcpyHostToDevice, stream));
  CUDA_CHECK(cudaStreamSynchronize(stream));
}

void GpuLauncher::operator()(float* y, const float* x, const float* k, const ConvShape& shape,
                             void* workspace, cudaStream_t stream) const {
  if (host_ != nullptr) {
    PinnedBuffer hx(shape.x_elements()), hk(shape.k_elements()), hy(shape.y_elements());
    hx.download(x, stream);
    hk.download(k, stream);
    host_(hy.data(), hx.data(), hk.data(), shape);
    hy.upload(y, stream);
  } else if (with_workspace_ != nullptr) {
    with_workspace_(y, x, k, shape, workspace, stream);
  } else {
    plain_(y, x, k, shape, stream);
  }
}

Workspace::~Workspace() {
  if (data_ != nullptr) cudaFree(data_);
}

Workspace::Workspace(Workspace&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), bytes_(std::exchange(other.bytes_, 0)) {}

Workspace& Workspace::operator=(Workspace&& other) noexcept {
  if (this != &other) {
    if (data_ != nullptr) cudaFree(data_);
    data_ = std::exchange(other.data_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
  }
  return *this;
}

void* Workspace::reserve(std::size_t bytes) {
  if (bytes <= bytes_) return data_;
  // The old buffer may still be in use by enqueued work.
  CUDA_CHECK(cudaDeviceSynchronize());
  if (data_ != nullptr) CUDA_CHECK(cudaFree(data_));
  data_ = nullptr;
  bytes_ = 0;
  CUDA_CHECK(cudaMalloc(&data_, bytes));
  bytes_ = bytes;
  return data_;
}

GpuConvCall bind_workspace(GpuLauncher launcher, std::span<const ConvShape> shapes) {
  auto ws = std::make_shared<Workspace>();
  std::size_t most = 0;
  for (const ConvShape& s : shapes) most = std::max(most, launcher.workspace_bytes(s));
  ws->reserve(most);
  GpuConvCall call = [launcher, ws](float* y, const float* x, const float* k, const ConvShape& s,
                                     cudaStream_t stream) {
    launcher(y, x, k, s, ws->reserve(launcher.workspace_bytes(s)), stream);
  };
  call.host = launcher.host();
  return call;
}

}  // namespace convlab
