// `convlab run` end to end: each bad input gives one clear error and a non-zero exit (never a
// crash), and a good run prints the original output shape.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>

#include "datasets/synthetic.hpp"
#include "reference/model/model.hpp"
#include "reference/model/safetensors.hpp"
#include "tests/support/test_support.hpp"

using namespace convlab;
namespace fs = std::filesystem;

namespace {

struct Result {
  int code = 0;
  std::string output;
};

Result convlab_run(const std::string& args, const std::string& env = "") {
  Result r;
  r.code = test::run_command(env + " " + test::convlab_binary().string() + " " + args, &r.output);
  return r;
}

std::size_t count_of(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (auto pos = text.find(what); pos != std::string::npos; pos = text.find(what, pos + 1)) ++n;
  return n;
}

// One clear error: non-zero exit, no signal, the expected words, said once, no internal error.
void check_clear_error(const Result& r, const std::string& words) {
  CAPTURE(r.output);
  CHECK(r.code != 0);
  CHECK(r.code < 128);
  CHECK(r.output.find(words) != std::string::npos);
  CHECK(count_of(r.output, "error") <= 2);  // "error:" once, plus possibly the word in the text
  CHECK(r.output.find("internal error") == std::string::npos);
}

// A directory with a small synthetic data set in the Fashion-MNIST file layout.
struct SyntheticData {
  test::TempDir dir;
  SyntheticData() {
    data::write_dataset_files(dir.path(), data::make_synthetic(64, 28, 28, 1),
                              data::make_synthetic(32, 28, 28, 2));
  }
  std::string env() const { return "CONVLAB_DATA=" + dir.path().string(); }
};

}  // namespace

TEST_CASE("bad command lines") {
  SyntheticData data;
  check_clear_error(convlab_run("run m9", data.env()), "unknown milestone 'm9'");
  check_clear_error(convlab_run("run m2 no-such-model 10", data.env()),
                    "unknown model 'no-such-model'");
  check_clear_error(convlab_run("run m2 ece408-high 33 --impl solution", data.env()),
                    "N must be between 1 and 32");
  check_clear_error(convlab_run("run m2 ece408-high 0 --impl solution", data.env()),
                    "N must be between 1");
  check_clear_error(convlab_run("run m2 ece408-high ten", data.env()), "N");
  check_clear_error(convlab_run("run m2 --impl teacher", data.env()), "--impl");
  check_clear_error(convlab_run("run m2 --variant best", data.env()),
                    "--variant applies to m3 and final");
  check_clear_error(convlab_run("run m2 --device gpu", data.env()), "--device chooses");
  check_clear_error(convlab_run("", data.env()), "subcommand");
}

TEST_CASE("missing or corrupt data files") {
  SUBCASE("missing directory") {
    check_clear_error(convlab_run("run m2 ece408-high 10 --data /nonexistent/fmnist"),
                      "dataset-fashion-mnist");
  }
  SUBCASE("truncated image file") {
    SyntheticData data;
    const fs::path f = data.dir.path() / "t10k-images-idx3-ubyte.gz";
    fs::resize_file(f, fs::file_size(f) / 2);
    check_clear_error(convlab_run("run m2 ece408-high 10 --impl solution", data.env()),
                      "t10k-images-idx3-ubyte.gz");
  }
  SUBCASE("wrong IDX magic number") {
    SyntheticData data;
    const fs::path f = data.dir.path() / "t10k-images-idx3-ubyte.gz";
    // A float-typed (0x0D) header where unsigned bytes (0x08) belong.
    REQUIRE(test::run_command("printf '\\000\\000\\015\\003' | gzip -c > " + f.string(), nullptr) ==
            0);
    check_clear_error(convlab_run("run m2 ece408-high 10 --impl solution", data.env()),
                      "t10k-images-idx3-ubyte.gz");
  }
  SUBCASE("not gzip at all") {
    SyntheticData data;
    std::ofstream(data.dir.path() / "t10k-labels-idx1-ubyte.gz") << "this is not gzip data";
    check_clear_error(convlab_run("run m2 ece408-high 10 --impl solution", data.env()),
                      "t10k-labels-idx1-ubyte.gz");
  }
}

