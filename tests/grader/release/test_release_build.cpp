// The student release end to end: `convlab release` into a temp folder, then that folder is
// configured and built on its own (CPU only, a few targets to keep the time down); its stub
// suite passes, a staff-only suite skips, and `convlab run m2` fails with the stub's message.
#include <doctest/doctest.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <string>

#include "datasets/synthetic.hpp"
#include "tests/support/test_support.hpp"

namespace fs = std::filesystem;
using convlab::test::run_command;

namespace {

// Built piecewise: g++ 12 warns (-Wrestrict, wrongly) on "'" + string + "'".
std::string quoted(const fs::path& p) {
  std::string q = "'";
  q += p.string();
  q += '\'';
  return q;
}

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

}  // namespace

TEST_CASE("the student release builds, its stubs fail as they should, and it has no staff file") {
  convlab::test::TempDir tmp;
  const fs::path kit = tmp.path() / "kit";
  const fs::path build = tmp.path() / "build";
  const auto start = std::chrono::steady_clock::now();
  std::string output;

  // CONVLAB_ROOT would point the commands at another tree: the kit must stand on its own.
  const std::string env = "env -u CONVLAB_ROOT ";
  REQUIRE_MESSAGE(
      run_command(env + quoted(convlab::test::convlab_binary()) + " release --out " + quoted(kit),
                  &output) == 0,
      output);

  for (const char* staff :
       {"reference/solutions", "docs/instructor.md", "tools/train", "tools/calibrate",
        "tools/CMakeLists.txt", "grader/class", "grader/release", "grader/gradescope",
        "tests/grader/release", "tests/tools", ".git", ".data", "build"}) {
    CHECK_MESSAGE(!fs::exists(kit / staff), staff);
  }
  for (const char* team :
       {"student/m2/conv_cpu.cpp", "milestones/m2/README.md", "docs/student.md", "tools/setup.sh",
        "CMakePresets.json", "datasets/fetch-fashion-mnist.sh", "RELEASE"}) {
    CHECK_MESSAGE(fs::exists(kit / team), team);
  }
  for (const auto& e : fs::recursive_directory_iterator(kit)) {
    if (e.path().extension() != ".safetensors") continue;
    const std::string rel = e.path().lexically_relative(kit).generic_string();
    const std::string name = e.path().stem().string();
    CHECK_MESSAGE(rel.starts_with("datasets/models/"), rel);
    CHECK_MESSAGE(
        (name == "baseline" || name == "ece408-high" || name == "ece408-low" || name == "two-conv"),
        rel);
  }
  CHECK(run_command("cd " + quoted(kit) + " && sha256sum -c --quiet --strict RELEASE", &output) ==
        0);
  std::cout << "release written in " << seconds_since(start) << " s" << std::endl;

  // Configure and build the kit alone, CPU only.
  const std::string configure = std::string(CONVLAB_CMAKE_COMMAND) + " -S " + quoted(kit) + " -B " +
                                quoted(build) + " -G '" + CONVLAB_CMAKE_GENERATOR +
                                "' -DCMAKE_BUILD_TYPE=Release -DCONVLAB_CUDA=OFF" +
                                " -DCONVLAB_WARNINGS_AS_ERRORS=" + CONVLAB_WARNINGS_AS_ERRORS;
  REQUIRE_MESSAGE(run_command(configure, &output) == 0, output);
  CHECK(output.find("reference/solutions") == std::string::npos);
  const char* jobs = std::getenv("CONVLAB_TEST_BUILD_JOBS");
  const std::string build_cmd = std::string(CONVLAB_CMAKE_COMMAND) + " --build " + quoted(build) +
                                " -j " + (jobs != nullptr ? jobs : "2") +
                                " --target convlab test_stubs test_cpu_conv";
  REQUIRE_MESSAGE(run_command(build_cmd, &output) == 0, output);
  std::cout << "release configured and built in " << seconds_since(start) << " s" << std::endl;

  // Its stub suite passes; the staff-solution suite skips (77) and says why.
  CHECK_MESSAGE(run_command(quoted(build / "tests/test_stubs"), &output) == 0, output);
  CHECK(run_command(quoted(build / "tests/test_cpu_conv"), &output) == 77);
  CHECK_MESSAGE(
      output.find("SKIPPED: staff solutions are not part of this build") != std::string::npos,
      output);

  // The kit's convlab has no release command (a staff tool) and reads its own tree.
  const std::string kit_convlab = env + quoted(build / "reference/driver/convlab");
  CHECK(run_command(kit_convlab + " release --out " + quoted(tmp.path() / "again"), &output) != 0);
  CHECK_FALSE(fs::exists(tmp.path() / "again"));

  // `convlab run m2` on the stub: a non-zero exit and the stub's message naming the file. Any
  // readable test set will do, so generated data keeps this independent of the real one.
  const fs::path data = tmp.path() / "data";
  fs::create_directories(data);
  convlab::data::write_dataset_files(data, convlab::data::make_synthetic(10, 28, 28, 1),
                                     convlab::data::make_synthetic(200, 28, 28, 2));
  const int rc =
      run_command(kit_convlab + " run m2 ece408-high 100 --data " + quoted(data), &output);
  CHECK(rc != 0);
  CHECK_MESSAGE(output.find("is not implemented yet: write it in student/m2/conv_cpu.cpp") !=
                    std::string::npos,
                output);
  CHECK(output.find("milestones/m2/README.md") != std::string::npos);
  CHECK_FALSE(output.find("Correctness:") != std::string::npos);
  std::cout << "release test done in " << seconds_since(start) << " s" << std::endl;
}
