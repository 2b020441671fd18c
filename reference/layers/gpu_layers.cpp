#include "reference/layers/gpu_layers.hpp"

#include <string>
#include <vector>

#include "reference/core/cuda_check.hpp"
#include "reference/core/cudnn_check.hpp"

#define CUBLAS_CHECK(call) ::convlab::gpu::cublas_check((call), #call, __FILE__, __LINE__)

namespace convlab::gpu {

namespace {

// cuDNN takes int dimensions; a batch is split into pieces that keep every count in range.
int checked_int(std::int64_t v, const char* what) {
  if (v < 1 || v > 0x7fffffff) throw Error(std::string("GPU layer: ") + what + " out of range");
  return static_cast<int>(v);
}

}  // namespace

void cublas_check(cublasStatus_t status, const char* call, const char* file, int line) {
  if (status == CUBLAS_STATUS_SUCCESS) return;
  throw CudaError(std::string("cuBLAS error ") + cublasGetStatusString(status) + " in " + call +
                      " at " + file + ":" + std::to_string(line),
                  status == CUBLAS_STATUS_ALLOC_FAILED);
}

Layers::Layers(cudaStream_t stream) : stream_(stream) {
  CUDNN_CHECK(cudnnCreate(&cudnn_));
  CUDNN_CHECK(cudnnSetStream(cudnn_, stream_));
  CUDNN_CHECK(cudnnCreateTensorDescriptor(&a_));
  CUDNN_CHECK(cudnnCreateTensorDescriptor(&b_));
  CUDNN_CHECK(cudnnCreateActivationDescriptor(&act_));
  CUDNN_CHECK(cudnnCreatePoolingDescriptor(&pool_));
}

Layers::~Layers() {
  cudnnDestroyPoolingDescriptor(pool_);
  cudnnDestroyActivationDescriptor(act_);
  cudnnDestroyTensorDescriptor(b_);
  cudnnDestroyTensorDescriptor(a_);
  if (cublas_ != nullptr) cublasDestroy(cublas_);
  cudnnDestroy(cudnn_);
}

cublasHandle_t Layers::blas() {
  if (cublas_ == nullptr) {
    CUBLAS_CHECK(cublasCreate(&cublas_));
    CUBLAS_CHECK(cublasSetStream(cublas_, stream_));
    // Strict fp32: the expected correctness counts assume true fp32 arithmetic.
    CUBLAS_CHECK(cublasSetMathMode(cublas_, CUBLAS_PEDANTIC_MATH));
  }
  return cublas_;
}

void Layers::activation(float* x, std::int64_t n, int c, int h, int w, cudnnActivationMode_t mode) {
  CUDNN_CHECK(cudnnSetActivationDescriptor(act_, mode, CUDNN_NOT_PROPAGATE_NAN, 0.0));
  CUDNN_CHECK(cudnnSetTensor4dDescriptor(a_, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT,
                                         checked_int(n, "batch"), c, h, w));
  const float one = 1.0f, zero = 0.0f;
  CUDNN_CHECK(cudnnActivationForward(cudnn_, act_, &one, a_, x, &zero, a_, x));
}

void Layers::tanh(float* x, std::int64_t n, int c, int h, int w) {
  activation(x, n, c, h, w, CUDNN_ACTIVATION_TANH);
}

void Layers::relu(float* x, std::int64_t n, int c, int h, int w) {
  activation(x, n, c, h, w, CUDNN_ACTIVATION_RELU);
}

void Layers::maxpool(const float* x, float* y, std::int64_t n, int c, int h, int w, int size,
                     int stride) {
  CUDNN_CHECK(cudnnSetPooling2dDescriptor(pool_, CUDNN_POOLING_MAX, CUDNN_NOT_PROPAGATE_NAN, size,
                                          size, 0, 0, stride, stride));
  const int nn = checked_int(n, "batch");
  CUDNN_CHECK(cudnnSetTensor4dDescriptor(a_, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, nn, c, h, w));
  CUDNN_CHECK(cudnnSetTensor4dDescriptor(b_, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, nn, c,
                                         (h - size) / stride + 1, (w - size) / stride + 1));
  const float one = 1.0f, zero = 0.0f;
  CUDNN_CHECK(cudnnPoolingForward(cudnn_, pool_, &one, a_, x, &zero, b_, y));
}

void Layers::fully_connected(const float* x, const float* w, const float* b, float* y,
                             std::int64_t n, int in, int out) {
  const int nn = checked_int(n, "batch");
  if (ones_.size() < n) {
    ones_ = DeviceBuffer(n);
    const std::vector<float> host(static_cast<std::size_t>(n), 1.0f);
    ones_.upload(host);
  }
  // Row-major y[n][out] is column-major out x n: y = w (out x in) * x (in x n).
  const float one = 1.0f, zero = 0.0f;
  CUBLAS_CHECK(cublasSgemm(blas(), CUBLAS_OP_T, CUBLAS_OP_N, out, nn, in, &one, w, in, x, in, &zero,
                           y, out));
  if (b != nullptr) {
    CUBLAS_CHECK(cublasSger(blas(), out, nn, &one, b, 1, ones_.data(), 1, y, out));
  }
}

void Layers::softmax(float* x, std::int64_t n, int cols) {
  CUDNN_CHECK(cudnnSetTensor4dDescriptor(a_, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT,
                                         checked_int(n, "batch"), cols, 1, 1));
  const float one = 1.0f, zero = 0.0f;
  CUDNN_CHECK(cudnnSoftmaxForward(cudnn_, CUDNN_SOFTMAX_ACCURATE, CUDNN_SOFTMAX_MODE_INSTANCE, &one,
                                  a_, x, &zero, a_, x));
}

}  // namespace convlab::gpu
