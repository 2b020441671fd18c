/// @file
/// @brief The measured fp32 peak of the current GPU (a large cuBLAS SGEMM, FMA math, no TF32),
/// the ceiling that "percent of peak" columns divide by; the measured memory bandwidth of a copy,
/// the roofline's slope; and the measured bandwidth of stores alone, the floor of a layer whose
/// cost is writing its output.
#pragma once

#include <string>

namespace convlab {

/// A measured peak and how it was measured.
struct Fp32Peak {
  double flops_per_s = 0.0;  ///< e.g. 5.1e13
  std::string method;        ///< e.g. "cuBLAS SGEMM 8192^3, FMA math, best of 5"
};

/// Measures once per process (about a second) and caches the result; throws CudaError when
/// there is no GPU.
///
/// cuBLAS SGEMM, m = n = k = 8192, with CUBLAS_DEFAULT_MATH (plain fp32 FMA: TF32 tensor cores
/// would need CUBLAS_TF32_TENSOR_OP_MATH); two warm-up calls, then the best of 5 calls timed with
/// CUDA events. A few elements of the product are checked against a double-precision dot
/// product, so a library that silently used reduced precision would fail loudly (Error) rather
/// than inflate the peak.
const Fp32Peak& measured_fp32_peak();

/// A measured memory bandwidth and how it was measured.
struct MemoryBandwidth {
  double bytes_per_s = 0.0;  ///< bytes read plus bytes written, per second
  std::string method;        ///< how it was measured
};

/// Measures once per process and caches the result; throws CudaError when there is no GPU.
///
/// cudaMemcpyAsync device to device from one 512 MiB buffer to another, both far larger than
/// L2; one warm-up copy, then the best of 10 timed with CUDA events. The figure counts the
/// bytes read and the bytes written.
const MemoryBandwidth& measured_memory_bandwidth();

/// Measures once per process and caches the result; throws CudaError when there is no GPU.
///
/// A kernel that only stores: 1 GiB of float4s, each value its own index (a pattern the
/// memory system cannot compress, as a memset's could be), a grid-stride loop on 4 blocks of
/// 256 threads per SM; one warm-up launch, then the best of 10 timed with CUDA events. The figure
/// counts the bytes written. A layer that writes B bytes of output takes at least B / this.
const MemoryBandwidth& measured_write_bandwidth();

}  // namespace convlab
