// convlab-hostile: staff rename conv_forward_cpu
// Hostile: outputs memoised per image by a hash of its pixels and the filters.
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <unordered_map>
#include <vector>

namespace convlab::student {
namespace {

std::uint64_t hash(const float* p, std::int64_t n, std::uint64_t h) {
  for (std::int64_t i = 0; i < n; ++i) {
    std::uint32_t v;
    std::memcpy(&v, p + i, sizeof v);
    h = (h ^ v) * 0x100000001b3ull;
  }
  return h;
}

struct Cache {
  std::unordered_map<std::uint64_t, std::vector<float>> outputs;
  std::int64_t hits = 0, images = 0;
  ~Cache() { std::fprintf(stderr, "cache hits: %lld of %lld images\n", (long long)hits, (long long)images); }
} cache;

}  // namespace

void conv_forward_cpu(float* y, const float* x, const float* k, const ConvShape& s) {
  const std::int64_t per_x = std::int64_t{s.C} * s.H * s.W;
  const std::int64_t per_y = std::int64_t{s.M} * s.H_out() * s.W_out();
  const std::uint64_t kh = hash(k, s.k_elements(), 0xcbf29ce484222325ull);
  for (int b = 0; b < s.B; ++b) {
    const std::uint64_t key = hash(x + b * per_x, per_x, kh);
    ++cache.images;
    auto it = cache.outputs.find(key);
    if (it != cache.outputs.end()) {
      ++cache.hits;
      std::memcpy(y + b * per_y, it->second.data(), per_y * sizeof(float));
      continue;
    }
    ConvShape one = s;
    one.B = 1;
    staff_conv_forward_cpu(y + b * per_y, x + b * per_x, k, one);
    cache.outputs[key].assign(y + b * per_y, y + (b + 1) * per_y);
  }
}

}  // namespace convlab::student
