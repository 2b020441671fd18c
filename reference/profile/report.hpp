/// @file
/// @brief The profile summary in nvprof's table shape: timed records in, aggregated rows and the
/// printed table (or JSON) out. Pure host code, so it builds and is tested without CUDA; the
/// records come from the CUPTI collector in profiler.hpp.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

namespace convlab::profile {

/// Where a record is shown: nvprof's two sections, plus CUPTI's overhead records.
enum class Section {
  gpu_activities,  ///< kernels, memory copies and sets, timed on the GPU
  api_calls,       ///< CUDA runtime (and, optionally, driver) calls, timed on the host
  overhead,  ///< time CUPTI reports as overhead (its own work, module loading); not in the table
};

/// One timed event.
struct ProfileRecord {
  Section section = Section::gpu_activities;  ///< the table section it belongs to
  /// Row name: a demangled kernel name, "[CUDA memcpy HtoD]", "cudaMemcpy" ...
  std::string name;
  std::uint64_t duration_ns = 0;  ///< end - start
};

/// Everything one profiling session recorded.
struct Profile {
  std::vector<ProfileRecord> records;  ///< in no particular order
  std::uint64_t wall_ns = 0;           ///< from the profiler's start to its stop, host clock
  /// Records lost because the collector had no buffer space, or delivered without timestamps;
  /// when non-zero the table undercounts.
  std::uint64_t dropped_records = 0;
};

/// One row of the table: every record of one section with one name.
struct ProfileRow {
  std::string name;            ///< as in ProfileRecord
  std::uint64_t calls = 0;     ///< how many records
  std::uint64_t total_ns = 0;  ///< their summed duration ("Time")
  std::uint64_t min_ns = 0;    ///< the shortest
  std::uint64_t max_ns = 0;    ///< the longest
  double avg_ns = 0.0;         ///< total_ns / calls
  double percent = 0.0;        ///< share of its section's total time; a section's rows sum to 100
};

/// The aggregated profile: each section's rows, longest total time first (ties by name).
struct ProfileSummary {
  std::vector<ProfileRow> gpu_activities;  ///< kernels, copies and sets
  std::vector<ProfileRow> api_calls;       ///< CUDA calls on the host
  std::vector<ProfileRow> overhead;        ///< CUPTI's overhead records, by kind
  std::uint64_t wall_ns = 0;               ///< as in Profile
  std::uint64_t dropped_records = 0;       ///< as in Profile
};

/// Groups the records by (section, name) and sorts each section by total time.
ProfileSummary summarize(const Profile& profile);

/// A duration as nvprof printed it: whole nanoseconds below 1 us ("608ns"), else five
/// significant digits in us or ms ("3.5840us", "21.377us", "132.17ms") and six in seconds
/// ("7.55369s", "19.0477s").
std::string format_duration(double ns);

/// A share as nvprof printed it: "70.57%".
std::string format_percent(double percent);

/// The nvprof table: "==PID== Profiling application: ...", "==PID== Profiling result:", the
/// header (Type, Time(%), Time, Calls, Avg, Min, Max, Name), the "GPU activities:" rows, the
/// "API calls:" rows; then warnings (dropped records) and the profiler's overhead, if any.
/// `application` may be empty (its line is then left out).
std::string format_summary(const ProfileSummary& summary, long pid, std::string_view application);

/// The same figures as JSON: {"pid", "application", "wall_time_s", "dropped_records",
/// "gpu_activities": [rows], "api_calls": [rows], "overhead": [rows]}, each row
/// {"name", "calls", "time_s", "percent", "avg_s", "min_s", "max_s"}.
nlohmann::json summary_json(const ProfileSummary& summary, long pid, std::string_view application);

/// A kernel's readable name: demangles an Itanium C++ ABI name ("_Z..."); any other name (an
/// extern "C" kernel, a library's plain name) is returned unchanged.
std::string demangle(std::string_view name);

/// An API callback name without CUPTI's version suffix: "cudaLaunchKernel_v7000" becomes
/// "cudaLaunchKernel", as nvprof showed it; "cudaMemcpyAsync_ptsz_v7000" keeps "_ptsz".
std::string api_name(std::string_view callback_name);

/// The directions of a memory copy, numbered as CUPTI's CUpti_ActivityMemcpyKind.
enum class CopyKind {
  unknown = 0,  ///< a direction CUPTI did not name
  htod = 1,     ///< host to device
  dtoh = 2,     ///< device to host
  htoa = 3,     ///< host to a CUDA array
  atoh = 4,     ///< CUDA array to host
  atoa = 5,     ///< CUDA array to CUDA array
  atod = 6,     ///< CUDA array to device
  dtoa = 7,     ///< device to CUDA array
  dtod = 8,     ///< device to device, one device
  htoh = 9,     ///< host to host
  ptop = 10,    ///< peer to peer, between devices
};

/// nvprof's row name of a copy: "[CUDA memcpy HtoD]" ...
std::string memcpy_name(CopyKind kind);

/// nvprof's row name of a memory set.
inline constexpr std::string_view kMemsetName = "[CUDA memset]";

}  // namespace convlab::profile
