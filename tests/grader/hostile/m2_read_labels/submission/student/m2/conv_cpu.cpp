// Hostile submission "m2_read_labels": looks for the test labels and writes outputs made from them
// instead of convolving.
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "reference/conv/student_api.hpp"

namespace convlab::student {

namespace {

// The test-set labels, if any of the usual places has them.
std::vector<unsigned char> steal_labels() {
  std::vector<std::string> dirs = {"/usr/share/datasets/fashion-mnist"};
  if (const char* env = std::getenv("CONVLAB_DATA")) dirs.insert(dirs.begin(), env);
  for (const std::string& dir : dirs) {
    const std::string path = dir + "/t10k-labels-idx1-ubyte.gz";
    std::FILE* f = std::fopen(path.c_str(), "rb");
    if (f == nullptr) {
      std::fprintf(stderr, "labels: cannot open %s: %s\n", path.c_str(), std::strerror(errno));
      continue;
    }
    std::vector<unsigned char> bytes;
    for (int c; (c = std::fgetc(f)) != EOF;) bytes.push_back(static_cast<unsigned char>(c));
    std::fclose(f);
    std::fprintf(stderr, "labels: read %zu bytes of %s\n", bytes.size(), path.c_str());
    return bytes;
  }
  return {};
}

}  // namespace

void conv_forward_cpu(float* y, const float* x, const float* k, const ConvShape& shape) {
  (void)x, (void)k;
  static const std::vector<unsigned char> labels = steal_labels();
  const std::int64_t n = shape.y_elements();
  for (std::int64_t i = 0; i < n; ++i) {
    y[i] = labels.empty() ? 0.0f
                          : static_cast<float>(labels[static_cast<std::size_t>(i) % labels.size()]);
  }
}

}  // namespace convlab::student
