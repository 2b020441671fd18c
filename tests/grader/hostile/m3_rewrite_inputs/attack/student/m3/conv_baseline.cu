// convlab-hostile: staff rename conv_baseline
// Hostile: on a request's repeated calls (tensors laid one slot after the previous call's),
// zero this call's input and output instead of computing: conv(0, k) = 0.
#include <cstdint>
#include <cstdio>

namespace convlab::student {
namespace {

struct Seen {
  const float* last_x = nullptr;
  float* last_y = nullptr;
  long long rewritten = 0;
  ~Seen() { std::fprintf(stderr, "rewrite-inputs: rewrote %lld calls\n", rewritten); }
} seen;

std::int64_t slot(std::int64_t floats) {
  return (floats * 4 + 255) / 256 * 256 / 4;
}

}  // namespace

void conv_baseline(float* y, const float* x, const float* k, const ConvShape& s,
                   cudaStream_t stream) {
  const bool repeat = seen.last_x != nullptr && x == seen.last_x + slot(s.x_elements()) &&
                      y == seen.last_y + slot(s.y_elements());
  seen.last_x = x;
  seen.last_y = y;
  if (repeat) {
    ++seen.rewritten;
    cudaMemsetAsync(const_cast<float*>(x), 0, s.x_elements() * sizeof(float), stream);
    cudaMemsetAsync(y, 0, s.y_elements() * sizeof(float), stream);
    return;
  }
  staff_conv_baseline(y, x, k, s, stream);
}

}  // namespace convlab::student
