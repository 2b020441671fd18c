/// @file
/// @brief A CUPTI-based profiler for GPU runs, the successor of the course's `nvprof` step
/// (m1.3): it records every kernel, memory copy and set, and CUDA API call between its start
/// and stop, and hands them to report.hpp, which prints nvprof's summary table.
#pragma once

#include <chrono>
#include <vector>

#include "reference/profile/report.hpp"

namespace convlab::profile {

/// What the profiler records beyond kernels, copies, sets and CUDA runtime calls.
struct ProfilerOptions {
  /// Also record CUDA driver calls (cu*) as API rows. Off by default, as nvprof's table showed
  /// the application's calls: the runtime's own driver calls would count the same time twice.
  bool driver_api = false;
  /// Record what CUPTI reports as overhead (its own work, the driver's module loading); shown
  /// below the table, not in it.
  bool overhead = true;
};

/// Records CUDA activity from construction to stop() (or destruction). One at a time per
/// process. Construct it before the CUDA work to be measured, ideally before any.
class Profiler {
 public:
  /// Starts recording; throws Error, saying what to do, when CUPTI cannot trace here (missing
  /// privileges, another profiler attached, an unsupported GPU) or another Profiler is running.
  explicit Profiler(ProfilerOptions options = {});
  /// Stops recording if stop() was not called; never throws.
  ~Profiler();
  Profiler(const Profiler&) = delete;
  Profiler& operator=(const Profiler&) = delete;

  /// Waits for the device to finish, collects every record and stops. Throws CudaError when the
  /// device reports an error, Error when called twice.
  Profile stop();

 private:
  std::vector<int> enabled_kinds_;  // CUpti_ActivityKind values, to disable at stop
  std::chrono::steady_clock::time_point start_;
  bool running_ = false;
};

}  // namespace convlab::profile
