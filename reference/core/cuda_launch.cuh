/// @file
/// @brief Launch helpers shared by the GPU kernels (CUDA sources only).
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "reference/core/ceil_div.hpp"
#include "reference/core/cuda_check.hpp"

namespace convlab {

/// Blocks of `threads` for a grid-stride loop over `n` elements: one element per thread where
/// that takes at most `max_blocks` blocks (the loop covers the rest), and at least one block.
inline unsigned grid_stride_blocks(std::int64_t n, int threads, std::int64_t max_blocks) {
  return static_cast<unsigned>(
      std::clamp<std::int64_t>(ceil_div<std::int64_t>(n, threads), 1, max_blocks));
}

/// Lets `kernel` use `bytes` of dynamic shared memory per block. Above the 48 KB every device
/// grants, a kernel must opt in to the device's larger limit; past that limit this throws
/// Error saying that `who` needs more than the device has.
template <typename Kernel>
void allow_dynamic_shared_memory(Kernel* kernel, std::int64_t bytes, const std::string& who) {
  if (bytes <= 48 * 1024) return;
  int device = 0, limit = 0;
  CUDA_CHECK(cudaGetDevice(&device));
  CUDA_CHECK(cudaDeviceGetAttribute(&limit, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  if (bytes > limit) {
    throw Error(who + " needs " + std::to_string(bytes) +
                " bytes of shared memory per block; this device has " + std::to_string(limit));
  }
  CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                  static_cast<int>(bytes)));
}

/// Blocks of `kernel` (`threads` each, `bytes` of dynamic shared memory) that the current device
/// holds at once. The runtime is asked once per kernel, device and size: its queries take
/// microseconds, inside the timed call. The caller allows `bytes` (and sets any carveout) first,
/// before every launch: the kernel's limit is whatever the last launch of another size set.
inline std::int64_t resident_blocks(const void* kernel, int threads, int bytes) {
  struct Known {
    const void* kernel;
    int device, bytes;
    std::int64_t blocks;
  };
  static thread_local std::vector<Known> known;
  int device = 0;
  CUDA_CHECK(cudaGetDevice(&device));
  for (const Known& k : known) {
    if (k.kernel == kernel && k.device == device && k.bytes == bytes) return k.blocks;
  }
  int sms = 0, per_sm = 0;
  CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, threads, bytes));
  known.push_back({kernel, device, bytes, std::int64_t{sms} * std::max(per_sm, 1)});
  return known.back().blocks;
}

/// Calls f(std::integral_constant<int, K>{}) with K = k when 1 <= k <= Max, so a kernel can
/// take the filter size as a template parameter (loops over it unroll), and with K = 0 (meaning
/// "K only known at run time") otherwise.
template <int Max, typename F>
void dispatch_filter_size(int k, F&& f) {
  const bool compiled = [&]<int... Ks>(std::integer_sequence<int, Ks...>) {
    return ((k == Ks + 1 ? (f(std::integral_constant<int, Ks + 1>{}), true) : false) || ...);
  }
  (std::make_integer_sequence<int, Max>{});
  if (!compiled) f(std::integral_constant<int, 0>{});
}

}  // namespace convlab
