/// @file
/// @brief cuDNN's convolution, the GPU library convolution of m1.2 and the oracle of GPU checks.
#pragma once

#include <cuda_runtime_api.h>
#include <cudnn.h>

#include <cstddef>
#include <string>

#include "reference/conv/conv_shape.hpp"
#include "reference/conv/precision.hpp"
#include "reference/conv/student_api.hpp"
#include "reference/core/cudnn_check.hpp"
#include "reference/core/device_buffer.hpp"

namespace convlab {

/// "IMPLICIT_GEMM", "FFT_TILING", ... (cudnnConvolutionFwdAlgo_t without its prefix).
std::string cudnn_algorithm_name(cudnnConvolutionFwdAlgo_t algo);

/// Describes y = conv(x, k) for `shape` in the given descriptors: NCHW fp32, cross-correlation,
/// no padding, stride 1, FMA math only (no TF32). Throws Error if cuDNN's output shape
/// disagrees with the shape's.
void set_conv_descriptors(const ConvShape& shape, cudnnTensorDescriptor_t x,
                          cudnnFilterDescriptor_t k, cudnnConvolutionDescriptor_t conv,
                          cudnnTensorDescriptor_t y);

/// The oracle the bench and the referee check against: IMPLICIT_GEMM, which sums the products
/// directly in fp32, so its own rounding is a float32 sum's (accumulation_bound(),
/// reference/conv/precision.hpp); FFT and Winograd round through their transforms as well.
inline constexpr cudnnConvolutionFwdAlgo_t kOracleAlgorithm =
    CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM;

/// Which cuDNN algorithm a CudnnConv runs.
enum class CudnnAlgorithm {
  fastest,  ///< the heuristics' first usable one (FFT and Winograd included)
  direct    ///< kOracleAlgorithm
};

/// A cuDNN forward convolution (fp32, cross-correlation, no padding, stride 1).
/// Descriptors, the algorithm and the workspace are set up on the first call for a shape and
/// reused while the shape stays the same.
class CudnnConv {
 public:
  /// The comparison of a precision class: fp32, FMA math only; tf32, CUDNN_TENSOR_OP_MATH, so
  /// algorithms may run float data on TF32 tensor cores; fp16, x and k rounded to half on the
  /// device, a half convolution with float accumulation on tensor cores, y converted back to
  /// float, all inside forward() as an fp16 variant does it inside its call.
  explicit CudnnConv(Precision precision = Precision::fp32,
                     CudnnAlgorithm algorithm = CudnnAlgorithm::fastest);
  ~CudnnConv();
  CudnnConv(const CudnnConv&) = delete;
  CudnnConv& operator=(const CudnnConv&) = delete;

  /// y = conv(x, k) on `stream`; device pointers.
  void forward(float* y, const float* x, const float* k, const ConvShape& shape,
               cudaStream_t stream);
  /// y = maxpool(tanh(conv(x, k))) on `stream`: the convolution into a scratch buffer owned by
  /// this object, then cuDNN's tanh and max-pool (no padding), all enqueued by this one call.
  /// The comparison row for a fused launcher (GpuConvTanhPoolFn), timed the same way.
  void forward_tanh_maxpool(float* y, const float* x, const float* k, const ConvShape& shape,
                            const PoolShape& pool, cudaStream_t stream);
  /// Name of the algorithm chosen for the last shape, e.g. "IMPLICIT_PRECOMP_GEMM".
  std::string algorithm() const;
  /// Workspace bytes of that algorithm.
  std::size_t workspace_bytes() const { return workspace_bytes_; }

 private:
  void prepare(const ConvShape& shape);
  // Takes `algo` when its workspace can be allocated.
  bool use_algorithm(cudnnConvolutionFwdAlgo_t algo, cudnnTensorDescriptor_t xd,
                     cudnnFilterDescriptor_t kd, cudnnTensorDescriptor_t yd);

  Precision precision_ = Precision::fp32;
  bool direct_ = false;
  cudnnHandle_t handle_ = nullptr;
  // fp16: half descriptors and buffers for the convolution itself (the float ones above still
  // describe y for the tanh and max-pool).
  cudnnTensorDescriptor_t hx_desc_ = nullptr;
  cudnnTensorDescriptor_t hy_desc_ = nullptr;
  cudnnFilterDescriptor_t hk_desc_ = nullptr;
  DeviceBuffer hx_, hk_, hy_;
  cudnnTensorDescriptor_t x_desc_ = nullptr;
  cudnnTensorDescriptor_t y_desc_ = nullptr;
  cudnnFilterDescriptor_t k_desc_ = nullptr;
  cudnnConvolutionDescriptor_t conv_desc_ = nullptr;
  cudnnConvolutionFwdAlgo_t algo_ = CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM;
  ConvShape prepared_{};
  DeviceBuffer workspace_;
  std::size_t workspace_bytes_ = 0;
  cudnnActivationDescriptor_t tanh_desc_ = nullptr;  // forward_tanh_maxpool
  cudnnPoolingDescriptor_t pool_desc_ = nullptr;
  cudnnTensorDescriptor_t pooled_desc_ = nullptr;
  DeviceBuffer conv_out_;  // the convolution's output before tanh and pooling
};

/// GpuConvFn-shaped cuDNN convolution using one CudnnConv per thread (for tests and m1.2).
void conv_forward_cudnn(float* y, const float* x, const float* k, const ConvShape& shape,
                        cudaStream_t stream);

/// GpuConvTanhPoolFn-shaped cuDNN conv + tanh + max-pool (CudnnConv::forward_tanh_maxpool),
/// using the same CudnnConv per thread as conv_forward_cudnn.
void conv_tanh_maxpool_cudnn(float* y, const float* x, const float* k, const ConvShape& shape,
                             const PoolShape& pool, cudaStream_t stream);

/// conv_forward_cudnn on CudnnAlgorithm::direct (one CudnnConv per thread): the referee's check
/// of a timed call, whose error rule assumes a direct sum.
void conv_forward_cudnn_direct(float* y, const float* x, const float* k, const ConvShape& shape,
                               cudaStream_t stream);
/// conv_tanh_maxpool_cudnn on the CudnnConv of conv_forward_cudnn_direct.
void conv_tanh_maxpool_cudnn_direct(float* y, const float* x, const float* k,
                                    const ConvShape& shape, const PoolShape& pool,
                                    cudaStream_t stream);

/// conv_forward_cudnn in precision class `precision` (CudnnConv(precision), one per thread and
/// class): the comparison of that class's variants. fp32 is conv_forward_cudnn itself.
GpuConvFn conv_forward_cudnn_of(Precision precision);

/// conv_tanh_maxpool_cudnn in precision class `precision`, on the same CudnnConv as
/// conv_forward_cudnn_of(precision).
GpuConvTanhPoolFn conv_tanh_maxpool_cudnn_of(Precision precision);

}  // namespace convlab
