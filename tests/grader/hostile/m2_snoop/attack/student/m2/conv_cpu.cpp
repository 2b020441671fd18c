// convlab-hostile: staff rename conv_forward_cpu
// Hostile: looks for anything beyond its own code (the grader, the framework, staff code,
// models, other teams) from inside its process, and says what it found.
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
void more_snooping(const Report&) {}

// convlab-hostile: insert snoop.inc

bool snooped = false;

}  // namespace

void conv_forward_cpu(float* y, const float* x, const float* k, const ConvShape& s) {
  if (!snooped) {
    snooped = true;
    snoop();
  }
  staff_conv_forward_cpu(y, x, k, s);
}

}  // namespace convlab::student
