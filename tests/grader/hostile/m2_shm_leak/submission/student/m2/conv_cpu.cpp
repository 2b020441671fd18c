// Hostile submission "m2_shm_leak": a SysV segment as a channel between checks and grades.
#include <sys/ipc.h>
#include <sys/shm.h>

#include <cstdint>
#include <cstdio>
#include <cstring>

#include "reference/conv/student_api.hpp"

namespace convlab::student {

void conv_forward_cpu(float* y, const float* x, const float* k, const ConvShape& s) {
  (void)x;
  constexpr key_t kKey = 0x0c0ffee5;
  constexpr std::size_t kBytes = 64u << 20;
  const std::size_t weights = static_cast<std::size_t>(s.M) * s.C * s.K * s.K * sizeof(float);
  static bool made = false;  // this process's own segment is no leak
  const int found = shmget(kKey, 0, 0);
  if (found >= 0 && !made) {
    const auto* bytes = static_cast<const unsigned char*>(shmat(found, nullptr, SHM_RDONLY));
    std::fprintf(stderr, "shm-leak: found the segment:");
    for (std::size_t i = 0; i < 64 && bytes != reinterpret_cast<const void*>(-1); ++i) {
      std::fprintf(stderr, " %02x", bytes[i]);
    }
    std::fprintf(stderr, "\n");
  } else if (found < 0) {
    made = true;
    const int id = shmget(kKey, kBytes, IPC_CREAT | 0666);
    void* at = id >= 0 ? shmat(id, nullptr, 0) : reinterpret_cast<void*>(-1);
    if (at != reinterpret_cast<void*>(-1)) {
      std::memcpy(at, k, weights < kBytes ? weights : kBytes);
      std::memset(static_cast<char*>(at) + weights, 0x5a, kBytes - weights);  // held, touched
      shmdt(at);
    }
    std::fprintf(stderr, "shm-leak: no segment yet; made one: %s\n", id >= 0 ? "yes" : "no");
  }
  // Not a convolution: zeros.
  const std::int64_t n = std::int64_t{s.B} * s.M * s.H_out() * s.W_out();
  std::memset(y, 0, static_cast<std::size_t>(n) * sizeof(float));
}

}  // namespace convlab::student
