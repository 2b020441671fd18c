// Main of the GPU suites: skips (exit 77, reason printed) where no CUDA device is usable, so
// CTest reports "Skipped" instead of a pass that tested nothing.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <string>

#include "reference/core/cuda_check.hpp"
#include "tests/support/test_support.hpp"

int main(int argc, char** argv) {
  std::string why;
  if (!convlab::cuda_device_available(&why)) convlab::test::skip("GPU test skipped: " + why);
  doctest::Context context(argc, argv);
  const int result = context.run();
  if (context.shouldExit()) return result;
  return convlab::test::finish(result);
}
