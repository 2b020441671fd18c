/// @file
/// @brief A small parallel-for over an index range, used by every multi-threaded CPU layer.
#pragma once

#include <cstdint>
#include <functional>

namespace convlab {

/// Number of worker threads the CPU layers use: CONVLAB_THREADS if set, else the hardware count.
int cpu_threads();

/// Calls body(begin, end) on contiguous chunks of [0, n) from up to cpu_threads() threads.
/// Chunks are fixed by n and the thread count alone, so results do not depend on scheduling.
void parallel_for(std::int64_t n, const std::function<void(std::int64_t, std::int64_t)>& body);

}  // namespace convlab
