// Collection through the CUPTI Activity API: CUPTI fills buffers we hand it with records of
// kernels, copies, sets and API calls, and returns them full (or at a flush); each record is
// turned into a ProfileRecord at once, so nothing CUPTI owns is kept.
#include "reference/profile/profiler.hpp"

#include <cuda_runtime_api.h>
#include <cupti.h>

#include <atomic>
#include <cstdlib>
#include <mutex>
#include <string>
#include <type_traits>
#include <utility>

#include "reference/core/cuda_check.hpp"
#include "reference/core/error.hpp"

// CUPTI renames a record struct each time it appends fields, and keeps the older names in
// cupti_activity_deprecated.h: kernels were CUpti_ActivityKernel9 up to CUDA 12.9,
// CUpti_ActivityKernel10 in 13.0 and 13.1, CUpti_ActivityKernel11 in 13.2; copies
// CUpti_ActivityMemcpy5 up to 12.6 and CUpti_ActivityMemcpy6 from 12.8; sets
// CUpti_ActivityMemset4; overhead CUpti_ActivityOverhead3 in 13.0. The fields read here (kind,
// start, end, name, copyKind, overheadKind) sit at the same place in every version, but the
// struct to read is the newest one the header in use defines, found below without naming a
// CUDA version: a placeholder of each name lives in this namespace, and a qualified lookup
// (::Name) only falls back to it, through the using-directive, when cupti.h has no such name.
namespace convlab_cupti_placeholder {
struct CUpti_ActivityKernel4;
struct CUpti_ActivityKernel5;
struct CUpti_ActivityKernel6;
struct CUpti_ActivityKernel7;
struct CUpti_ActivityKernel8;
struct CUpti_ActivityKernel9;
struct CUpti_ActivityKernel10;
struct CUpti_ActivityKernel11;
struct CUpti_ActivityKernel12;
struct CUpti_ActivityKernel13;
struct CUpti_ActivityKernel14;
struct CUpti_ActivityKernel15;
struct CUpti_ActivityMemcpy3;
struct CUpti_ActivityMemcpy4;
struct CUpti_ActivityMemcpy5;
struct CUpti_ActivityMemcpy6;
struct CUpti_ActivityMemcpy7;
struct CUpti_ActivityMemcpy8;
struct CUpti_ActivityMemset2;
struct CUpti_ActivityMemset3;
struct CUpti_ActivityMemset4;
struct CUpti_ActivityMemset5;
struct CUpti_ActivityMemset6;
struct CUpti_ActivityOverhead;
struct CUpti_ActivityOverhead2;
struct CUpti_ActivityOverhead3;
struct CUpti_ActivityOverhead4;
struct CUpti_ActivityOverhead5;
}  // namespace convlab_cupti_placeholder
using namespace convlab_cupti_placeholder;  // NOLINT: only for the ::Name lookups below

