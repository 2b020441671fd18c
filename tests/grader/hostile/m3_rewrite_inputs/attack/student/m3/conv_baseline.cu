// convlab-hostile: staff rename conv_baseline
// Hostile: on a request's repeated calls (tensors laid one slot after the previous call's),
// zero this call's input and output instead of computing: conv(0, k) = 0.
#include <cstdint>
#include <cstdio>

namespace convlab::student {
namespace {

struct Seen {
  long long rewritten = 0;
  ~Seen() { std::fprintf(stderr, "rewrite-inputs: rewrote %lld calls\n", rewritten); }
} seen;

// convlab-hostile: insert repeated_call.inc

}  // namespace

void conv_baseline(float* y, const float* x, const float* k, const ConvShape& s,
                   cudaStream_t stream) {
  if (repeated_call(x, y, s)) {
    ++seen.rewritten;
    cudaMemsetAsync(const_cast<float*>(x), 0, s.x_elements() * sizeof(float), stream);
    cudaMemsetAsync(y, 0, s.y_elements() * sizeof(float), stream);
    return;
  }
  staff_conv_baseline(y, x, k, s, stream);
}

}  // namespace convlab::student
