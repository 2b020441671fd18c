// The one parser of milestones/<id>/checks.json: every shipped milestone reads, ids come from
// the folders in course order, and a bad file gives one error naming the file and the field.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "reference/core/error.hpp"
#include "reference/milestones/milestone.hpp"
#include "tests/support/test_support.hpp"

namespace test_milestone_file {

namespace fs = std::filesystem;
using convlab::Error;
using convlab::Milestone;
using nlohmann::json;

namespace {

json shipped(const std::string& id) {
  std::ifstream in(convlab::test::source_dir() / "milestones" / id / "checks.json");
  return json::parse(in);
}

// Writes `doc` as milestones/<id>/checks.json under `root`; returns the parser's error.
std::string error_of(const fs::path& root, const std::string& id, const std::string& doc) {
  fs::create_directories(root / "milestones" / id);
  std::ofstream(root / "milestones" / id / "checks.json") << doc;
  try {
    convlab::load_milestone(root, id);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("every shipped milestone parses into the typed model") {
  const fs::path root = convlab::test::source_dir();
  const std::vector<std::string> ids = convlab::milestone_ids(root);
  REQUIRE(ids == std::vector<std::string>{"m1", "m2", "m3", "final"});
  CHECK(convlab::graded_milestone_ids(root) == std::vector<std::string>{"m2", "m3", "final"});
  const Milestone m1 = convlab::load_milestone(root, "m1");
  CHECK_FALSE(m1.graded());
  CHECK_FALSE(m1.grading.has_value());
  CHECK(m1.expected("baseline", 10000, "gpu") == 8673);
  const Milestone fin = convlab::load_milestone(root, "final");
  CHECK(fin.ranked_variant == fin.default_variant);
  CHECK(fin.timed_runs == 3);
  REQUIRE(fin.grading.has_value());
  REQUIRE(fin.grading->elementwise.has_value());
  CHECK(fin.grading->elementwise->shapes.size() == fin.grading->elementwise->why.size());
  CHECK(fin.grading->memcheck.has_value());
  REQUIRE(fin.ranking.has_value());
  CHECK(fin.ranking->rule == "stddev_from_median");
  CHECK(fin.ranking->threshold_ms == std::make_pair(1.0, 8.0));
  CHECK(fin.elementwise_atol() == 1e-4);
  const Milestone m2 = convlab::load_milestone(root, "m2");
  CHECK_FALSE(m2.ranking.has_value());
  // Its CPU time is shown, never ranked: one timed run, as the original printed.
  CHECK(m2.timed_runs == 1);
}

TEST_CASE("an unknown id lists the milestones the folders hold") {
  const std::string message = [] {
    try {
      convlab::load_milestone(convlab::test::source_dir(), "m9");
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string();
  }();
  CHECK(message == "unknown milestone 'm9': choose one of m1, m2, m3, final");
}

TEST_CASE("a bad checks.json names the file and the field") {
  convlab::test::TempDir dir;
  const std::string file = (dir.path() / "milestones" / "m2" / "checks.json").string();
  const auto bad = [&](const std::function<void(json&)>& edit) {
    json j = shipped("m2");
    edit(j);
    return error_of(dir.path(), "m2", j.dump());
  };
  const std::string prefix = "malformed milestone file " + file + ": ";
  CHECK(bad([](json&) {}).empty());
  CHECK(bad([](json& j) { j.erase("title"); }) == prefix + "title: missing");
  CHECK(bad([](json& j) { j["default_images"] = "many"; }) ==
        prefix + "default_images: expected an integer");
  CHECK(bad([](json& j) { j["checks"][2]["images"] = 1.5; }) ==
        prefix + "checks[2].images: expected an integer");
  CHECK(bad([](json& j) { j["checks"][0].erase("model"); }) == prefix + "checks[0].model: missing");
  CHECK(bad([](json& j) { j["team_writes"] = json::array({"student/m2/conv_cpu.cpp"}); }) ==
        prefix + "team_writes: comes from reference/conv/variants.def; remove it here");
  CHECK(bad([](json& j) { j["team_folders"] = json::array({"student/m2/cpu/"}); }) ==
        prefix + "team_folders: comes from reference/conv/variants.def; remove it here");
  CHECK(bad([](json& j) { j["variants"] = json::array(); }) ==
        prefix + "variants: comes from reference/conv/variants.def; remove it here");
  CHECK(bad([](json& j) { j["milestone"] = "m3"; }) ==
        prefix + "milestone: says 'm3', but its folder is 'm2'");
  CHECK(bad([](json& j) { j["default_device"] = "tpu"; }) ==
        prefix + "default_device: 'tpu' is not one of its devices");
  CHECK(bad([](json& j) { j["grading"]["elementwise"]["atol"] = "tight"; }) ==
        prefix + "grading.elementwise.atol: expected a number");
  CHECK(bad([](json& j) {
          j["grading"]["elementwise"]["shapes"][1]["K"] = 99;
        }).starts_with(prefix + "grading.elementwise.shapes[1]: "));
  CHECK(bad([](json& j) { j["grading"]["memcheck"] = json::array(); }) ==
        prefix + "grading.memcheck: expected an object");
  CHECK(bad([](json& j) {
          j["ranking"] = {{"threshold", {{"full_ms", 1}}}};
        }) == prefix + "ranking.threshold.zero_ms: missing");
  CHECK(bad([](json& j) { j["ranked_variant"] = "fastest"; }) ==
        prefix + "ranked_variant: 'fastest' is not one of its variants");
  CHECK(bad([](json& j) {
          j["grading"]["other_variants"] = {{"variant_points", {{"fastest", 3}}}};
        }) == prefix +
                  "grading.other_variants.variant_points: 'fastest' is not one of its variants "
                  "(convlab variants lists them)");
  CHECK(bad([](json& j) {
          j["grading"]["other_variants"] = {{"variant_points", {{"x", "many"}}}};
        }) == prefix + "grading.other_variants.variant_points.x: must be a number >= 0");
  CHECK(error_of(dir.path(), "m2", "{\"milestone\": ").starts_with(prefix + "not JSON ("));
  CHECK(error_of(dir.path(), "m2", "[1, 2]") == prefix + "the file: expected an object");
}

}  // namespace test_milestone_file
