// cuBLAS opened on first use (reference/core/cublas_on_demand.cpp): no program of the framework
// loads it at start, and the first call loads it and reaches the real library.
#include <cublas_api.h>
#include <dlfcn.h>
#include <doctest/doctest.h>

#include <string>

#include "tests/support/test_support.hpp"

namespace test_cublas_on_demand {

TEST_CASE("neither convlab nor the referee loads cuBLAS at start") {
  for (const std::string& program :
       {convlab::test::convlab_binary().string(), std::string(CONVLAB_REFEREE)}) {
    std::string out;
    // What the dynamic loader maps at start (ldd's own mechanism), without running the program.
    const int rc = convlab::test::run_command("LD_TRACE_LOADED_OBJECTS=1 '" + program + "'", &out);
    INFO(program << ":\n" << out);
    REQUIRE(rc == 0);
    CHECK(out.find("libcudart") != std::string::npos);  // the CUDA build's libraries are listed
    CHECK(out.find("libcublas") == std::string::npos);
  }
}

TEST_CASE("the first cuBLAS call loads the library and reaches it") {
  CHECK(::dlopen(CONVLAB_CUBLAS_SONAME, RTLD_NOW | RTLD_NOLOAD) == nullptr);
  // Answered by the library itself: no GPU is needed for a status name.
  CHECK(std::string(cublasGetStatusName(CUBLAS_STATUS_ALLOC_FAILED)) ==
        "CUBLAS_STATUS_ALLOC_FAILED");
  CHECK(::dlopen(CONVLAB_CUBLAS_SONAME, RTLD_NOW | RTLD_NOLOAD) != nullptr);
}

}  // namespace test_cublas_on_demand
