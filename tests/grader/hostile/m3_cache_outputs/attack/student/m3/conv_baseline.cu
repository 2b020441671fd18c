// convlab-hostile: staff rename conv_baseline
// Hostile: whole outputs memoised by a hash of x and k.
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <map>
#include <vector>

namespace convlab::student {
namespace {

std::uint64_t hash_device(const float* p, std::int64_t n, std::uint64_t h) {
  std::vector<std::uint32_t> v(static_cast<std::size_t>(n));
  cudaMemcpy(v.data(), p, n * sizeof(float), cudaMemcpyDeviceToHost);
  for (std::uint32_t w : v) h = (h ^ w) * 0x100000001b3ull;
  return h;
}

struct Cache {
  std::map<std::uint64_t, float*> outputs;
  long long hits = 0, calls = 0;
  ~Cache() { std::fprintf(stderr, "cache hits: %lld of %lld calls\n", hits, calls); }
} cache;

}  // namespace

void conv_baseline(float* y, const float* x, const float* k, const ConvShape& s,
                   cudaStream_t stream) {
  const std::uint64_t key =
      hash_device(x, s.x_elements(), hash_device(k, s.k_elements(), 0xcbf29ce484222325ull));
  ++cache.calls;
  const std::size_t bytes = static_cast<std::size_t>(s.y_elements()) * sizeof(float);
  if (auto it = cache.outputs.find(key); it != cache.outputs.end()) {
    ++cache.hits;
    cudaMemcpyAsync(y, it->second, bytes, cudaMemcpyDeviceToDevice, stream);
    return;
  }
  staff_conv_baseline(y, x, k, s, stream);
  float* copy = nullptr;
  if (cudaMalloc(&copy, bytes) == cudaSuccess) {
    cudaMemcpyAsync(copy, y, bytes, cudaMemcpyDeviceToDevice, stream);
    cache.outputs[key] = copy;
  }
}

}  // namespace convlab::student
