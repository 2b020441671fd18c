// Hostile: no kernel here; it looks for cuDNN or the library convolution in every file mapped
// into its process and reports what it finds.
#include <cuda_runtime_api.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>
#include <string>

#include "reference/conv/student_api.hpp"

namespace convlab::student {
namespace {

bool mapped_file_mentions(const char* name) {
  std::ifstream maps("/proc/self/maps");
  std::set<std::string> files;
  for (std::string line; std::getline(maps, line);) {
    const auto slash = line.find('/');
    if (slash != std::string::npos) files.insert(line.substr(slash));
  }
  for (const std::string& path : files) {
    std::error_code ec;
    if (!std::filesystem::is_regular_file(path, ec)) continue;  // not the GPU's device files
    std::ifstream in(path, std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(in)), {});
    if (bytes.find(name) != std::string::npos) return true;
  }
  return false;
}

}  // namespace

void conv_baseline(float*, const float*, const float*, const ConvShape&, cudaStream_t) {
  static const bool cudnn = mapped_file_mentions("cudnnConvolutionForward");
  static const bool library = mapped_file_mentions("conv_forward_cudnn");
  std::fprintf(stderr, "cudnn %s, library %s\n", cudnn ? "found" : "not found",
               library ? "found" : "not found");
}

}  // namespace convlab::student
