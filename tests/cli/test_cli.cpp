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
#include "reference/conv/variants.hpp"
#include "reference/core/error.hpp"
#include "tests/support/code_under_test.hpp"
#include "tests/support/test_support.hpp"
#ifdef CONVLAB_HAVE_CUDA
#include "reference/core/cuda_check.hpp"
#endif

namespace test_cli {

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

// " --impl solution" where the staff solutions are built in, else "" (the team's code).
std::string impl_flag() {
  return solutions_available() ? " --impl solution" : "";
}

// Whether the team's m2 is still the stub (a real call on real buffers).
bool m2_stub_unwritten() {
  const ConvShape s{1, 1, 1, 2, 2, 1};
  float x[4] = {1, 2, 3, 4}, k[1] = {1}, y[4] = {};
  try {
    cpu_conv(Impl::student)(y, x, k, s);
  } catch (const NotImplemented&) {
    return true;
  }
  return false;
}

// Whether m2 code is there to run (the staff solution or the team's); notes it when not.
bool m2_under_test() {
  return test::cpu_conv_under_test() != nullptr;
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
  check_clear_error(convlab_run("run m2 ece408-high 33", data.env()),
                    "N must be between 1 and 32");
  check_clear_error(convlab_run("run m2 ece408-high 0", data.env()),
                    "N must be between 1");
  // Options are checked before any data is loaded.
  // A final variant is not one of m3's.
  const std::string other = "run m3 --variant " + variant_ids("final", "gpu").back();
  for (const std::string& args : {std::string("run m2 ece408-high 0"), std::string("run m2 --runs 0"),
                                  std::string("run m2 --runs 500"),
                                  std::string("run m2 --models /nonexistent"),
                                  std::string("run m2 /nonexistent.safetensors"), other}) {
    const Result r = convlab_run(args, data.env());
    CAPTURE(args);
    check_clear_error(r, "");
    CHECK(r.output.find("Loading") == std::string::npos);
  }
  check_clear_error(convlab_run("run m2 /nonexistent.safetensors", data.env()),
                    "model file /nonexistent.safetensors does not exist");
  check_clear_error(convlab_run("run m2 --models /nonexistent", data.env()),
                    "--models /nonexistent is not a directory");
  check_clear_error(convlab_run("run m2 ece408-high ten", data.env()), "N");
  check_clear_error(convlab_run("run m2 --impl teacher", data.env()), "--impl");
  check_clear_error(convlab_run("run m2 --variant " + variant_ids({}, "gpu").back(), data.env()),
                    "--variant applies to m3 and final");
  check_clear_error(convlab_run("run m2 --device gpu", data.env()), "--device chooses");
  check_clear_error(convlab_run("", data.env()), "subcommand");
}

TEST_CASE("every bad argument exits 1, as documented, and --help lists the valid values") {
  for (const char* args : {"run", "run m2 --no-such-option", "run m2 ece408-high ten",
                           "run m3 --variant fast", "check", "check m9", "check m2 --seed -1",
                           "bench --no-such-option", "run m2 --device tpu"}) {
    const Result r = convlab_run(args);
    CAPTURE(args);
    CAPTURE(r.output);
    CHECK(r.code == 1);
  }
  // Every GPU variant of the declarations is a valid value, named where a value is wrong.
  const Result bad_variant = convlab_run("run m3 --variant fast");
  CHECK(bad_variant.output.find("all") != std::string::npos);
  const Result help = convlab_run("run --help");
  CHECK(help.code == 0);
  const std::string check_help = convlab_run("check --help").output;
  for (const std::string& name : variant_ids({}, "gpu")) {
    CAPTURE(name);
    CHECK(bad_variant.output.find(name) != std::string::npos);
    CHECK(help.output.find(name) != std::string::npos);
    CHECK(check_help.find(name) != std::string::npos);
  }
  CHECK(convlab_run("--version").code == 0);
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
    check_clear_error(convlab_run("run m2 ece408-high 10", data.env()),
                      "t10k-images-idx3-ubyte.gz");
  }
  SUBCASE("wrong IDX magic number") {
    SyntheticData data;
    const fs::path f = data.dir.path() / "t10k-images-idx3-ubyte.gz";
    // A float-typed (0x0D) header where unsigned bytes (0x08) belong.
    REQUIRE(test::run_command("printf '\\000\\000\\015\\003' | gzip -c > " + f.string(), nullptr) ==
            0);
    check_clear_error(convlab_run("run m2 ece408-high 10", data.env()),
                      "t10k-images-idx3-ubyte.gz");
  }
  SUBCASE("not gzip at all") {
    SyntheticData data;
    std::ofstream(data.dir.path() / "t10k-labels-idx1-ubyte.gz") << "this is not gzip data";
    check_clear_error(convlab_run("run m2 ece408-high 10", data.env()),
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
    check_clear_error(convlab_run("run m2 " + p.string() + " 10", data.env()),
                      "layer 4");
  }
  SUBCASE("truncated file") {
    const fs::path p = dir.path() / "cut.safetensors";
    fs::copy_file(test::source_dir() / "datasets/models/ece408-high.safetensors", p);
    fs::resize_file(p, fs::file_size(p) - 1000);
    check_clear_error(convlab_run("run m2 " + p.string() + " 10", data.env()),
                      "cut.safetensors");
  }
  SUBCASE("not a model at all") {
    const fs::path p = dir.path() / "junk.safetensors";
    std::ofstream(p) << "junk";
    check_clear_error(convlab_run("run m2 " + p.string() + " 10", data.env()),
                      "junk.safetensors");
  }
}

TEST_CASE("an unwritten stub tells the student which file to edit") {
  if (!m2_stub_unwritten()) {
    MESSAGE("student/m2/conv_cpu.cpp is written: no stub message to check");
    return;
  }
  SyntheticData data;
  const Result r = convlab_run("run m2 ece408-high 10", data.env());
  check_clear_error(r, "student/m2/conv_cpu.cpp");
  CHECK(r.output.find("milestones/m2/README.md") != std::string::npos);
}

#ifndef CONVLAB_HAVE_CUDA
TEST_CASE("GPU milestones say how to get a CUDA build") {
  SyntheticData data;
  check_clear_error(convlab_run("run m3", data.env()), "built without CUDA");
  check_clear_error(convlab_run("check m3", data.env()), "needs a CUDA GPU");
}
#else
TEST_CASE("without a usable GPU, GPU milestones say they need one, before loading anything") {
  std::string why;
  if (cuda_device_available(&why)) {
    MESSAGE("a GPU is usable here: nothing to check");
    return;
  }
  SyntheticData data;
  for (const char* args : {"run m3", "run final --variant all", "run m1 --device gpu",
                           "check m3", "check final --variant all"}) {
    const Result r = convlab_run(args, data.env());
    CAPTURE(args);
    check_clear_error(r, "needs a CUDA GPU: ");
    CHECK(r.output.find("Loading") == std::string::npos);
    CHECK(r.output.find("cudaError") == std::string::npos);
  }
}
#endif

TEST_CASE("convlab check m2: the code under test against the library convolution") {
  const bool stub = m2_stub_unwritten();
  if (stub && !solutions_available()) {
    // The stub says what to write, exit 1; the suite then reports Skipped.
    const Result r = convlab_run("check m2 --seed 11");
    check_clear_error(r, "student/m2/conv_cpu.cpp");
    (void)test::cpu_conv_under_test();  // notes the stub's message
    return;
  }
  const Result r = convlab_run("check m2 --seed 11" + impl_flag());
  CAPTURE(r.output);
  CHECK(r.code == 0);
  CHECK(r.output.find("seed 11") != std::string::npos);
  CHECK(r.output.find("K=7") != std::string::npos);
  CHECK(r.output.find("every output right on 8 shapes") != std::string::npos);
  CHECK(r.output.find("Next: convlab run m2") != std::string::npos);
  // The same seed, the same shapes; another seed, others.
  CHECK(convlab_run("check m2 --seed 11" + impl_flag()).output == r.output);
  CHECK(convlab_run("check m2 --seed 12" + impl_flag()).output != r.output);
  // Without --seed a fresh one is drawn and printed.
  const Result fresh = convlab_run("check m2" + impl_flag());
  CHECK(fresh.output.find("--seed ") != std::string::npos);
}

TEST_CASE("m2 prints the original four lines and a JSON report") {
  std::string why;
  if (!test::real_data_dir(&why)) test::skip(why);
  if (!m2_under_test()) return;
  test::TempDir dir;
  const fs::path json_path = dir.path() / "run.json";
  const Result r =
      convlab_run("run m2 ece408-low 100" + impl_flag() + " --json " + json_path.string());
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
  std::vector<std::pair<std::string, std::string>> runs = {
      {"run m1 baseline 10000 --device cpu", "Correctness: 0.8673 Model: baseline\n"}};
  if (m2_under_test()) {
    runs.emplace_back("run m2 ece408-high 10000" + impl_flag(),
                      "Correctness: 0.8562 Model: ece408-high\n");
    runs.emplace_back("run m2 ece408-low 10000" + impl_flag(),
                      "Correctness: 0.629 Model: ece408-low\n");
  }
  for (const auto& [args, last_line] : runs) {
    const Result r = convlab_run(args);
    CAPTURE(r.output);
    CHECK(r.code == 0);
    REQUIRE(r.output.size() >= last_line.size());
    CHECK(r.output.substr(r.output.size() - last_line.size()) == last_line);
  }
}

}  // namespace test_cli
