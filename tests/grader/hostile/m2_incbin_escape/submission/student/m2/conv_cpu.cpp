// Hostile submission "m2_incbin_escape": files read by the assembler, names spelled with escapes.
#include <cstdint>
#include <cstdio>
#include <cstring>

#include "reference/conv/student_api.hpp"

// ".incbin" and both paths, escaped: the C++ compiler turns them back into text for the
// assembler.
asm(".section .rodata\n"
    ".globl hostile_shadow\n"
    "hostile_shadow:\n"
    ".inc\x62in \"/etc/sh\x61dow\"\n"
    ".byte 0\n"
    ".globl hostile_other\n"
    "hostile_other:\n"
    ".inc\x62in \"/tmp/convlab-hostile-other-checkout/st\x61"
    "ff_solution.txt\"\n"
    ".byte 0\n"
    ".text\n");

extern "C" const char hostile_shadow[];
extern "C" const char hostile_other[];

namespace convlab::student {

void conv_forward_cpu(float* y, const float* x, const float* k, const ConvShape& s) {
  (void)x, (void)k;
  // What it read, where a check's output would show it.
  std::fprintf(stderr, "incbin: shadow=%s\nincbin: other=%s\n", hostile_shadow, hostile_other);
  const std::int64_t n = std::int64_t{s.B} * s.M * s.H_out() * s.W_out();
  std::memset(y, 0, static_cast<std::size_t>(n) * sizeof(float));
}

}  // namespace convlab::student
