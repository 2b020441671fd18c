/// @file
/// @brief The referee's GPU fence: how it learns that the team's work on the device is over.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace convlab::grader {

/// Queues, on `stream`, a one-thread kernel, then records `after_fence`, then a kernel that
/// copies `count` floats from `src` to `dst`, with nothing in between. Kernels of two
/// processes never run at once on a GPU (they take turns), so when `after_fence` completes the
/// work the team's process queued before its "done" has either finished or been set aside, and
/// the copy that follows in the same turn then sees its output as it was: a team that answers
/// before its kernels finish is timed to the fence or caught with unwritten (NaN) outputs.
void queue_fence_and_snapshot(float* dst, const float* src, std::int64_t count,
                              cudaEvent_t after_fence, cudaStream_t stream);

}  // namespace convlab::grader