namespace convlab::profile {

namespace {

// True for a complete type: a struct cupti.h defines, not an (incomplete) placeholder.
template <typename T, typename = void>
constexpr bool kDefined = false;
template <typename T>
constexpr bool kDefined<T, std::void_t<decltype(sizeof(T))>> = true;

// The first defined type of the list (newest first).
template <typename... T>
struct Newest {
  using type = void;
};
template <typename T, typename... Rest>
struct Newest<T, Rest...> {
  using type = std::conditional_t<kDefined<T>, T, typename Newest<Rest...>::type>;
};

using KernelRecord =
    Newest<::CUpti_ActivityKernel15, ::CUpti_ActivityKernel14, ::CUpti_ActivityKernel13,
           ::CUpti_ActivityKernel12, ::CUpti_ActivityKernel11, ::CUpti_ActivityKernel10,
           ::CUpti_ActivityKernel9, ::CUpti_ActivityKernel8, ::CUpti_ActivityKernel7,
           ::CUpti_ActivityKernel6, ::CUpti_ActivityKernel5, ::CUpti_ActivityKernel4>::type;
using MemcpyRecord =
    Newest<::CUpti_ActivityMemcpy8, ::CUpti_ActivityMemcpy7, ::CUpti_ActivityMemcpy6,
           ::CUpti_ActivityMemcpy5, ::CUpti_ActivityMemcpy4, ::CUpti_ActivityMemcpy3>::type;
using MemsetRecord =
    Newest<::CUpti_ActivityMemset6, ::CUpti_ActivityMemset5, ::CUpti_ActivityMemset4,
           ::CUpti_ActivityMemset3, ::CUpti_ActivityMemset2>::type;
using OverheadRecord =
    Newest<::CUpti_ActivityOverhead5, ::CUpti_ActivityOverhead4, ::CUpti_ActivityOverhead3,
           ::CUpti_ActivityOverhead2, ::CUpti_ActivityOverhead>::type;
static_assert(!std::is_void_v<KernelRecord> && !std::is_void_v<MemcpyRecord> &&
                  !std::is_void_v<MemsetRecord> && !std::is_void_v<OverheadRecord>,
              "cupti.h defines none of the record structs this profiler knows: update the lists");

// CopyKind mirrors CUpti_ActivityMemcpyKind so that report.hpp builds without CUDA.
static_assert(static_cast<int>(CopyKind::htod) == CUPTI_ACTIVITY_MEMCPY_KIND_HTOD &&
              static_cast<int>(CopyKind::dtoh) == CUPTI_ACTIVITY_MEMCPY_KIND_DTOH &&
              static_cast<int>(CopyKind::htoa) == CUPTI_ACTIVITY_MEMCPY_KIND_HTOA &&
              static_cast<int>(CopyKind::atoh) == CUPTI_ACTIVITY_MEMCPY_KIND_ATOH &&
              static_cast<int>(CopyKind::atoa) == CUPTI_ACTIVITY_MEMCPY_KIND_ATOA &&
              static_cast<int>(CopyKind::atod) == CUPTI_ACTIVITY_MEMCPY_KIND_ATOD &&
              static_cast<int>(CopyKind::dtoa) == CUPTI_ACTIVITY_MEMCPY_KIND_DTOA &&
              static_cast<int>(CopyKind::dtod) == CUPTI_ACTIVITY_MEMCPY_KIND_DTOD &&
              static_cast<int>(CopyKind::htoh) == CUPTI_ACTIVITY_MEMCPY_KIND_HTOH &&
              static_cast<int>(CopyKind::ptop) == CUPTI_ACTIVITY_MEMCPY_KIND_PTOP);

// CUPTI calls the buffer callbacks from its own threads; they fill this one collection.
struct Collection {
  std::mutex mutex;
  bool active = false;  // records arriving while no Profiler runs are thrown away
  std::vector<ProfileRecord> records;
  std::uint64_t lost = 0;
};

Collection& collection() {
  static Collection c;
  return c;
}

std::atomic<bool> profiler_running{false};

// Large enough that a whole `convlab run` fits in a few buffers.
constexpr std::size_t kBufferBytes = 8u << 20;

void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  // CUPTI needs ACTIVITY_RECORD_ALIGNMENT; without a buffer it drops records (counted at stop).
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(ACTIVITY_RECORD_ALIGNMENT, kBufferBytes));
  *size = *buffer != nullptr ? kBufferBytes : 0;
  *max_records = 0;  // as many as fit
}

std::string callback_name(CUpti_CallbackDomain domain, CUpti_CallbackId cbid) {
  const char* name = nullptr;
  if (cuptiGetCallbackName(domain, cbid, &name) != CUPTI_SUCCESS || name == nullptr) {
    return (domain == CUPTI_CB_DOMAIN_DRIVER_API ? "driver call " : "runtime call ") +
           std::to_string(cbid);
  }
  return api_name(name);
}

// Numbered as CUpti_ActivityOverheadKind; the later kinds are written as numbers because older
// headers do not name them.
std::string overhead_name(CUpti_ActivityOverheadKind kind) {
  switch (static_cast<std::uint32_t>(kind)) {
    case CUPTI_ACTIVITY_OVERHEAD_DRIVER_COMPILER:
      return "[driver JIT compiler]";
    case CUPTI_ACTIVITY_OVERHEAD_CUPTI_BUFFER_FLUSH:
      return "[CUPTI buffer flush]";
    case CUPTI_ACTIVITY_OVERHEAD_CUPTI_INSTRUMENTATION:
      return "[CUPTI instrumentation]";
    case CUPTI_ACTIVITY_OVERHEAD_CUPTI_RESOURCE:
      return "[CUPTI resource]";
    case 4u << 16:
      return "[module loading]";
    case 5u << 16:
      return "[lazy function loading]";
    case 6u << 16:
      return "[command buffer full]";
    case 7u << 16:
      return "[activity buffer request]";
    case 8u << 16:
      return "[unified memory tracing setup]";
    default:
      return "[other overhead]";
  }
}

