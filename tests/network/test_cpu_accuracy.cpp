// The committed models give exactly their recorded correct counts on the real test set.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "reference/conv/library_conv.hpp"
#include "reference/conv/variants.hpp"
#include "reference/data/fashion_mnist.hpp"
#include "reference/network/network.hpp"
#include "tests/support/code_under_test.hpp"
#include "tests/support/test_support.hpp"

namespace test_cpu_accuracy {

using namespace convlab;
namespace fs = std::filesystem;

namespace {

// Correct counts on every prefix size the model records, from one run over the largest.
void check_counts(const Model& model, const CpuConvCall& conv) {
  REQUIRE_FALSE(model.expected_correct.empty());
  const std::int64_t n = model.expected_correct.rbegin()->first;
  const data::Dataset& ds = test::real_test_set();
  const NetworkRun run = run_network_cpu(model, ds.images(n, model.input_scale), conv);
  const std::vector<int> pred = predictions(run.output);
  for (const auto& [images, expected] : model.expected_correct) {
    CAPTURE(images);
    const std::span<const int> head(pred.data(), static_cast<std::size_t>(images));
    CHECK(count_correct(head, ds.labels) == expected);
  }
}

}  // namespace

TEST_CASE("the four committed models are present, with the calibrated 10000-image counts") {
  const std::map<std::string, std::int64_t> calibrated{
      {"baseline", 8673}, {"ece408-high", 8562}, {"ece408-low", 6290}};
  int found = 0;
  for (const fs::path& f : test::shipped_models()) {
    const Model m = load_model(f);
    CHECK(m.name == f.stem().string());
    REQUIRE(m.min_margin.has_value());
    CHECK(*m.min_margin >= 1e-3);
    if (auto it = calibrated.find(m.name); it != calibrated.end()) {
      ++found;
      CHECK(m.expected_correct.at(10000) == it->second);
    }
  }
  CHECK(found == 3);
  CHECK(test::shipped_models().size() >= 4);
}

TEST_CASE("CPU reference network: exact expected counts for every committed model") {
  for (const fs::path& f : test::shipped_models()) {
    CAPTURE(f.filename().string());
    check_counts(load_model(f), conv_forward_reference);
  }
}

TEST_CASE("the m2 convolution under test: exact expected counts for ece408-low") {
  const CpuConvFn conv = test::cpu_conv_under_test();
  if (conv == nullptr) return;
  check_counts(load_model(test::source_dir() / "datasets/models/ece408-low.safetensors"), conv);
}

TEST_CASE("milestone checks agree with the counts recorded in the model files") {
  for (const char* id : {"m1", "m2", "m3", "final"}) {
    std::ifstream in(test::source_dir() / "milestones" / id / "checks.json");
    REQUIRE(in);
    const auto j = nlohmann::json::parse(in);
    for (const auto& c : j.at("checks")) {
      const std::string name = c.at("model");
      CAPTURE(id);
      CAPTURE(name);
      const Model m = load_model(test::source_dir() / "datasets/models" / (name + ".safetensors"));
      CHECK(m.expected_correct.at(c.at("images").get<std::int64_t>()) ==
            c.at("expected_correct").get<std::int64_t>());
    }
  }
}

}  // namespace test_cpu_accuracy
