// The Gradescope wrapper (grader/gradescope/run_autograder) run against a temp autograder
// folder: the staff m2 solution gets a full score, the stub gets zero, and when grading
// itself fails the student still gets a results.json (score 0, the reason).
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>
#include <string>

#include "tests/support/test_support.hpp"

namespace test_gradescope {

using convlab::test::read_all;
namespace fs = std::filesystem;
using convlab::test::run_command;
using nlohmann::json;

namespace {

// A fake /autograder: source/ with a hidden model and the data, submission/ with `m2_file`.
struct Autograder {
  convlab::test::TempDir tmp;
  fs::path root = tmp.path() / "autograder";

  explicit Autograder(const std::string& m2_file, const fs::path& data) {
    fs::create_directories(root / "source/hidden-models");
    fs::create_directories(root / "submission/student/m2");
    fs::create_directories(root / "source/data");
    fs::create_symlink(data, root / "source/data/fashion-mnist");
    // A hidden model the students never saw (here: a public one under another name).
    fs::copy_file(convlab::test::source_dir() / "datasets/models/two-conv.safetensors",
                  root / "source/hidden-models/hidden-gs.safetensors");
    std::ofstream(root / "submission/student/m2/conv_cpu.cpp") << m2_file;
  }
  // Runs run_autograder with `env` added; returns its exit status.
  int run(const std::string& env, std::string* output) const {
    return run_command(
        "AUTOGRADER_ROOT='" + root.string() + "' CONVLAB_BIN='" +
            convlab::test::convlab_binary().string() + "' CONVLAB_CACHE='" + CONVLAB_TEST_CACHE +
            "' " + env + " bash '" +
            (convlab::test::source_dir() / "grader/gradescope/run_autograder").string() + "'",
        output);
  }
  json results() const { return json::parse(read_all(root / "results/results.json")); }
};

// Gradescope's total: the sum of the tests' max_score.
double max_of(const json& r) {
  double m = 0;
  for (const json& t : r["tests"]) m += t["max_score"].get<double>();
  return m;
}

std::string staff_m2() {
  // The staff solution, moved into the namespace a team's file defines.
  const std::string text =
      read_all(convlab::test::source_dir() / "reference/solutions/m2/conv_cpu.cpp");
  return std::regex_replace(text, std::regex("convlab::solution"), "convlab::student");
}

fs::path data_or_skip() {
  std::string why;
  const auto data = convlab::test::real_data_dir(&why);
  if (!data) convlab::test::skip(why);
  return *data;
}

}  // namespace

TEST_CASE("the staff m2 solution gets full marks through run_autograder, the stub zero") {
  const fs::path data = data_or_skip();
  if (!fs::exists(convlab::test::source_dir() / "reference/solutions/m2/conv_cpu.cpp")) {
    convlab::test::skip("staff solutions are not part of this tree");
  }
  std::string output;
  {
    Autograder ag(staff_m2(), data);
    REQUIRE_MESSAGE(ag.run("CONVLAB_MILESTONE=m2", &output) == 0, output);
    const json r = ag.results();
    INFO(r.dump(2));
    CHECK(max_of(r) > 0);
    CHECK(r["score"].get<double>() == doctest::Approx(max_of(r)));
    CHECK(r["tests"].size() > 3);
    // The hidden model was graded, and its name is not shown to the student.
    CHECK(r.dump().find("hidden-gs") == std::string::npos);
  }
  {
    Autograder ag(read_all(convlab::test::source_dir() / "student/m2/conv_cpu.cpp"), data);
    REQUIRE_MESSAGE(ag.run("", &output) == 0, output);  // m2 is the default milestone
    const json r = ag.results();
    INFO(r.dump(2));
    CHECK(max_of(r) > 0);
    CHECK(r["score"].get<double>() == 0.0);
    CHECK(r.dump().find("student/m2/conv_cpu.cpp") != std::string::npos);
  }
}

TEST_CASE("when grading itself fails, the student still sees a results.json with the reason") {
  const fs::path data = data_or_skip();
  Autograder ag("// nothing\n", data);
  std::string output;

  // The grader is not installed.
  CHECK(ag.run("CONVLAB_BIN=/nonexistent/convlab", &output) == 0);
  json r = ag.results();
  CHECK(r["score"] == 0);
  CHECK(r["output"].get<std::string>().find("could not grade this submission") !=
        std::string::npos);
  CHECK(r["output"].get<std::string>().find("the grader is not installed") != std::string::npos);

  // The grader refuses its configuration (an unknown milestone): its error line is shown.
  fs::remove(ag.root / "results/results.json");
  CHECK(ag.run("CONVLAB_MILESTONE=m9", &output) == 0);
  r = ag.results();
  CHECK(r["score"] == 0);
  CHECK(r["output"].get<std::string>().find("convlab grade exited with status") !=
        std::string::npos);
  CHECK(r["output"].get<std::string>().find("m9") != std::string::npos);

  // No submission at all; the message survives quotes and newlines as valid JSON.
  fs::remove_all(ag.root / "submission");
  fs::remove(ag.root / "results/results.json");
  CHECK(ag.run("", &output) == 0);
  r = ag.results();
  CHECK(r["score"] == 0);
  CHECK(r["output"].get<std::string>().find("no submission folder") != std::string::npos);
  CHECK(r["tests"].empty());
}

}  // namespace test_gradescope
