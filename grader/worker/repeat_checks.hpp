/// @file
/// @brief The referee's GPU work around a repeated timed request: fresh inputs for the calls
/// after the first, and the check of their outputs, both on the device.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace convlab::grader {

/// out[j] = x[j] * (1 + eps * u_j), u_j uniform in [-1, 1) from a hash of `seed` and j: an input
/// with the statistics of x (zeros stay zero, signs and scale stay) that no earlier call saw,
/// so an output cannot be looked up by the input's bytes. Queued on `stream`.
void perturb_input(float* out, const float* x, std::int64_t n, std::uint64_t seed, float eps,
                   cudaStream_t stream);

/// What an output compared with the reference on the device.
struct DeviceComparison {
  std::int64_t mismatches = 0;    ///< elements with |got - want| > atol + rtol |want| + extra
  std::int64_t first = -1;        ///< the first of them (-1 for none)
  double worst_error = 0.0;       ///< the largest finite |got - want|
  double largest_allowance = 0.0; ///< the largest per-output extra (compare_with_allowance())
};

/// A per-output extra allowance: slope * s + intercept, s the output's sum of |x||k|
/// (`abs_sums`, device, one per convolution output), or the largest over its pooling window
/// (`pool` > 0: windows of pool x pool, stride pool, on planes of `height` x `width`).
struct DeviceAllowance {
  const float* abs_sums = nullptr;
  double slope = 0.0;
  double intercept = 0.0;
  int pool = 0;
  int height = 0;
  int width = 0;
};

/// As compare_on_device() with each output's own extra allowance, in double precision as
/// the host rule is. Synchronises `stream`.
DeviceComparison compare_with_allowance(const float* got, const float* want, std::int64_t n,
                                        double atol, double rtol, const DeviceAllowance& extra,
                                        cudaStream_t stream);

/// Compares `got` with `want` (n floats each, device memory) element-wise; NaN never passes.
/// Synchronises `stream`.
DeviceComparison compare_on_device(const float* got, const float* want, std::int64_t n,
                                   double atol, double rtol, double extra, cudaStream_t stream);

}  // namespace convlab::grader
