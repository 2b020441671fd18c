// The check harness of this build (convlab-check, linked with this tree's student/ stubs): its
// result goes to $CONVLAB_RESULT_FD only, stubs report not_implemented naming their file and
// handout section, bad input reports an error, and nothing of it reaches stdout.
#include <doctest/doctest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "tests/support/test_support.hpp"

using namespace convlab;
using nlohmann::json;
namespace fs = std::filesystem;

namespace {

struct Run {
  int code = 0;
  std::string output;  // stdout and stderr
  std::string result;  // what reached the result channel
  json doc;
};

Run check(const std::string& args) {
  test::TempDir dir;
  const fs::path result = dir.path() / "result.json";
  Run r;
  r.code = test::run_command("CONVLAB_RESULT_FD=3 " + std::string(CONVLAB_CHECK_BINARY) + " " +
                                 args + " 3>" + result.string(),
                             &r.output);
  std::ifstream in(result);
  std::stringstream ss;
  ss << in.rdbuf();
  r.result = ss.str();
  if (!r.result.empty()) r.doc = json::parse(r.result);
  return r;
}

std::string models() {
  return (test::source_dir() / "datasets" / "models").string();
}

}  // namespace

TEST_CASE("without a result channel the harness refuses to run") {
  std::string out;
  const int code = test::run_command(std::string(CONVLAB_CHECK_BINARY) + " info", &out);
  CHECK(code == 2);
  CHECK(out.find("CONVLAB_RESULT_FD") != std::string::npos);
}

TEST_CASE("info says whether a GPU is usable") {
  const Run r = check("info");
  REQUIRE(r.doc.is_object());
  CHECK(r.doc.at("schema") == "convlab-check/1");
  CHECK(r.doc.at("task") == "info");
  const std::string status = r.doc.at("status");
  if (status == "ok") {
    CHECK(r.code == 0);
    CHECK(!r.doc.at("gpu").at("name").get<std::string>().empty());
  } else {
    CHECK(status == "no_gpu");
    CHECK(r.code == 1);
    CHECK(!r.doc.at("message").get<std::string>().empty());
  }
}

TEST_CASE("the m2 stub reports not_implemented with its file and handout section") {
  std::string why;
  const auto data = test::real_data_dir(&why);
  const std::string images = data ? (*data / "t10k-images-idx3-ubyte.gz").string() : "";
  std::vector<std::string> cases = {"elementwise --variant cpu --seed 3 --shape 1,2,1,8,8,3"};
  if (data) {
    cases.push_back("network --model " + models() + "/ece408-high.safetensors --images " + images +
                    " --variant cpu --runs 1");
  }
  for (const std::string& args : cases) {
    CAPTURE(args);
    const Run r = check(args);
    CHECK(r.code == 1);
    REQUIRE(r.doc.is_object());
    CHECK(r.doc.at("status") == "not_implemented");
    const std::string msg = r.doc.at("message");
    CHECK(msg.find("student/m2/conv_cpu.cpp") != std::string::npos);
    CHECK(msg.find("milestones/m2/README.md") != std::string::npos);
    // The result never reaches stdout or stderr.
    CHECK(r.output.find("not_implemented") == std::string::npos);
  }
}

TEST_CASE("a GPU variant without a usable GPU, or a GPU stub, never reports ok") {
  const Run r = check("elementwise --variant best --seed 3 --shape 1,2,1,8,8,3");
  REQUIRE(r.doc.is_object());
  const std::string status = r.doc.at("status");
  CAPTURE(r.result);
  CHECK(status != "ok");
  CHECK(r.code == 1);
  if (status == "not_implemented") {
    CHECK(r.doc.at("message").get<std::string>().find("student/final/5_best.cu") !=
          std::string::npos);
  }
}

TEST_CASE("bad input is an error in the result, with a message") {
  for (const char* args :
       {"", "bogus", "network --variant cpu", "elementwise --variant cpu --seed 1",
        "elementwise --variant cpu --seed x --shape 1,1,1,5,5,3",
        "elementwise --variant cpu --seed 1 --shape 1,1,1,5,5",
        "elementwise --variant cpu --seed 1 --shape 1,1,1,3,3,5",
        "elementwise --variant nosuch --seed 1 --shape 1,1,1,5,5,3",
        "network --model /nonexistent.safetensors --images /nonexistent.gz --variant cpu",
        "info --frobnicate"}) {
    CAPTURE(args);
    const Run r = check(args);
    CHECK(r.code == 1);
    REQUIRE(r.doc.is_object());
    CHECK(r.doc.at("status") == "error");
    CHECK(!r.doc.at("message").get<std::string>().empty());
  }
}
