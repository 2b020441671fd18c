/// @file
/// @brief cuDNN for the bench: every forward algorithm measured by
/// cudnnFindConvolutionForwardAlgorithmEx in fp32 FMA math, the fastest run on demand, and
/// IMPLICIT_GEMM as the oracle the variants are checked against.
#pragma once

#include <cuda_runtime_api.h>
#include <cudnn.h>

#include <cstddef>
#include <string>
#include <vector>

#include "reference/bench/bench_report.hpp"
#include "reference/conv/conv_shape.hpp"
#include "reference/conv/precision.hpp"
#include "reference/conv/cudnn_conv.hpp"

namespace convlab {

/// cuDNN set up for one convolution shape at a time: valid cross-correlation, stride 1, no
/// padding, fp32 data, NCHW; the math of a precision class: CUDNN_FMA_MATH for fp32 (no
/// algorithm may use TF32 tensor cores), CUDNN_TENSOR_OP_MATH for tf32 (TF32 allowed).
class CudnnFinder {
 public:
  /// Creates the handle and descriptors; throws CudaError if cuDNN cannot start.
  CudnnFinder();
  ~CudnnFinder();
  CudnnFinder(const CudnnFinder&) = delete;
  CudnnFinder& operator=(const CudnnFinder&) = delete;

  /// Sets the descriptors for `shape` in the math of `precision` (fp32 or tf32) and runs every
  /// later call on `stream`. Throws Error if cuDNN's output shape disagrees with
  /// shape.H_out() x shape.W_out(), or for the fp16 class (half data is not set up here).
  void prepare(const ConvShape& shape, cudaStream_t stream,
               Precision precision = Precision::fp32);

  /// The largest workspace any algorithm cuDNN supports for this shape asks for.
  std::size_t largest_workspace() const;

  /// Runs cudnnFindConvolutionForwardAlgorithmEx on device data (y is overwritten), offering
  /// `workspace_bytes` of `workspace`. Returns every algorithm it reports, fastest first; an
  /// algorithm is eligible when it succeeded in the class's math: fp32, FMA math (or DEFAULT
  /// math on a GPU older than compute capability 8.0, which has no TF32); tf32, any math.
  std::vector<CudnnCandidate> find(const float* x, const float* k, float* y, void* workspace,
                                   std::size_t workspace_bytes);

  /// y = conv(x, k) with algorithm `algo_id` (a cudnnConvolutionFwdAlgo_t value) on the stream.
  void forward(int algo_id, float* y, const float* x, const float* k, void* workspace,
               std::size_t workspace_bytes);

  /// Workspace bytes `algo_id` needs for this shape; throws CudaError if it is unsupported.
  std::size_t workspace_for(int algo_id) const;

 private:
  cudnnHandle_t handle_ = nullptr;
  cudnnTensorDescriptor_t x_desc_ = nullptr;
  cudnnTensorDescriptor_t y_desc_ = nullptr;
  cudnnFilterDescriptor_t k_desc_ = nullptr;
  cudnnConvolutionDescriptor_t conv_desc_ = nullptr;
  Precision precision_ = Precision::fp32;
};

/// cuDNN's version as "major.minor.patch".
std::string cudnn_version_text();

}  // namespace convlab
