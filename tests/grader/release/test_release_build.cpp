// The student release end to end, as a team gets it: `convlab release` into a temp folder; no
// file outside student/ defines a student entry point; the kit configures with the preset this
// tree was built with (default where the CUDA toolkit is, else cpu), builds, and its whole ctest passes with the stubs (unwritten milestones skip, saying what to
// write). Then the staff solutions are dropped in as the team's files (copied now from
// reference/solutions/, never stored elsewhere), the kit is rebuilt incrementally, and its ctest
// passes again, now testing that code; `convlab check m2` and `convlab run m2` agree.
#include <doctest/doctest.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <regex>
#include <sstream>
#include <string>

#include "datasets/synthetic.hpp"
#include "grader/release/release.hpp"
#include "reference/conv/variant_table.hpp"
#include "reference/core/stopwatch.hpp"
#include "tests/support/test_support.hpp"

namespace test_release_build {

using convlab::test::read_all;
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

// "N% tests passed, F tests failed out of T": F, or -1 when the summary is missing.
int failed_tests(const std::string& ctest_output) {
  static const std::regex summary(R"((\d+)% tests passed, (\d+) tests failed out of (\d+))");
  std::smatch m;
  if (!std::regex_search(ctest_output, m, summary)) return -1;
  return std::stoi(m[2].str());
}

std::string summary_line(const std::string& ctest_output) {
  const auto at = ctest_output.find("% tests passed");
  if (at == std::string::npos) return "(no summary)";
  const auto begin = ctest_output.rfind('\n', at);
  return ctest_output.substr(begin + 1, ctest_output.find('\n', at) - begin - 1);
}

// CTest's output without the lines of tests that started, passed or skipped: what failed, and
// its output (--output-on-failure), short enough to survive a CI log's truncation.
std::string failures_only(const std::string& ctest_output) {
  static const std::regex quiet(
      R"(^\s*(Start\s+\d+:|\d+/\d+ Test\s+#\d+: \S+ \.+\s*(Passed|\*\*\*Skipped)))");
  std::istringstream in(ctest_output);
  std::string line;
  std::string kept;
  while (std::getline(in, line)) {
    if (!std::regex_search(line, quiet)) kept += line + '\n';
  }
  return kept;
}

}  // namespace

TEST_CASE("the student release builds and its ctest passes, before and after a correct m2") {
  convlab::test::TempDir tmp;
  const fs::path kit = tmp.path() / "kit";
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
        "grader/service", "tests/grader", "tests/tools", ".git", ".data", "build"}) {
    CHECK_MESSAGE(!fs::exists(kit / staff), staff);
  }
  for (const char* team :
       {"student/m2/conv_cpu.cpp", "student/final/best/README.md", "milestones/m2/README.md",
        "docs/student.md", "tools/setup.sh",
        "tools/gpu-check.sh", "CMakePresets.json", "LICENSE", "CHANGELOG.md",
        "datasets/fetch-fashion-mnist.sh", "grader/submit/submit_command.cpp", "RELEASE"}) {
    CHECK_MESSAGE(fs::exists(kit / team), team);
  }
  // The kit's own README and scripts: nothing staff-only in them.
  for (const char* file : {"README.md", "tools/setup.sh", "tools/gpu-check.sh"}) {
    const std::string text = read_all(kit / file);
    CAPTURE(file);
    for (const char* staff : {"--impl", "solution", "instructor.md", "grade-all", "release --out",
                              "chromium", "doxygen"}) {
      CHECK_MESSAGE(text.find(staff) == std::string::npos, staff);
    }
  }
  CHECK(read_all(kit / "README.md").find("convlab check m2") != std::string::npos);
  CHECK(run_command("cd " + quoted(kit) + " && sha256sum -c --quiet --strict RELEASE", &output) ==
        0);

  // No file outside student/ defines a student entry point.
  const auto names = convlab::grader::student_entry_points(kit);
  REQUIRE(names.size() > 2);
  for (const auto& e : fs::recursive_directory_iterator(kit)) {
    if (!e.is_regular_file() || e.path().extension() == ".safetensors") continue;
    const std::string rel = e.path().lexically_relative(kit).generic_string();
    if (rel.starts_with("student/")) continue;
    const auto found = convlab::grader::find_definitions(read_all(e.path()), names);
    CHECK_MESSAGE(found.empty(), rel << ": " << (found.empty() ? "" : found.front()));
  }
  std::cout << "release written and checked in " << convlab::seconds_since(start) << " s" << std::endl;

  // Configure with this tree's preset and build all of it, as a team would. The same preset and
  // depth as this tree's build: ccache gives the kit this tree's objects for the files they share.
#ifdef CONVLAB_HAVE_CUDA
  const std::string preset = "default";
#else
  const std::string preset = "cpu";
