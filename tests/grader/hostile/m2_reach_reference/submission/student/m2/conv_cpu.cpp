// Hostile: no convolution here; it calls whatever "conv_forward_reference" it can find in the
// symbol tables of its own executable.
#include <elf.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>

#include "reference/conv/student_api.hpp"

namespace convlab::student {
namespace {

using Found = void (*)(float*, const float*, const float*, const ConvShape&);

// The file offset of the executable's first mapping (the load base of a PIE).
std::uintptr_t load_base() {
  std::ifstream maps("/proc/self/maps");
  std::string line;
  std::getline(maps, line);
  return std::stoull(line.substr(0, line.find('-')), nullptr, 16);
}

Found find_reference() {
  std::ifstream in("/proc/self/exe", std::ios::binary);
  const std::string f((std::istreambuf_iterator<char>(in)), {});
  if (f.size() < sizeof(Elf64_Ehdr)) return nullptr;
  const auto* eh = reinterpret_cast<const Elf64_Ehdr*>(f.data());
  const auto* sh = reinterpret_cast<const Elf64_Shdr*>(f.data() + eh->e_shoff);
  for (int i = 0; i < eh->e_shnum; ++i) {
    if (sh[i].sh_type != SHT_SYMTAB && sh[i].sh_type != SHT_DYNSYM) continue;
    const char* names = f.data() + sh[sh[i].sh_link].sh_offset;
    const auto* sym = reinterpret_cast<const Elf64_Sym*>(f.data() + sh[i].sh_offset);
    for (std::size_t j = 0; j < sh[i].sh_size / sizeof(Elf64_Sym); ++j) {
      if (sym[j].st_value != 0 && std::strstr(names + sym[j].st_name, "conv_forward_reference")) {
        return reinterpret_cast<Found>(load_base() + sym[j].st_value);
      }
    }
  }
  return nullptr;
}

}  // namespace

void conv_forward_cpu(float* y, const float* x, const float* k, const ConvShape& shape) {
  static const Found found = find_reference();
  std::fprintf(stderr, found ? "reference found\n" : "reference not found\n");
  if (found) found(y, x, k, shape);
}

}  // namespace convlab::student