TEST_CASE("bad model files") {
  SyntheticData data;
  test::TempDir dir;
  const Model good = load_model(test::source_dir() / "datasets/models/ece408-high.safetensors");

  SUBCASE("header lies about the fc shape") {
    SafetensorsFile f =
        read_safetensors(test::source_dir() / "datasets/models/ece408-high.safetensors");
    f.tensors.at(good.layers.at(4).weight_name) = Tensor({128, 7000});
    const fs::path p = dir.path() / "liar.safetensors";
    write_safetensors(p, f);
    check_clear_error(convlab_run("run m2 " + p.string() + " 10 --impl solution", data.env()),
                      "layer 4");
  }
  SUBCASE("truncated file") {
    const fs::path p = dir.path() / "cut.safetensors";
    fs::copy_file(test::source_dir() / "datasets/models/ece408-high.safetensors", p);
    fs::resize_file(p, fs::file_size(p) - 1000);
    check_clear_error(convlab_run("run m2 " + p.string() + " 10 --impl solution", data.env()),
                      "cut.safetensors");
  }
  SUBCASE("not a model at all") {
    const fs::path p = dir.path() / "junk.safetensors";
    std::ofstream(p) << "junk";
    check_clear_error(convlab_run("run m2 " + p.string() + " 10 --impl solution", data.env()),
                      "junk.safetensors");
  }
}

TEST_CASE("an unwritten stub tells the student which file to edit") {
  SyntheticData data;
  const Result r = convlab_run("run m2 ece408-high 10 --impl student", data.env());
  check_clear_error(r, "student/m2/conv_cpu.cpp");
  CHECK(r.output.find("milestones/m2/README.md") != std::string::npos);
}

#ifndef CONVLAB_HAVE_CUDA
TEST_CASE("GPU milestones say how to get a CUDA build") {
  SyntheticData data;
  check_clear_error(convlab_run("run m3", data.env()), "built without CUDA");
}
#endif

TEST_CASE("m2 with the staff solution prints the original four lines and a JSON report") {
  std::string why;
  if (!test::real_data_dir(&why)) test::skip(why);
  test::TempDir dir;
  const fs::path json_path = dir.path() / "run.json";
  const Result r =
      convlab_run("run m2 ece408-low 100 --impl solution --json " + json_path.string());
  CAPTURE(r.output);
  REQUIRE(r.code == 0);
  const Model m = load_model(test::source_dir() / "datasets/models/ece408-low.safetensors");
  const double acc = static_cast<double>(m.expected_correct.at(100)) / 100;
  const std::regex shape(
      "Loading fashion-mnist data\\.\\.\\. done\nLoading model\\.\\.\\. done\n"
      "Op Time: [0-9]+\\.[0-9]{6}\nCorrectness: ([0-9.]+) Model: ece408-low\n");
  std::smatch match;
  REQUIRE(std::regex_match(r.output, match, shape));
  CHECK(std::stod(match[1].str()) == acc);

  std::ifstream in(json_path);
  REQUIRE(in);
  const auto j = nlohmann::json::parse(in);
  CHECK(j.at("milestone") == "m2");
  CHECK(j.at("images") == 100);
  CHECK(j.at("runs").at(0).at("correct") == m.expected_correct.at(100));
  CHECK(j.at("runs").at(0).at("matches_expected") == true);
  CHECK(j.at("runs").at(0).at("conv_layers").size() == 1);
}

TEST_CASE("the original figures at 10000 images: m2 0.8562 and 0.629, m1 on the CPU 0.8673") {
  std::string why;
  if (!test::real_data_dir(&why)) test::skip(why);
  const std::pair<std::string, std::string> runs[] = {
      {"run m2 ece408-high 10000 --impl solution", "Correctness: 0.8562 Model: ece408-high\n"},
      {"run m2 ece408-low 10000 --impl solution", "Correctness: 0.629 Model: ece408-low\n"},
      {"run m1 baseline 10000 --device cpu", "Correctness: 0.8673 Model: baseline\n"}};
  for (const auto& [args, last_line] : runs) {
    const Result r = convlab_run(args);
    CAPTURE(r.output);
    CHECK(r.code == 0);
    REQUIRE(r.output.size() >= last_line.size());
    CHECK(r.output.substr(r.output.size() - last_line.size()) == last_line);
  }
}
