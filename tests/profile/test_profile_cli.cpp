// `convlab run --profile` where it does not apply: one clear error and a non-zero exit, before
// any data is read. Runs without a GPU; the profile itself is tested in test_profile_gpu.
#include <doctest/doctest.h>

#include <filesystem>
#include <string>

#include "tests/support/test_support.hpp"

namespace test_profile_cli {

using namespace convlab;
namespace fs = std::filesystem;

namespace {

struct Result {
  int code = 0;
  std::string output;
};

Result convlab_run(const std::string& args) {
  Result r;
  // No data directory at all: the error must come before the data is looked for.
  r.code = test::run_command(
      "CONVLAB_DATA=/nonexistent " + test::convlab_binary().string() + " run " + args + " 2>&1",
      &r.output);
  return r;
}

void check_clear_error(const Result& r, const std::string& words) {
  INFO(r.output);
  CHECK(r.code != 0);
  CHECK(r.code < 128);
  CHECK(r.output.find(words) != std::string::npos);
  CHECK(r.output.find("internal error") == std::string::npos);
  CHECK(r.output.find("Profiling result") == std::string::npos);
  CHECK(r.output.find("Loading fashion-mnist") == std::string::npos);
}

}  // namespace

TEST_CASE("--profile on a CPU run says which runs it profiles") {
  for (const std::string args :
       {"m2 --profile", "m2 ece408-low 100 --profile", "m1 --device cpu --profile",
        "m1 baseline 10 --device cpu --profile"}) {
    CAPTURE(args);
    check_clear_error(convlab_run(args), "--profile records GPU activity");
    check_clear_error(convlab_run(args), "Profile a GPU run: m1 --device gpu, m3 or final.");
  }
}

TEST_CASE("--profile-json on a CPU run fails the same way and writes nothing") {
  test::TempDir dir;
  const fs::path json = dir.path() / "profile.json";
  check_clear_error(convlab_run("m2 --profile-json " + json.string()),
                    "--profile records GPU activity");
  CHECK(!fs::exists(json));
}

TEST_CASE("run --help lists the profile options") {
  Result r;
  r.code = test::run_command(test::convlab_binary().string() + " run --help 2>&1", &r.output);
  INFO(r.output);
  CHECK(r.code == 0);
  CHECK(r.output.find("--profile ") != std::string::npos);
  CHECK(r.output.find("--profile-json") != std::string::npos);
}

#ifndef CONVLAB_HAVE_CUDA
TEST_CASE("a build without CUDA says so for a profiled GPU run") {
  check_clear_error(convlab_run("m3 --profile"), "built without CUDA");
}
#endif

}  // namespace test_profile_cli
