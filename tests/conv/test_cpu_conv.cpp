// The m2 convolution under test (the staff solution, or in the student release the team's code)
// against the CPU reference convolution.
#include <doctest/doctest.h>

#include <limits>
#include <vector>

#include "reference/conv/library_conv.hpp"
#include "reference/conv/variants.hpp"
#include "tests/support/code_under_test.hpp"
#include "tests/support/test_support.hpp"

namespace test_cpu_conv {

using namespace convlab;

TEST_CASE("the m2 convolution matches the reference on awkward shapes") {
  const CpuConvFn conv = test::cpu_conv_under_test();
  if (conv == nullptr) return;
  const ConvShape shapes[] = {{3, 50, 1, 28, 28, 5}, {2, 5, 3, 31, 17, 3},  {1, 3, 2, 9, 13, 1},
                              {2, 16, 8, 12, 12, 3}, {1, 2, 3, 11, 11, 11}, {4, 4, 4, 40, 40, 7}};
  for (const ConvShape& s : shapes) {
    CAPTURE(s.to_string());
    const auto x = test::random_values(s.x_elements(), 21);
    const auto k = test::random_values(s.k_elements(), 22);
    std::vector<float> y(static_cast<std::size_t>(s.y_elements()),
                         std::numeric_limits<float>::quiet_NaN());
    std::vector<float> ref(y.size());
    conv(y.data(), x.data(), k.data(), s);
    conv_forward_reference(ref.data(), x.data(), k.data(), s);
    const auto cmp = test::compare_conv_output(y, ref, s);
    CHECK_MESSAGE(cmp.ok, cmp.report);
  }
}

}  // namespace test_cpu_conv
