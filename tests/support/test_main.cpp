// Main of the CPU suites: doctest's, then Skipped (77) where code under test is not written yet.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include "tests/support/test_support.hpp"

int main(int argc, char** argv) {
  doctest::Context context(argc, argv);
  const int result = context.run();
  if (context.shouldExit()) return result;
  return convlab::test::finish(result);
}
