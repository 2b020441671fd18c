/// @file
/// @brief The GPU layers of the network: cuDNN for tanh, ReLU, pooling and softmax, cuBLAS
/// for the fully connected layers. The convolution under test is not here.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>

#include <cstdint>

#include "reference/core/device_buffer.hpp"

/// The GPU layers of the network other than the convolution under test (cuDNN and cuBLAS).
namespace convlab::gpu {

/// Throws CudaError when a cuBLAS call fails.
void cublas_check(cublasStatus_t status, const char* call, const char* file, int line);

/// cuDNN and cuBLAS handles bound to one stream, and the layers that use them.
/// All pointers are device pointers; shapes are NCHW.
class Layers {
 public:
  /// Creates the cuDNN handle and binds it to `stream`; the cuBLAS handle follows on the first
  /// fully-connected layer (a run of convolutions alone never loads cuBLAS).
  explicit Layers(cudaStream_t stream);
  ~Layers();
  Layers(const Layers&) = delete;
  Layers& operator=(const Layers&) = delete;

  /// tanh of every value of x[n][c][h][w], in place.
  void tanh(float* x, std::int64_t n, int c, int h, int w);
  /// max(0, v) of every value of x[n][c][h][w], in place.
  void relu(float* x, std::int64_t n, int c, int h, int w);
  /// Max pooling, no padding: y[n][c][(h-size)/stride+1][(w-size)/stride+1].
  void maxpool(const float* x, float* y, std::int64_t n, int c, int h, int w, int size, int stride);
  /// y[n][out] = x[n][in] w[out][in]^T + b[out] (strict fp32, no TF32).
  void fully_connected(const float* x, const float* w, const float* b, float* y, std::int64_t n,
                       int in, int out);
  /// Softmax of each row of x[n][cols], in place.
  void softmax(float* x, std::int64_t n, int cols);

 private:
  void activation(float* x, std::int64_t n, int c, int h, int w, cudnnActivationMode_t mode);
  cublasHandle_t blas();

  cudaStream_t stream_;
  cudnnHandle_t cudnn_ = nullptr;
  cublasHandle_t cublas_ = nullptr;
  cudnnTensorDescriptor_t a_ = nullptr;
  cudnnTensorDescriptor_t b_ = nullptr;
  cudnnActivationDescriptor_t act_ = nullptr;
  cudnnPoolingDescriptor_t pool_ = nullptr;
  DeviceBuffer ones_;  ///< a column of ones: the bias enters the GEMM result as a rank-1 update
};

}  // namespace convlab::gpu
