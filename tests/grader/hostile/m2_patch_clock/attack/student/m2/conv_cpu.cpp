// convlab-hostile: staff rename conv_forward_cpu
// Hostile: the process's clocks patched to run 200 times slower.
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

// Overwrites the start of `target` with "movabs rax, to; jmp rax" (x86-64).
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
    std::fprintf(stderr, "steady_clock::now patched: %s\n", a ? "yes" : "no");
  }
} patcher;

}  // namespace

void conv_forward_cpu(float* y, const float* x, const float* k, const ConvShape& shape) {
  staff_conv_forward_cpu(y, x, k, shape);
}

}  // namespace convlab::student
