// Hostile: no kernel here; it looks for cuDNN or the library convolution in every file mapped
// into its process and reports what it finds.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>
#include <string>

#include "reference/conv/student_api.hpp"

namespace convlab::student {
namespace {

std::set<std::string> mapped_files() {
  std::ifstream maps("/proc/self/maps");
  std::set<std::string> files;
  for (std::string line; std::getline(maps, line);) {
    const auto slash = line.find('/');
    if (slash != std::string::npos) files.insert(line.substr(slash));
  }
  return files;
}

bool any_mapped_path_contains(const char* name) {
  for (const std::string& path : mapped_files()) {
    if (path.find(name) != std::string::npos) return true;
  }
  return false;
}

bool mapped_file_mentions(const char* name) {
  for (const std::string& path : mapped_files()) {
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
  static const bool cudnn = any_mapped_path_contains("libcudnn");
  // Spelled backwards: the name itself must not be in this binary for the search to mean much.
  static const bool library = [] {
    std::string name = "nnduc_drawrof_vnoc";
    std::reverse(name.begin(), name.end());
    return mapped_file_mentions(name.c_str());
  }();
  std::fprintf(stderr, "cudnn mapped: %s, library conv: %s\n", cudnn ? "yes" : "no",
               library ? "found" : "not found");
}

}  // namespace convlab::student
