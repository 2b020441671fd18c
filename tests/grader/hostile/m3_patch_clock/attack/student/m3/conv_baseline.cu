// convlab-hostile: staff rename conv_baseline
// Hostile: the process's clocks patched (steady_clock::now and cudaEventElapsedTime).
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>

namespace convlab::student {
namespace {

std::int64_t slow_now() {
  timespec ts;
  ::syscall(228 /* clock_gettime */, CLOCK_MONOTONIC, &ts);
  return (std::int64_t{ts.tv_sec} * 1000000000 + ts.tv_nsec) / 200;
}

cudaError_t tiny_elapsed(float* ms, cudaEvent_t, cudaEvent_t) {
  *ms = 0.001f;
  return cudaSuccess;
}

bool redirect(void* target, void* to) {
#if defined(__x86_64__)
  const long page = ::sysconf(_SC_PAGESIZE);
  auto* start = reinterpret_cast<unsigned char*>(reinterpret_cast<std::uintptr_t>(target) &
                                                 ~static_cast<std::uintptr_t>(page - 1));
  if (::mprotect(start, 2 * page, PROT_READ | PROT_WRITE | PROT_EXEC) != 0) return false;
  unsigned char code[12] = {0x48, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xe0};
  std::memcpy(code + 2, &to, sizeof to);
  std::memcpy(target, code, sizeof code);
  return true;
#else
  (void)target;
  (void)to;
  return false;
#endif
}

struct Patcher {
  Patcher() {
    using Now = std::chrono::steady_clock::time_point (*)();
    Now now = &std::chrono::steady_clock::now;
    const bool a = redirect(reinterpret_cast<void*>(now), reinterpret_cast<void*>(&slow_now));
    const bool b = redirect(reinterpret_cast<void*>(&cudaEventElapsedTime),
                            reinterpret_cast<void*>(&tiny_elapsed));
    std::fprintf(stderr, "clocks patched: %s %s\n", a ? "yes" : "no", b ? "yes" : "no");
  }
} patcher;

}  // namespace

void conv_baseline(float* y, const float* x, const float* k, const ConvShape& shape,
                   cudaStream_t stream) {
  staff_conv_baseline(y, x, k, shape, stream);
}

}  // namespace convlab::student
