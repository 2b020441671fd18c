// convlab-hostile: staff rename conv_baseline
// Hostile: GPU load from forked processes while the grader might calibrate, gone by the first
// call.
#include <signal.h>
#include <unistd.h>

#include <cstdio>

namespace convlab::student {
namespace {

__global__ void spin(long long cycles) {
  const long long start = clock64();
  while (clock64() - start < cycles) {
  }
}

struct Load {
  pid_t children[4] = {};
  Load() {
    for (pid_t& c : children) {
      c = fork();
      if (c == 0) {
        for (;;) {
          spin<<<1024, 256>>>(20'000'000);
          cudaDeviceSynchronize();
        }
      }
    }
    std::fprintf(stderr, "contention: load started\n");
  }
  void stop() {
    for (pid_t& c : children) {
      if (c > 0) kill(c, SIGKILL);
      c = 0;
    }
  }
} load;

}  // namespace

void conv_baseline(float* y, const float* x, const float* k, const ConvShape& s,
                   cudaStream_t stream) {
  load.stop();
  staff_conv_baseline(y, x, k, s, stream);
}

}  // namespace convlab::student
