// Every student stub, as shipped, fails with a message naming its file and handout section.
#include <doctest/doctest.h>

#include <string>

#include "reference/conv/variants.hpp"
#include "reference/core/error.hpp"

using namespace convlab;

namespace {
template <typename Call>
std::string message_of(Call call) {
  try {
    call();
  } catch (const NotImplemented& e) {
    return e.what();
  }
  return "(no NotImplemented thrown)";
}
}  // namespace

TEST_CASE("the m2 stub names student/m2/conv_cpu.cpp and its handout section") {
  const ConvShape s{1, 1, 1, 5, 5, 3};
  const std::string msg =
      message_of([&] { cpu_conv(Impl::student)(nullptr, nullptr, nullptr, s); });
  CHECK(msg.find("student/m2/conv_cpu.cpp") != std::string::npos);
  CHECK(msg.find("milestones/m2/README.md") != std::string::npos);
}

#ifdef CONVLAB_HAVE_CUDA
TEST_CASE("every GPU stub names its file and handout section before touching the GPU") {
  const ConvShape s{1, 1, 1, 5, 5, 3};
  for (const GpuVariant& v : gpu_variants()) {
    CAPTURE(v.name);
    const std::string msg = message_of([&] { v.student(nullptr, nullptr, nullptr, s, nullptr); });
    CHECK(msg.find(std::string(v.student_file)) != std::string::npos);
    CHECK(msg.find(std::string(v.handout)) != std::string::npos);
  }
}
#endif
