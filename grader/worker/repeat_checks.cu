#include "grader/worker/repeat_checks.hpp"

#include <climits>
#include <cstring>

#include "reference/core/cuda_check.hpp"
#include "reference/core/cuda_launch.cuh"

namespace convlab::grader {
namespace {

constexpr int kThreads = 256;
constexpr std::int64_t kMaxBlocks = 4096;

unsigned blocks_for(std::int64_t n) {
  return grid_stride_blocks(n, kThreads, kMaxBlocks);
}

// SplitMix64: a good 64-bit hash, so neighbouring elements get unrelated factors.
__device__ std::uint64_t mix(std::uint64_t z) {
  z += 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

__global__ void perturb_kernel(float* __restrict__ out, const float* __restrict__ x, std::int64_t n,
                               std::uint64_t seed, float eps) {
  const std::int64_t step = std::int64_t{gridDim.x} * blockDim.x;
  for (std::int64_t j = std::int64_t{blockIdx.x} * blockDim.x + threadIdx.x; j < n; j += step) {
    // 24 random bits -> u in [-1, 1).
    const float u =
        static_cast<float>(mix(seed ^ static_cast<std::uint64_t>(j)) >> 40) * (1.0f / 8388608.0f) -
        1.0f;
    out[j] = x[j] * (1.0f + eps * u);
  }
}

// counters: [0] mismatches, [1] first mismatch (LLONG_MAX for none), [2] bits of the worst
// finite error (non-negative floats order as their bit patterns).
__global__ void compare_kernel(const float* __restrict__ got, const float* __restrict__ want,
                               std::int64_t n, float atol, float rtol, float extra,
                               unsigned long long* counters) {
  unsigned long long bad = 0, first = LLONG_MAX;
  float worst = 0.0f;
  const std::int64_t step = std::int64_t{gridDim.x} * blockDim.x;
  for (std::int64_t j = std::int64_t{blockIdx.x} * blockDim.x + threadIdx.x; j < n; j += step) {
    const float g = got[j], w = want[j];
    const float err = fabsf(g - w);
    const bool ok = isfinite(g) && err <= atol + rtol * fabsf(w) + extra;
    if (isfinite(err)) worst = fmaxf(worst, err);
    if (!ok) {
      ++bad;
      first = min(first, static_cast<unsigned long long>(j));
    }
  }
  if (bad > 0) {
    atomicAdd(&counters[0], bad);
    atomicMin(&counters[1], first);
  }
  atomicMax(&counters[2], static_cast<unsigned long long>(__float_as_uint(worst)));
}

// counters: [0] mismatches, [1] first mismatch (LLONG_MAX for none), [2] bits of the worst
// finite error, [3] bits of the largest allowance (non-negative doubles order as their bits).
__global__ void compare_allowance_kernel(const float* __restrict__ got,
                                         const float* __restrict__ want, std::int64_t n,
                                         double atol, double rtol, DeviceAllowance a,
                                         unsigned long long* counters) {
  unsigned long long bad = 0, first = LLONG_MAX;
  double worst = 0.0, largest = 0.0;
  const int pooled_w = a.pool > 0 ? (a.width - a.pool) / a.pool + 1 : 0;
  const int pooled_h = a.pool > 0 ? (a.height - a.pool) / a.pool + 1 : 0;
  const std::int64_t step = std::int64_t{gridDim.x} * blockDim.x;
  for (std::int64_t j = std::int64_t{blockIdx.x} * blockDim.x + threadIdx.x; j < n; j += step) {
    double sum;
    if (a.pool == 0) {
      sum = a.abs_sums[j];
    } else {
      const std::int64_t plane = j / (std::int64_t{pooled_h} * pooled_w);
      const int h = static_cast<int>(j / pooled_w % pooled_h), w = static_cast<int>(j % pooled_w);
      const float* in = a.abs_sums + plane * a.height * a.width;
      float best = 0.0f;
      for (int p = 0; p < a.pool; ++p) {
        for (int q = 0; q < a.pool; ++q) {
          best = fmaxf(best, in[(h * a.pool + p) * a.width + w * a.pool + q]);
        }
      }
      sum = best;
    }
    const double allowed = a.slope * sum + a.intercept;
    largest = fmax(largest, allowed);
    const double g = got[j], wv = want[j];
    const double err = isfinite(g) ? fabs(g - wv) : INFINITY;
    if (isfinite(err)) worst = fmax(worst, err);
    if (!(err <= atol + rtol * fabs(wv) + allowed)) {
      ++bad;
      first = min(first, static_cast<unsigned long long>(j));
    }
  }
  if (bad > 0) {
    atomicAdd(&counters[0], bad);
    atomicMin(&counters[1], first);
  }
  atomicMax(&counters[2], static_cast<unsigned long long>(__double_as_longlong(worst)));
  atomicMax(&counters[3], static_cast<unsigned long long>(__double_as_longlong(largest)));
}

}  // namespace

void perturb_input(float* out, const float* x, std::int64_t n, std::uint64_t seed, float eps,
                   cudaStream_t stream) {
  perturb_kernel<<<blocks_for(n), kThreads, 0, stream>>>(out, x, n, seed, eps);
  CUDA_CHECK_LAUNCH();
}

DeviceComparison compare_on_device(const float* got, const float* want, std::int64_t n, double atol,
                                   double rtol, double extra, cudaStream_t stream) {
  unsigned long long* counters = nullptr;
  CUDA_CHECK(cudaMallocAsync(reinterpret_cast<void**>(&counters), 3 * sizeof *counters, stream));
  const unsigned long long init[3] = {0, LLONG_MAX, 0};
  CUDA_CHECK(cudaMemcpyAsync(counters, init, sizeof init, cudaMemcpyHostToDevice, stream));
  compare_kernel<<<blocks_for(n), kThreads, 0, stream>>>(got, want, n, static_cast<float>(atol),
                                                         static_cast<float>(rtol),
                                                         static_cast<float>(extra), counters);
  CUDA_CHECK_LAUNCH();
  unsigned long long out[3];
  CUDA_CHECK(cudaMemcpyAsync(out, counters, sizeof out, cudaMemcpyDeviceToHost, stream));
  CUDA_CHECK(cudaFreeAsync(counters, stream));
  CUDA_CHECK(cudaStreamSynchronize(stream));
  DeviceComparison c;
  c.mismatches = static_cast<std::int64_t>(out[0]);
  c.first = out[0] > 0 ? static_cast<std::int64_t>(out[1]) : -1;
  const auto bits = static_cast<unsigned>(out[2]);
  float worst;
  static_assert(sizeof worst == sizeof bits);
  std::memcpy(&worst, &bits, sizeof worst);
  c.worst_error = worst;
  return c;
}

}  // namespace convlab::grader

namespace convlab::grader {

DeviceComparison compare_with_allowance(const float* got, const float* want, std::int64_t n,
                                        double atol, double rtol, const DeviceAllowance& extra,
                                        cudaStream_t stream) {
  unsigned long long* counters = nullptr;
  CUDA_CHECK(cudaMallocAsync(reinterpret_cast<void**>(&counters), 4 * sizeof *counters, stream));
  const unsigned long long init[4] = {0, LLONG_MAX, 0, 0};
  CUDA_CHECK(cudaMemcpyAsync(counters, init, sizeof init, cudaMemcpyHostToDevice, stream));
  compare_allowance_kernel<<<blocks_for(n), kThreads, 0, stream>>>(got, want, n, atol, rtol,
                                                                   extra, counters);
  CUDA_CHECK_LAUNCH();
  unsigned long long out[4];
  CUDA_CHECK(cudaMemcpyAsync(out, counters, sizeof out, cudaMemcpyDeviceToHost, stream));
  CUDA_CHECK(cudaFreeAsync(counters, stream));
  CUDA_CHECK(cudaStreamSynchronize(stream));
  DeviceComparison c;
  c.mismatches = static_cast<std::int64_t>(out[0]);
  c.first = out[0] > 0 ? static_cast<std::int64_t>(out[1]) : -1;
  static_assert(sizeof(double) == sizeof out[2]);
  std::memcpy(&c.worst_error, &out[2], sizeof(double));
  std::memcpy(&c.largest_allowance, &out[3], sizeof(double));
  return c;
}

}  // namespace convlab::grader
