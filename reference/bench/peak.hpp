/// @file
/// @brief The measured fp32 peak of the current GPU (a large cuBLAS SGEMM, FMA math, no TF32),
/// the ceiling that "percent of peak" columns divide by.
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
const Fp32Peak& measured_fp32_peak();

}  // namespace convlab
