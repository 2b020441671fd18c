// The best kernel's shared host code: the device's SMs, pooled workspaces, the sum of a split
// sum's parts, and whether the build has the sm_90a kernels.
#include <cuda_runtime_api.h>

#include <cstdint>
#include <utility>
#include <vector>

#include "reference/core/cuda_check.hpp"
#include "reference/core/cuda_launch.cuh"
#include "shared.cuh"

namespace convlab::solution::best {
namespace {

// True in the device code of an sm_90a build (the only one with wgmma).
__device__ bool g_best_wgmma_built =
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    true;
#else
    false;
#endif

// y = the sum of `parts` partial outputs of n floats each, `stride` floats apart, in order (the
// same result every call).
__global__ void conv_best_sum_parts_kernel(float* __restrict__ y, const float* __restrict__ parts,
                                           int count, std::int64_t n, std::int64_t stride) {
  for (std::int64_t i = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x; i < n;
       i += std::int64_t{gridDim.x} * blockDim.x) {
    float sum = parts[i];
    for (int p = 1; p < count; ++p) sum += parts[p * stride + i];
    y[i] = sum;
  }
}

}  // namespace

int multiprocessor_count() {
  int device = 0, sms = 0;
  CUDA_CHECK(cudaGetDevice(&device));
  CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  return sms;
}

void* pool_workspace(std::size_t bytes, cudaStream_t stream) {
  int device = 0;
  cudaMemPool_t pool = nullptr;
  std::uint64_t keep = UINT64_MAX;
  void* workspace = nullptr;
  if (cudaGetDevice(&device) != cudaSuccess ||
      cudaDeviceGetDefaultMemPool(&pool, device) != cudaSuccess ||
      cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep) != cudaSuccess ||
      cudaMallocAsync(&workspace, bytes, stream) != cudaSuccess) {
    (void)cudaGetLastError();
    return nullptr;
  }
  return workspace;
}

void sum_parts(float* y, const float* partial, int parts, std::int64_t n, std::int64_t stride,
               cudaStream_t stream) {
  conv_best_sum_parts_kernel<<<grid_stride_blocks(n, 256, 4 * multiprocessor_count()), 256, 0,
                               stream>>>(y, partial, parts, n, stride);
  CUDA_CHECK_LAUNCH();
}

int channel_parts(int C, int K, std::int64_t blocks, int blocks_per_sm) {
  const std::int64_t room = std::int64_t{blocks_per_sm} * multiprocessor_count();
  if (blocks <= 0 || 2 * blocks > room) return 1;
  const int by_grid = static_cast<int>(ceil_div<std::int64_t>(room, blocks));
  const int by_sum = C * K * K / kSplitMinTerms;
  return std::max(1, std::min({by_grid, by_sum, C, kSplitMaxParts}));
}

bool wgmma_built() {
  static thread_local std::vector<std::pair<int, bool>> known;
  int device = 0;
  CUDA_CHECK(cudaGetDevice(&device));
  for (const auto& [d, built] : known) {
    if (d == device) return built;
  }
  int major = 0, minor = 0;
  CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device));
  bool built = false;
  if (major == 9 && minor == 0) {
    CUDA_CHECK(cudaMemcpyFromSymbol(&built, g_best_wgmma_built, sizeof built));
  }
  known.emplace_back(device, built);
  return built;
}

}  // namespace convlab::solution::best
