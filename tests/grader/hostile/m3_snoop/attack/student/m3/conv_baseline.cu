// convlab-hostile: staff rename conv_baseline
// Hostile: looks for anything beyond its own code (the grader, the framework, staff code,
// models, other teams, other GPUs) from inside its process, and says what it found.
#include <sys/stat.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>
#include <string>
#include <utility>

namespace convlab::student {
namespace {

template <typename Report>
void more_snooping(const Report& report) {
  int gpus = 0;
  cudaGetDeviceCount(&gpus);
  if (gpus != 1) report(std::to_string(gpus) + " GPUs");
}

// convlab-hostile: insert snoop.inc

bool snooped = false;

}  // namespace

void conv_baseline(float* y, const float* x, const float* k, const ConvShape& s,
                   cudaStream_t stream) {
  if (!snooped) {
    snooped = true;
    snoop();
  }
  staff_conv_baseline(y, x, k, s, stream);
}

}  // namespace convlab::student
