// cuDNN's side of the bench, through the legacy descriptor API like reference/conv/cudnn_conv.cu:
// cudnnFindConvolutionForwardAlgorithmEx runs every forward algorithm on the real buffers and
// reports its time, status, workspace and math type. For the fp32 class the descriptor asks for
// CUDNN_FMA_MATH, so no algorithm may convert to TF32 on tensor cores: the library is held to
// the same fp32 arithmetic the variants use. For the tf32 class it asks for
// CUDNN_TENSOR_OP_MATH, which lets float data run on TF32 tensor cores (Ampere and later).
#include "reference/bench/cudnn_find.hpp"

#include <algorithm>
#include <array>
#include <string>

#include "reference/conv/cudnn_conv.hpp"
#include "reference/core/cuda_check.hpp"
#include "reference/core/error.hpp"

namespace convlab {

namespace {

std::string status_name(cudnnStatus_t s) {
  return cudnnGetErrorString(s);
}

std::string math_name(cudnnMathType_t m) {
  switch (m) {
    case CUDNN_DEFAULT_MATH:
      return "DEFAULT";
    case CUDNN_TENSOR_OP_MATH:
      return "TENSOR_OP";
    case CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION:
      return "TENSOR_OP_ALLOW_CONVERSION";
    case CUDNN_FMA_MATH:
      return "FMA";
  }
  return "math type " + std::to_string(static_cast<int>(m));
}

}  // namespace

std::string cudnn_version_text() {
  const std::size_t v = cudnnGetVersion();  // e.g. 91900 for 9.19.0
  return std::to_string(v / 10000) + "." + std::to_string(v % 10000 / 100) + "." +
         std::to_string(v % 100);
}

CudnnFinder::CudnnFinder() {
  CUDNN_CHECK(cudnnCreate(&handle_));
  CUDNN_CHECK(cudnnCreateTensorDescriptor(&x_desc_));
  CUDNN_CHECK(cudnnCreateTensorDescriptor(&y_desc_));
  CUDNN_CHECK(cudnnCreateFilterDescriptor(&k_desc_));
  CUDNN_CHECK(cudnnCreateConvolutionDescriptor(&conv_desc_));
}

CudnnFinder::~CudnnFinder() {
  // Destructors must not throw: statuses are ignored here.
  if (conv_desc_ != nullptr) cudnnDestroyConvolutionDescriptor(conv_desc_);
  if (k_desc_ != nullptr) cudnnDestroyFilterDescriptor(k_desc_);
  if (y_desc_ != nullptr) cudnnDestroyTensorDescriptor(y_desc_);
  if (x_desc_ != nullptr) cudnnDestroyTensorDescriptor(x_desc_);
  if (handle_ != nullptr) cudnnDestroy(handle_);
}

void CudnnFinder::prepare(const ConvShape& shape, cudaStream_t stream, Precision precision) {
  if (precision == Precision::fp16) {
    throw Error("the bench's cuDNN runs float data only: the fp16 class is not set up");
  }
  shape.validate();
  CUDNN_CHECK(cudnnSetStream(handle_, stream));
  set_conv_descriptors(shape, x_desc_, k_desc_, conv_desc_, y_desc_);
  if (precision == Precision::tf32) {
    CUDNN_CHECK(cudnnSetConvolutionMathType(conv_desc_, CUDNN_TENSOR_OP_MATH));
  }
  precision_ = precision;
}

std::size_t CudnnFinder::workspace_for(int algo_id) const {
  std::size_t bytes = 0;
  CUDNN_CHECK(cudnnGetConvolutionForwardWorkspaceSize(
      handle_, x_desc_, k_desc_, conv_desc_, y_desc_,
      static_cast<cudnnConvolutionFwdAlgo_t>(algo_id), &bytes));
  return bytes;
}

std::size_t CudnnFinder::largest_workspace() const {
  std::size_t largest = 0;
  for (int a = 0; a < CUDNN_CONVOLUTION_FWD_ALGO_COUNT; ++a) {
    std::size_t bytes = 0;
    // Algorithms that do not support the shape answer with an error status: skip them.
    if (cudnnGetConvolutionForwardWorkspaceSize(handle_, x_desc_, k_desc_, conv_desc_, y_desc_,
                                                static_cast<cudnnConvolutionFwdAlgo_t>(a),
                                                &bytes) == CUDNN_STATUS_SUCCESS) {
      largest = std::max(largest, bytes);
    }
  }
  return largest;
}

std::vector<CudnnCandidate> CudnnFinder::find(const float* x, const float* k, float* y,
                                              void* workspace, std::size_t workspace_bytes) {
  int device = 0, major = 0, minor = 0;
  CUDA_CHECK(cudaGetDevice(&device));
  CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device));
  const int compute_capability = major * 10 + minor;
  std::array<cudnnConvolutionFwdAlgoPerf_t, CUDNN_CONVOLUTION_FWD_ALGO_COUNT> perf{};
  int returned = 0;
  CUDNN_CHECK(cudnnFindConvolutionForwardAlgorithmEx(
      handle_, x_desc_, x, k_desc_, k, conv_desc_, y_desc_, y, static_cast<int>(perf.size()),
      &returned, perf.data(), workspace_bytes > 0 ? workspace : nullptr, workspace_bytes));
  std::vector<CudnnCandidate> out;
  for (int i = 0; i < returned; ++i) {
    const cudnnConvolutionFwdAlgoPerf_t& p = perf[static_cast<std::size_t>(i)];
    CudnnCandidate c;
    c.algo_id = static_cast<int>(p.algo);
    c.algorithm = cudnn_algorithm_name(p.algo);
    c.status = status_name(p.status);
    c.time_s = static_cast<double>(p.time) * 1e-3;  // cuDNN reports milliseconds
    c.workspace_bytes = p.memory;
    c.math = math_name(p.mathType);
    // FMA math only (what cuDNN reports for every algorithm when the descriptor asks for it).
    // DEFAULT is as good before compute capability 8.0, where there is no TF32 to fall into.
    const bool fp32 = p.mathType == CUDNN_FMA_MATH ||
                      (p.mathType == CUDNN_DEFAULT_MATH && compute_capability < 80);
    const bool in_class = precision_ == Precision::tf32 || fp32;
    c.eligible = p.status == CUDNN_STATUS_SUCCESS && in_class && p.memory <= workspace_bytes;
    out.push_back(c);
  }
  return out;
}

void CudnnFinder::forward(int algo_id, float* y, const float* x, const float* k, void* workspace,
                          std::size_t workspace_bytes) {
  const float one = 1.0f, zero = 0.0f;
  CUDNN_CHECK(cudnnConvolutionForward(handle_, &one, x_desc_, x, k_desc_, k, conv_desc_,
                                      static_cast<cudnnConvolutionFwdAlgo_t>(algo_id),
                                      workspace_bytes > 0 ? workspace : nullptr, workspace_bytes,
                                      &zero, y_desc_, y));
}

}  // namespace convlab
