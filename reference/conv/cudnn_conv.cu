// cuDNN's forward convolution through the legacy descriptor API: fp32 data, fp32 arithmetic
// (FMA math: no TF32 tensor cores, so it can serve as the oracle of fp32 kernels); and the
// same convolution in the tf32 and fp16 classes, the comparisons of those variants.
#include "reference/conv/cudnn_conv.hpp"

#include <cuda_fp16.h>

#include <algorithm>
#include <array>
#include <memory>
#include <string>

#include "reference/core/cuda_check.hpp"
#include "reference/core/cuda_launch.cuh"

namespace convlab {

namespace {

__global__ void to_half(__half* __restrict__ out, const float* __restrict__ in, std::int64_t n) {
  for (std::int64_t i = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x; i < n;
       i += std::int64_t{gridDim.x} * blockDim.x) {
    out[i] = __float2half_rn(in[i]);
  }
}

__global__ void to_float(float* __restrict__ out, const __half* __restrict__ in, std::int64_t n) {
  for (std::int64_t i = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x; i < n;
       i += std::int64_t{gridDim.x} * blockDim.x) {
    out[i] = __half2float(in[i]);
  }
}

unsigned blocks_for(std::int64_t n) {
  return grid_stride_blocks(n, 256, std::int64_t{1} << 16);
}

// A DeviceBuffer of floats holding at least `halves` half values.
void ensure_halves(DeviceBuffer& b, std::int64_t halves) {
  const std::int64_t floats = (halves + 1) / 2;
  if (b.size() >= floats) return;
  b = DeviceBuffer();  // free the old one first
  b = DeviceBuffer(floats);
}

}  // namespace

CudnnConv::CudnnConv(Precision precision, CudnnAlgorithm algorithm)
    : precision_(precision), direct_(algorithm == CudnnAlgorithm::direct) {
  CUDNN_CHECK(cudnnCreate(&handle_));
  CUDNN_CHECK(cudnnCreateTensorDescriptor(&x_desc_));
  CUDNN_CHECK(cudnnCreateTensorDescriptor(&y_desc_));
  CUDNN_CHECK(cudnnCreateFilterDescriptor(&k_desc_));
  CUDNN_CHECK(cudnnCreateConvolutionDescriptor(&conv_desc_));
  CUDNN_CHECK(cudnnCreateActivationDescriptor(&tanh_desc_));
  CUDNN_CHECK(cudnnCreatePoolingDescriptor(&pool_desc_));
  CUDNN_CHECK(cudnnCreateTensorDescriptor(&pooled_desc_));
  if (precision_ == Precision::fp16) {
    CUDNN_CHECK(cudnnCreateTensorDescriptor(&hx_desc_));
    CUDNN_CHECK(cudnnCreateTensorDescriptor(&hy_desc_));
    CUDNN_CHECK(cudnnCreateFilterDescriptor(&hk_desc_));
  }
}

CudnnConv::~CudnnConv() {
  // Destructors must not throw: statuses are ignored here.
  if (hk_desc_ != nullptr) cudnnDestroyFilterDescriptor(hk_desc_);
  if (hy_desc_ != nullptr) cudnnDestroyTensorDescriptor(hy_desc_);
  if (hx_desc_ != nullptr) cudnnDestroyTensorDescriptor(hx_desc_);
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
  const bool fp16 = precision_ == Precision::fp16;
  if (precision_ != Precision::fp32) {
    CUDNN_CHECK(cudnnSetConvolutionMathType(conv_desc_, CUDNN_TENSOR_OP_MATH));
  }
  if (fp16) {
    // Half data, float accumulation (the convolution's compute type stays float).
    CUDNN_CHECK(cudnnSetTensor4dDescriptor(hx_desc_, CUDNN_TENSOR_NCHW, CUDNN_DATA_HALF, shape.B,
                                           shape.C, shape.H, shape.W));
    CUDNN_CHECK(cudnnSetFilter4dDescriptor(hk_desc_, CUDNN_DATA_HALF, CUDNN_TENSOR_NCHW, shape.M,
                                           shape.C, shape.K, shape.K));
    CUDNN_CHECK(cudnnSetTensor4dDescriptor(hy_desc_, CUDNN_TENSOR_NCHW, CUDNN_DATA_HALF, shape.B,
                                           shape.M, shape.H_out(), shape.W_out()));
    ensure_halves(hx_, shape.x_elements());
    ensure_halves(hk_, shape.k_elements());
    ensure_halves(hy_, shape.y_elements());
  }
  cudnnTensorDescriptor_t xd = fp16 ? hx_desc_ : x_desc_;
  cudnnTensorDescriptor_t yd = fp16 ? hy_desc_ : y_desc_;
  cudnnFilterDescriptor_t kd = fp16 ? hk_desc_ : k_desc_;

  // The oracle's one algorithm, or the heuristics' ranking: the first that works and whose
  // workspace we can allocate (a large workspace may not fit next to a large batch).
  if (direct_) {
    if (!use_algorithm(kOracleAlgorithm, xd, kd, yd)) {
      throw CudaError("cuDNN's " + cudnn_algorithm_name(kOracleAlgorithm) + " cannot run " +
                      shape.to_string());
    }
    prepared_ = shape;
    return;
  }
  std::array<cudnnConvolutionFwdAlgoPerf_t, CUDNN_CONVOLUTION_FWD_ALGO_COUNT> perf{};
  int returned = 0;
  CUDNN_CHECK(cudnnGetConvolutionForwardAlgorithm_v7(handle_, xd, kd, conv_desc_, yd,
                                                     static_cast<int>(perf.size()), &returned,
                                                     perf.data()));
  for (int i = 0; i < returned; ++i) {
    const cudnnConvolutionFwdAlgoPerf_t& p = perf[static_cast<std::size_t>(i)];
    if (p.status != CUDNN_STATUS_SUCCESS) continue;
    if (precision_ == Precision::fp32 && p.mathType != CUDNN_DEFAULT_MATH &&
        p.mathType != CUDNN_FMA_MATH) {
      continue;
    }
    if (use_algorithm(p.algo, xd, kd, yd)) {
      prepared_ = shape;
      return;
    }
  }
  throw CudaError("cuDNN offers no usable " + std::string(precision_name(precision_)) +
                  " forward algorithm for " + shape.to_string());
}

bool CudnnConv::use_algorithm(cudnnConvolutionFwdAlgo_t algo, cudnnTensorDescriptor_t xd,
                              cudnnFilterDescriptor_t kd, cudnnTensorDescriptor_t yd) {
  std::size_t bytes = 0;
  if (cudnnGetConvolutionForwardWorkspaceSize(handle_, xd, kd, conv_desc_, yd, algo, &bytes) !=
      CUDNN_STATUS_SUCCESS) {
    return false;
  }
  const auto floats = static_cast<std::int64_t>((bytes + sizeof(float) - 1) / sizeof(float));
  if (floats > workspace_.size()) {
    try {
      workspace_ = DeviceBuffer();  // free the old one first
      workspace_ = DeviceBuffer(floats);
    } catch (const CudaError&) {
      cudaGetLastError();  // clear the allocation error: the caller tries the next algorithm
      return false;
    }
  }
  algo_ = algo;
  workspace_bytes_ = bytes;
  return true;
}

void CudnnConv::forward(float* y, const float* x, const float* k, const ConvShape& shape,
                        cudaStream_t stream) {
  if (!(shape == prepared_)) prepare(shape);
  CUDNN_CHECK(cudnnSetStream(handle_, stream));
  const float one = 1.0f, zero = 0.0f;
  void* workspace = workspace_bytes_ > 0 ? workspace_.data() : nullptr;
  if (precision_ != Precision::fp16) {
    CUDNN_CHECK(cudnnConvolutionForward(handle_, &one, x_desc_, x, k_desc_, k, conv_desc_, algo_,
                                        workspace, workspace_bytes_, &zero, y_desc_, y));
    return;
  }
  auto* hx = reinterpret_cast<__half*>(hx_.data());
  auto* hk = reinterpret_cast<__half*>(hk_.data());
  auto* hy = reinterpret_cast<__half*>(hy_.data());
  to_half<<<blocks_for(shape.x_elements()), 256, 0, stream>>>(hx, x, shape.x_elements());
  CUDA_CHECK_LAUNCH();
  to_half<<<blocks_for(shape.k_elements()), 256, 0, stream>>>(hk, k, shape.k_elements());
  CUDA_CHECK_LAUNCH();
  CUDNN_CHECK(cudnnConvolutionForward(handle_, &one, hx_desc_, hx, hk_desc_, hk, conv_desc_, algo_,
                                      workspace, workspace_bytes_, &zero, hy_desc_, hy));
  to_float<<<blocks_for(shape.y_elements()), 256, 0, stream>>>(y, hy, shape.y_elements());
  CUDA_CHECK_LAUNCH();
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
// One CudnnConv per thread, class and algorithm choice, made on first use (a cuDNN handle is
// not free).
CudnnConv& thread_cudnn_conv(Precision precision = Precision::fp32,
                             CudnnAlgorithm algorithm = CudnnAlgorithm::fastest) {
  thread_local std::array<std::array<std::unique_ptr<CudnnConv>, 2>, 3> convs;
  std::unique_ptr<CudnnConv>& conv = convs.at(static_cast<std::size_t>(precision))
                                         .at(algorithm == CudnnAlgorithm::direct ? 1 : 0);
  if (conv == nullptr) conv = std::make_unique<CudnnConv>(precision, algorithm);
  return *conv;
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

void conv_forward_cudnn_direct(float* y, const float* x, const float* k, const ConvShape& shape,
                               cudaStream_t stream) {
  thread_cudnn_conv(Precision::fp32, CudnnAlgorithm::direct).forward(y, x, k, shape, stream);
}

void conv_tanh_maxpool_cudnn_direct(float* y, const float* x, const float* k,
                                    const ConvShape& shape, const PoolShape& pool,
                                    cudaStream_t stream) {
  thread_cudnn_conv(Precision::fp32, CudnnAlgorithm::direct)
      .forward_tanh_maxpool(y, x, k, shape, pool, stream);
}

namespace {
template <Precision P>
void forward_in(float* y, const float* x, const float* k, const ConvShape& shape,
                cudaStream_t stream) {
  thread_cudnn_conv(P).forward(y, x, k, shape, stream);
}

template <Precision P>
void tanh_maxpool_in(float* y, const float* x, const float* k, const ConvShape& shape,
                     const PoolShape& pool, cudaStream_t stream) {
  thread_cudnn_conv(P).forward_tanh_maxpool(y, x, k, shape, pool, stream);
}
}  // namespace

GpuConvFn conv_forward_cudnn_of(Precision precision) {
  switch (precision) {
    case Precision::fp32:
      return &conv_forward_cudnn;
    case Precision::tf32:
      return &forward_in<Precision::tf32>;
    case Precision::fp16:
      return &forward_in<Precision::fp16>;
  }
  throw Error("unknown precision class");
}

GpuConvTanhPoolFn conv_tanh_maxpool_cudnn_of(Precision precision) {
  switch (precision) {
    case Precision::fp32:
      return &conv_tanh_maxpool_cudnn;
    case Precision::tf32:
      return &tanh_maxpool_in<Precision::tf32>;
    case Precision::fp16:
      return &tanh_maxpool_in<Precision::fp16>;
  }
  throw Error("unknown precision class");
}

}  // namespace convlab
