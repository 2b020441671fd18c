// convlab-hostile: staff rename conv_baseline
// Hostile: holds all the device memory it can take from its first call on.
#include <cstdio>

namespace convlab::student {
namespace {

bool filled = false;

void fill() {
  filled = true;
  long long held = 0;
  for (std::size_t chunk = std::size_t{1} << 30; chunk >= (std::size_t{1} << 20);) {
    void* p = nullptr;
    if (cudaMalloc(&p, chunk) == cudaSuccess) {
      held += static_cast<long long>(chunk);
    } else {
      cudaGetLastError();
      chunk /= 2;
    }
  }
  std::fprintf(stderr, "fill-memory: holding %lld MiB\n", held >> 20);
}

}  // namespace

void conv_baseline(float* y, const float* x, const float* k, const ConvShape& s,
                   cudaStream_t stream) {
  if (!filled) fill();
  staff_conv_baseline(y, x, k, s, stream);
}

}  // namespace convlab::student
