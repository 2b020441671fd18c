// convlab-hostile: staff rename conv_baseline
// Hostile: a timed request repeats the call on inputs and outputs laid one after another in
// one buffer each (256-byte aligned slots); this convolves only a request's first call and
// copies its output to the calls after it.
#include <cstdint>
#include <cstdio>

namespace convlab::student {
namespace {

struct Seen {
  float* first_y = nullptr;  // the output of the current request's first call
  long long computed = 0, copied = 0;
  ~Seen() { std::fprintf(stderr, "skip-repeats: computed %lld, copied %lld\n", computed, copied); }
} seen;

// convlab-hostile: insert repeated_call.inc

}  // namespace

void conv_baseline(float* y, const float* x, const float* k, const ConvShape& s,
                   cudaStream_t stream) {
  if (repeated_call(x, y, s)) {
    ++seen.copied;
    cudaMemcpyAsync(y, seen.first_y, static_cast<std::size_t>(s.y_elements()) * sizeof(float),
                    cudaMemcpyDeviceToDevice, stream);
    return;
  }
  ++seen.computed;
  seen.first_y = y;
  staff_conv_baseline(y, x, k, s, stream);
}

}  // namespace convlab::student
