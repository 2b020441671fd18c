// cuDNN's forward convolution through the legacy descriptor API: fp32 data, fp32 arithmetic
// (FMA math: no TF32 tensor cores, so it can serve as the oracle of fp32 kernels).
#include "reference/conv/cudnn_conv.hpp"

#include <array>
#include <string>

#include "reference/core/cuda_check.hpp"

namespace convlab {

void cudnn_check(cudnnStatus_t status, const char* call, const char* file, int line) {
  if (status == CUDNN_STATUS_SUCCESS) return;
  throw CudaError(std::string("cuDNN error ") + cudnnGetErrorString(status) + " in " + call +
                  " at " + file + ":" + std::to_string(line));
}

CudnnConv::CudnnConv(bool allow_tf32) : allow_tf32_(allow_tf32) {
  CUDNN_CHECK(cudnnCreate(&handle_));
  CUDNN_CHECK(cudnnCreateTensorDescriptor(&x_desc_));
  CUDNN_CHECK(cudnnCreateTensorDescriptor(&y_desc_));
  CUDNN_CHECK(cudnnCreateFilterDescriptor(&k_desc_));
  CUDNN_CHECK(cudnnCreateConvolutionDescriptor(&conv_desc_));
  CUDNN_CHECK(cudnnCreateActivationDescriptor(&tanh_desc_));
  CUDNN_CHECK(cudnnCreatePoolingDescriptor(&pool_desc_));
  CUDNN_CHECK(cudnnCreateTensorDescriptor(&pooled_desc_));
}

CudnnConv::~CudnnConv() {
  // Destructors must not throw: statuses are ignored here.
  if (pooled_desc_ != nullptr) cudnnDestroyTensorDescriptor(pooled_desc_);
  if (pool_desc_ != nullptr) cudnnDestroyPoolingDescriptor(pool_desc_);
  if (tanh_desc_ != nullptr) cudnnDestroyActivationDescriptor(tanh_desc_);
  if (conv_desc_ != nullptr) cudnnDestroyConvolutionDescriptor(conv_desc_);
  if (k_desc_ != nullptr) cudnnDestroyFilterDescriptor(k_desc_);
  if (y_desc_ != nullptr) cudnnDestroyTensorDescriptor(y_desc_);
  if (x_desc_ != nullptr) cudnnDestroyTensorDescriptor(x_desc_);
  if (handle_ != nullptr) cudnnDestroy(handle_);
}

void set_conv_descriptors(const ConvShape& shape, cudnnTensorDescriptor_t x,
                          cudnnFilterDescriptor_t k, cudnnConvolutionDescriptor_t conv,
                          cudnnTensorDescriptor_t y) {
  CUDNN_CHECK(cudnnSetTensor4dDescriptor(x, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, shape.B, shape.C,
                                         shape.H, shape.W));
  CUDNN_CHECK(cudnnSetFilter4dDescriptor(k, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, shape.M, shape.C,
                                         shape.K, shape.K));
  // pad 0, stride 1, dilation 1; cross-correlation is what the course's formula computes.
  CUDNN_CHECK(cudnnSetConvolution2dDescriptor(conv, 0, 0, 1, 1, 1, 1, CUDNN_CROSS_CORRELATION,
                                              CUDNN_DATA_FLOAT));
  // True fp32: no TF32 tensor-core paths, whatever the GPU.
  CUDNN_CHECK(cudnnSetConvolutionMathType(conv, CUDNN_FMA_MATH));

  int n = 0, c = 0, h = 0, w = 0;
  CUDNN_CHECK(cudnnGetConvolution2dForwardOutputDim(conv, x, k, &n, &c, &h, &w));
  if (n != shape.B || c != shape.M || h != shape.H_out() || w != shape.W_out()) {
    throw Error("cuDNN output shape " + std::to_string(n) + "x" + std::to_string(c) + "x" +
                std::to_string(h) + "x" + std::to_string(w) + " disagrees with " +
                shape.to_string());
  }
  CUDNN_CHECK(cudnnSetTensor4dDescriptor(y, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, n, c, h, w));
}

void CudnnConv::prepare(const ConvShape& shape) {
  shape.validate();
  prepared_ = ConvShape{};  // stays empty if anything below throws
  set_conv_descriptors(shape, x_desc_, k_desc_, conv_desc_, y_desc_);
  if (allow_tf32_) CUDNN_CHECK(cudnnSetConvolutionMathType(conv_desc_, CUDNN_TENSOR_OP_MATH));

  // The heuristics rank the algorithms; take the first that works and whose workspace we
  // can allocate (a large workspace may not fit next to a large batch).
  std::array<cudnnConvolutionFwdAlgoPerf_t, CUDNN_CONVOLUTION_FWD_ALGO_COUNT> perf{};
  int returned = 0;
  CUDNN_CHECK(cudnnGetConvolutionForwardAlgorithm_v7(handle_, x_desc_, k_desc_, conv_desc_, y_desc_,
                                                     static_cast<int>(perf.size()), &returned,
                                                     perf.data()));
  for (int i = 0; i < returned; ++i) {
    const cudnnConvolutionFwdAlgoPerf_t& p = perf[static_cast<std::size_t>(i)];
    if (p.status != CUDNN_STATUS_SUCCESS) continue;
    if (!allow_tf32_ && p.mathType != CUDNN_DEFAULT_MATH && p.mathType != CUDNN_FMA_MATH) {
      continue;
    }
    std::size_t bytes = 0;
    if (cudnnGetConvolutionForwardWorkspaceSize(handle_, x_desc_, k_desc_, conv_desc_, y_desc_,
                                                p.algo, &bytes) != CUDNN_STATUS_SUCCESS) {
      continue;
    }
    const auto floats = static_cast<std::int64_t>((bytes + sizeof(float) - 1) / sizeof(float));
    if (floats > workspace_.size()) {
      try {
        workspace_ = DeviceBuffer();  // free the old one first
        workspace_ = DeviceBuffer(floats);
      } catch (const CudaError&) {
        cudaGetLastError();  // clear the allocation error and try the next algorithm
        continue;
      }
    }
    algo_ = p.algo;
    workspace_bytes_ = bytes;
    prepared_ = shape;
    return;
  }
  throw CudaError("cuDNN offers no usable fp32 forward algorithm for " + shape.to_string());
}

void CudnnConv::forward(float* y, const float* x, const float* k, const ConvShape& shape,
                        cudaStream_t stream) {
  if (!(shape == prepared_)) prepare(shape);
  CUDNN_CHECK(cudnnSetStream(handle_, stream));
  const float one = 1.0f, zero = 0.0f;
  CUDNN_CHECK(cudnnConvolutionForward(handle_, &one, x_desc_, x, k_desc_, k, conv_desc_, algo_,
                                      workspace_bytes_ > 0 ? workspace_.data() : nullptr,
                                      workspace_bytes_, &zero, y_desc_, y));
}

void CudnnConv::forward_tanh_maxpool(float* y, const float* x, const float* k,
                                     const ConvShape& shape, const PoolShape& pool,
                                     cudaStream_t stream) {
  pool.validate(shape);
  if (conv_out_.size() < shape.y_elements()) {
    conv_out_ = DeviceBuffer();  // free the old one first
    conv_out_ = DeviceBuffer(shape.y_elements());
  }
  forward(conv_out_.data(), x, k, shape, stream);
  const float one = 1.0f, zero = 0.0f;
  CUDNN_CHECK(cudnnSetActivationDescriptor(tanh_desc_, CUDNN_ACTIVATION_TANH,
                                           CUDNN_NOT_PROPAGATE_NAN, 0.0));
  CUDNN_CHECK(cudnnActivationForward(handle_, tanh_desc_, &one, y_desc_, conv_out_.data(), &zero,
                                     y_desc_, conv_out_.data()));
  CUDNN_CHECK(cudnnSetPooling2dDescriptor(pool_desc_, CUDNN_POOLING_MAX, CUDNN_NOT_PROPAGATE_NAN,
                                          pool.size, pool.size, 0, 0, pool.stride, pool.stride));
  CUDNN_CHECK(cudnnSetTensor4dDescriptor(pooled_desc_, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, shape.B,
                                         shape.M, pool.out(shape.H_out()),
                                         pool.out(shape.W_out())));
  CUDNN_CHECK(cudnnPoolingForward(handle_, pool_desc_, &one, y_desc_, conv_out_.data(), &zero,
                                  pooled_desc_, y));
}

std::string cudnn_algorithm_name(cudnnConvolutionFwdAlgo_t algo) {
  switch (algo) {
    case CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM:
      return "IMPLICIT_GEMM";
    case CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM:
      return "IMPLICIT_PRECOMP_GEMM";
    case CUDNN_CONVOLUTION_FWD_ALGO_GEMM:
      return "GEMM";
    case CUDNN_CONVOLUTION_FWD_ALGO_DIRECT:
      return "DIRECT";
    case CUDNN_CONVOLUTION_FWD_ALGO_FFT:
      return "FFT";
    case CUDNN_CONVOLUTION_FWD_ALGO_FFT_TILING:
      return "FFT_TILING";
    case CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD:
      return "WINOGRAD";
    case CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD_NONFUSED:
      return "WINOGRAD_NONFUSED";
    case CUDNN_CONVOLUTION_FWD_ALGO_COUNT:
      break;
  }
  return "algorithm " + std::to_string(static_cast<int>(algo));
}

std::string CudnnConv::algorithm() const {
  return cudnn_algorithm_name(algo_);
}

namespace {
CudnnConv& thread_cudnn_conv() {
  thread_local CudnnConv conv;
  return conv;
}
CudnnConv& thread_cudnn_conv_tf32() {
  thread_local CudnnConv conv(true);
  return conv;
}
}  // namespace

void conv_forward_cudnn(float* y, const float* x, const float* k, const ConvShape& shape,
                        cudaStream_t stream) {
  thread_cudnn_conv().forward(y, x, k, shape, stream);
}

void conv_tanh_maxpool_cudnn(float* y, const float* x, const float* k, const ConvShape& shape,
                             const PoolShape& pool, cudaStream_t stream) {
  thread_cudnn_conv().forward_tanh_maxpool(y, x, k, shape, pool, stream);
}

void conv_forward_cudnn_tf32(float* y, const float* x, const float* k, const ConvShape& shape,
                             cudaStream_t stream) {
  thread_cudnn_conv_tf32().forward(y, x, k, shape, stream);
}

void conv_tanh_maxpool_cudnn_tf32(float* y, const float* x, const float* k,
                                  const ConvShape& shape, const PoolShape& pool,
                                  cudaStream_t stream) {
  thread_cudnn_conv_tf32().forward_tanh_maxpool(y, x, k, shape, pool, stream);
}

}  // namespace convlab