#endif
  const char* jobs = std::getenv("CONVLAB_TEST_BUILD_JOBS");
  const std::string in_kit = "cd " + quoted(kit) + " && env -u CONVLAB_ROOT ";
  const std::string cmake = in_kit + quoted(CONVLAB_CMAKE_COMMAND);
  const std::string build =
      cmake + " --build --preset " + preset + " -j " + std::string(jobs != nullptr ? jobs : "2");
  const std::string ctest = in_kit +
                            quoted(fs::path(CONVLAB_CMAKE_COMMAND).parent_path() / "ctest") +
                            " --preset " + preset + " -j 2 --output-on-failure";
  REQUIRE_MESSAGE(run_command(cmake + " --preset " + preset, &output) == 0, output);
  CHECK(output.find("reference/solutions") == std::string::npos);
  REQUIRE_MESSAGE(run_command(build, &output) == 0, output);
  std::cout << "release configured and built in " << convlab::seconds_since(start) << " s" << std::endl;

  // Its whole ctest passes with the stubs; test_stubs skips and says what to write.
  run_command(ctest, &output);
  std::cout << "kit ctest with the stubs: " << summary_line(output) << std::endl;
  CHECK_MESSAGE(failed_tests(output) == 0, failures_only(output));
  CHECK_MESSAGE(output.find("test_stubs ") != std::string::npos, output);
  const std::string log = read_all(kit / "build" / preset / "Testing/Temporary/LastTest.log");
  CHECK(log.find("SKIPPED: the m2 CPU convolution is not implemented yet: write it in "
                 "student/m2/conv_cpu.cpp") != std::string::npos);

  // The kit's convlab: no release command, no --impl; the stub's message on run and check.
  const std::string convlab = in_kit + "build/" + preset + "/reference/driver/convlab";
  CHECK(run_command(convlab + " release --out " + quoted(tmp.path() / "again"), &output) == 1);
  CHECK_FALSE(fs::exists(tmp.path() / "again"));
  // The client of the submission service is in the kit; its server is not.
  CHECK(run_command(convlab + " submit --help", &output) == 0);
  CHECK(output.find("Save the server address and your token") != std::string::npos);
  CHECK(run_command(convlab + " serve --roster r.csv --db r.sqlite", &output) == 1);
  CHECK(output.find("A subcommand is required") != std::string::npos);
  CHECK(run_command(convlab + " run m2 --impl solution", &output) == 1);
  const fs::path data = tmp.path() / "data";
  fs::create_directories(data);
  convlab::data::write_dataset_files(data, convlab::data::make_synthetic(10, 28, 28, 1),
                                     convlab::data::make_synthetic(200, 28, 28, 2));
  CHECK(run_command(convlab + " run m2 ece408-high 100 --data " + quoted(data), &output) == 1);
  CHECK_MESSAGE(output.find("is not implemented yet: write it in student/m2/conv_cpu.cpp") !=
                    std::string::npos,
                output);
  CHECK(output.find("Correctness:") == std::string::npos);
  CHECK(run_command(convlab + " check m2 --seed 3", &output) == 1);
  CHECK(output.find("student/m2/conv_cpu.cpp") != std::string::npos);

  // A team's correct code: the staff solutions, as the team's files (namespace student).
  // Each declared variant's staff file becomes its student file, and the files of its staff
  // folder the same files of its student folder. The GPU variants only where a GPU can run
  // them: elsewhere the kit's GPU suites skip, and test_build_cuda builds the same files as a
  // team's.
  std::string smi;
  const bool gpu = run_command("nvidia-smi -L", &smi) == 0;
  if (!gpu) MESSAGE("no usable GPU: the CPU variants' solutions only");
  const auto hand_in = [&](const fs::path& staff, const fs::path& team_file) {
    std::string code = read_all(staff);
    for (auto at = code.find("convlab::solution"); at != std::string::npos;
         at = code.find("convlab::solution", at)) {
      code.replace(at, 17, "convlab::student");
    }
    fs::create_directories(team_file.parent_path());
    std::ofstream(team_file) << code;
  };
  for (const convlab::Variant& v : convlab::variants()) {
    const fs::path team_file = kit / v.student_file;
    REQUIRE(fs::exists(team_file));
    if (v.gpu() && !gpu) continue;
    hand_in(convlab::test::source_dir() / v.staff_file, team_file);
    const fs::path staff_folder = convlab::test::source_dir() / v.staff_folder();
    if (!fs::is_directory(staff_folder)) continue;
    for (const auto& e : fs::directory_iterator(staff_folder)) {
      hand_in(e.path(), kit / v.student_folder() / e.path().filename());
    }
  }
  REQUIRE_MESSAGE(run_command(build, &output) == 0, output);
  std::cout << "rebuilt with correct team code in " << convlab::seconds_since(start) << " s" << std::endl;

  run_command(ctest, &output);
  std::cout << "kit ctest with a correct m2: " << summary_line(output) << std::endl;
  CHECK_MESSAGE(failed_tests(output) == 0, failures_only(output));
  // test_stubs now tests the code and passes (it no longer skips).
  CHECK_MESSAGE(std::regex_search(output, std::regex(R"(test_stubs \.+ +Passed)")), output);

  CHECK(run_command(convlab + " check m2 --seed 3", &output) == 0);
  CHECK_MESSAGE(output.find("every output right on 8 shapes") != std::string::npos, output);
  std::cout << "release test done in " << convlab::seconds_since(start) << " s" << std::endl;
}

}  // namespace test_release_build
