/// @file
/// @brief The Op Time clock: a steady clock around a call, with a synchronisation hook.
#pragma once

#include <chrono>
#include <utility>

namespace convlab {

/// Times `call` on the steady clock, running `sync` (device synchronisation on the GPU,
/// nothing on the CPU) right before starting and right before stopping the clock, so work
/// queued earlier is not counted and work the call queued is.
template <typename Sync, typename Call>
double time_call(Sync&& sync, Call&& call) {
  sync();
  const auto start = std::chrono::steady_clock::now();
  std::forward<Call>(call)();
  sync();
  const auto stop = std::chrono::steady_clock::now();
  return std::chrono::duration<double>(stop - start).count();
}

}  // namespace convlab