// Appends the record's row, or counts it as lost when CUPTI could not time it (a kernel
// record may carry zero timestamps when the device ran out of record memory).
void add(std::vector<ProfileRecord>& out, std::uint64_t& lost, Section section, std::string name,
         std::uint64_t start, std::uint64_t end) {
  if (start == 0 || end < start) {
    ++lost;
    return;
  }
  out.push_back({section, std::move(name), end - start});
}

void parse(const CUpti_Activity* record, std::vector<ProfileRecord>& out, std::uint64_t& lost) {
  switch (record->kind) {
    case CUPTI_ACTIVITY_KIND_KERNEL:
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: {
      const auto* k = reinterpret_cast<const KernelRecord*>(record);
      const char* name = k->name;
      add(out, lost, Section::gpu_activities, demangle(name != nullptr ? name : "(unnamed kernel)"),
          k->start, k->end);
      break;
    }
    case CUPTI_ACTIVITY_KIND_MEMCPY: {
      const auto* m = reinterpret_cast<const MemcpyRecord*>(record);
      add(out, lost, Section::gpu_activities, memcpy_name(static_cast<CopyKind>(m->copyKind)),
          m->start, m->end);
      break;
    }
    case CUPTI_ACTIVITY_KIND_MEMSET: {
      const auto* m = reinterpret_cast<const MemsetRecord*>(record);
      add(out, lost, Section::gpu_activities, std::string(kMemsetName), m->start, m->end);
      break;
    }
    case CUPTI_ACTIVITY_KIND_RUNTIME:
    case CUPTI_ACTIVITY_KIND_DRIVER: {
      const auto* a = reinterpret_cast<const CUpti_ActivityAPI*>(record);
      const CUpti_CallbackDomain domain = record->kind == CUPTI_ACTIVITY_KIND_RUNTIME
                                              ? CUPTI_CB_DOMAIN_RUNTIME_API
                                              : CUPTI_CB_DOMAIN_DRIVER_API;
      add(out, lost, Section::api_calls, callback_name(domain, a->cbid), a->start, a->end);
      break;
    }
    case CUPTI_ACTIVITY_KIND_OVERHEAD: {
      const auto* o = reinterpret_cast<const OverheadRecord*>(record);
      add(out, lost, Section::overhead, overhead_name(o->overheadKind), o->start, o->end);
      break;
    }
    default:
      break;
  }
}

void CUPTIAPI buffer_completed(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid_size) {
  std::vector<ProfileRecord> parsed;
  std::uint64_t lost = 0;
  try {
    CUpti_Activity* record = nullptr;
    while (cuptiActivityGetNextRecord(buffer, valid_size, &record) == CUPTI_SUCCESS) {
      parse(record, parsed, lost);
    }
  } catch (...) {
    ++lost;  // out of memory while copying names: an exception must not cross into CUPTI
  }
  std::free(buffer);
  Collection& c = collection();
  const std::lock_guard<std::mutex> lock(c.mutex);
  if (!c.active) return;
  c.records.insert(c.records.end(), std::make_move_iterator(parsed.begin()),
                   std::make_move_iterator(parsed.end()));
  c.lost += lost;
}

// Throws Error for a failed CUPTI call, with what the user can do about the common causes.
void cupti_check(CUptiResult status, const char* call) {
  if (status == CUPTI_SUCCESS) return;
  const char* name = nullptr;
  if (cuptiGetResultString(status, &name) != CUPTI_SUCCESS || name == nullptr) name = "?";
  std::string message = std::string("the profiler (--profile) failed: ") + call + " returned " +
                        name + " (" + std::to_string(static_cast<int>(status)) + "). ";
  switch (status) {
    case CUPTI_ERROR_INSUFFICIENT_PRIVILEGES:
    case CUPTI_ERROR_VIRTUALIZED_DEVICE_INSUFFICIENT_PRIVILEGES:
      message +=
          "Profiling this GPU needs more privileges: run convlab as root, or have an "
          "administrator allow profiling for every user (the nvidia kernel module option "
          "NVreg_RestrictProfilingToAdminUsers=0, then reload the module or reboot; see "
          "https://developer.nvidia.com/ERR_NVGPUCTRPERM).";
      break;
    case CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED:
      message +=
          "Another profiler (Nsight Systems, Nsight Compute or compute-sanitizer) is attached to "
          "this process: run convlab with --profile on its own, or without --profile under that "
          "tool.";
      break;
    case CUPTI_ERROR_NOT_INITIALIZED:
    case CUPTI_ERROR_NOT_COMPATIBLE:
    case CUPTI_ERROR_NOT_SUPPORTED:
    case CUPTI_ERROR_VIRTUALIZED_DEVICE_NOT_SUPPORTED:
      message +=
          "CUPTI cannot trace this GPU or driver: check that the driver is at least as new as "
          "the CUDA toolkit convlab was built with (nvidia-smi shows it) and that the GPU is not a "
          "virtual or MIG slice; otherwise run without --profile, or profile with Nsight Systems "
          "(nsys profile --stats=true).";
      break;
    default:
      message +=
          "Run without --profile, or profile with Nsight Systems (nsys profile --stats=true).";
      break;
  }
  throw Error(message);
}

}  // namespace

