// The team's m2 entry point, called on real buffers: as shipped, the stub fails with a message
// naming its file and handout section (and the suite reports Skipped, saying what to write);
// once written, it must match the library convolution.
#include <doctest/doctest.h>

#include <limits>
#include <string>
#include <vector>

#include "reference/conv/library_conv.hpp"
#include "reference/conv/variants.hpp"
#include "reference/core/error.hpp"
#include "tests/support/test_support.hpp"

namespace test_stubs {

using namespace convlab;

TEST_CASE("m2: the stub names student/m2/conv_cpu.cpp and its handout, or the code is right") {
  const ConvShape s{2, 3, 2, 9, 7, 3};
  const auto x = test::random_values(s.x_elements(), 5);
  const auto k = test::random_values(s.k_elements(), 6);
  std::vector<float> y(static_cast<std::size_t>(s.y_elements()),
                       std::numeric_limits<float>::quiet_NaN());
  try {
    cpu_conv(Impl::student)(y.data(), x.data(), k.data(), s);
  } catch (const NotImplemented& e) {
    const std::string msg = e.what();
    CHECK(msg.find("student/m2/conv_cpu.cpp") != std::string::npos);
    CHECK(msg.find("milestones/m2/README.md") != std::string::npos);
    test::note_not_implemented(msg);
    return;
  }
  std::vector<float> ref(y.size());
  conv_forward_reference(ref.data(), x.data(), k.data(), s);
  const auto cmp = test::compare_conv_output(y, ref, s);
  const std::string why = "student/m2/conv_cpu.cpp differs from the library convolution on " +
                          s.to_string() + " (run convlab check m2):\n" + cmp.report;
  CHECK_MESSAGE(cmp.ok, why);
}

}  // namespace test_stubs