Profiler::Profiler(ProfilerOptions options) {
  bool expected = false;
  if (!profiler_running.compare_exchange_strong(expected, true)) {
    throw Error("a profiler is already running in this process; stop it before starting another");
  }
  {
    Collection& c = collection();
    const std::lock_guard<std::mutex> lock(c.mutex);
    c.records.clear();
    c.lost = 0;
    c.active = true;
  }
  try {
    // The callbacks are the same for every Profiler: register them once per process.
    static const CUptiResult registered =
        cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed);
    cupti_check(registered, "cuptiActivityRegisterCallbacks");
    // CONCURRENT_KERNEL, unlike KERNEL, does not serialise the kernels it records.
    std::vector<CUpti_ActivityKind> kinds{CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL,
                                          CUPTI_ACTIVITY_KIND_MEMCPY, CUPTI_ACTIVITY_KIND_MEMSET,
                                          CUPTI_ACTIVITY_KIND_RUNTIME};
    if (options.driver_api) kinds.push_back(CUPTI_ACTIVITY_KIND_DRIVER);
    if (options.overhead) kinds.push_back(CUPTI_ACTIVITY_KIND_OVERHEAD);
    for (CUpti_ActivityKind kind : kinds) {
      cupti_check(cuptiActivityEnable(kind), "cuptiActivityEnable");
      enabled_kinds_.push_back(static_cast<int>(kind));
    }
  } catch (...) {
    for (int kind : enabled_kinds_) cuptiActivityDisable(static_cast<CUpti_ActivityKind>(kind));
    {
      Collection& c = collection();
      const std::lock_guard<std::mutex> lock(c.mutex);
      c.active = false;
    }
    profiler_running = false;
    throw;
  }
  start_ = std::chrono::steady_clock::now();
  running_ = true;
}

Profiler::~Profiler() {
  if (!running_) return;
  try {
    stop();
  } catch (...) {
    // A destructor reports nothing; stop() has released CUPTI before throwing.
  }
}

Profile Profiler::stop() {
  if (!running_) throw Error("the profiler was already stopped");
  running_ = false;
  // API recording stops first, so that the synchronisation below is not counted as the run's.
  const auto is_api = [](int kind) {
    return kind == CUPTI_ACTIVITY_KIND_RUNTIME || kind == CUPTI_ACTIVITY_KIND_DRIVER;
  };
  for (int kind : enabled_kinds_) {
    if (is_api(kind)) cuptiActivityDisable(static_cast<CUpti_ActivityKind>(kind));
  }
  // Work still queued on the device would be missing from the flush.
  const cudaError_t synced = cudaDeviceSynchronize();
  const auto wall = std::chrono::steady_clock::now() - start_;
  const CUptiResult flushed = cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  for (int kind : enabled_kinds_) {
    if (!is_api(kind)) cuptiActivityDisable(static_cast<CUpti_ActivityKind>(kind));
  }
  enabled_kinds_.clear();
  size_t dropped = 0;
  if (cuptiActivityGetNumDroppedRecords(nullptr, 0, &dropped) != CUPTI_SUCCESS) dropped = 0;

  Profile profile;
  {
    Collection& c = collection();
    const std::lock_guard<std::mutex> lock(c.mutex);
    profile.records = std::move(c.records);
    c.records.clear();
    profile.dropped_records = c.lost + dropped;
    c.active = false;
  }
  profiler_running = false;
  profile.wall_ns = static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(wall).count());
  cuda_check(synced, "cudaDeviceSynchronize (profiler stop)", __FILE__, __LINE__);
  cupti_check(flushed, "cuptiActivityFlushAll");
  return profile;
}

}  // namespace convlab::profile
