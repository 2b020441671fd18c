// convlab-calibrate: makes a model file score an exact count on the Fashion-MNIST test set with
// a guaranteed minimum logit margin, and records what any correct implementation must get.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "reference/core/error.hpp"
#include "reference/data/fashion_mnist.hpp"
#include "reference/model/model.hpp"
#include "reference/model/safetensors.hpp"
#include "tools/calibrate/calibrate.hpp"
#include "tools/train/sha256.hpp"
#include "tools/train/trainer.hpp"

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

struct Options {
  std::string from, to, name, out;
  std::optional<std::int64_t> target;
  double min_margin = 1e-3;
  int scan_points = 20;
  std::optional<double> fixed_t;
  std::optional<std::string> data_flag;
};

void add_options(CLI::App& app, Options& o) {
  app.add_option("--from", o.from, "Model A (t = 0); alone: the model to repair")->required();
  app.add_option("--to", o.to, "Model B (t = 1): search weights (1-t)A + tB");
  app.add_option("--target-correct", o.target, "Correct predictions wanted on the test set")
      ->needs("--to");
  app.add_option("--name", o.name, "Name of the calibrated model")->required();
  app.add_option("--min-margin", o.min_margin, "Smallest top-1/top-2 logit margin allowed")
      ->check(CLI::PositiveNumber);
  app.add_option("--out", o.out, "Output model file")->required();
  app.add_option("--scan-points", o.scan_points, "Coarse steps of t before bisection")
      ->check(CLI::Range(1, 1000));
  app.add_option("--t", o.fixed_t,
                 "Use this t (a value an earlier search printed) instead of searching; it must "
                 "still give the target count")
      ->needs("--to")
      ->check(CLI::Range(0.0, 1.0));
  app.add_option("--data", o.data_flag, "Fashion-MNIST directory");
}

json provenance_of(const convlab::Model& m) {
  if (m.provenance.empty()) return nullptr;
  const json j = json::parse(m.provenance, nullptr, false);
  return j.is_discarded() ? json(m.provenance) : j;
}

void say(const std::string& line) {
  std::printf("%s\n", line.c_str());
  std::fflush(stdout);
}

json initial_provenance(const Options& o, const convlab::data::Dataset& test,
                        const convlab::Model& a) {
  return {
      {"tool", "convlab-calibrate"},
      {"calibrator_version", std::string(convlab::tools::kCalibratorVersion)},
      {"trainer_version", std::string(convlab::tools::kTrainerVersion)},
      {"evaluation", "double arithmetic on the float32 weights and inputs"},
      {"test_data",
       {{"count", test.count},
        {"images_sha256", convlab::tools::sha256_hex(test.pixels)},
        {"labels_sha256", convlab::tools::sha256_hex(test.labels)}}},
      {"from", {{"file", fs::path(o.from).filename().string()}, {"provenance", provenance_of(a)}}}};
}

// Step 1 with --to: the weights (1-t)A + tB that give the target count, at a given or found t.
convlab::Model interpolate_to_target(const Options& o, const convlab::data::Dataset& test,
                                     const convlab::Model& a, json& prov) {
  const std::int64_t n = test.count;
  const convlab::Model b = convlab::load_model(o.to);
  convlab::tools::TargetSearch found;
  if (o.fixed_t) {
    found.t = *o.fixed_t;
    found.correct = convlab::tools::evaluate_exact(convlab::tools::interpolate(a, b, *o.fixed_t),
                                                   test, n, false)
                        .correct(n);
    found.evaluations = 1;
    if (found.correct != *o.target) {
      throw convlab::Error("--t gives " + std::to_string(found.correct) + " correct, not " +
                           std::to_string(*o.target));
    }
  } else {
    say("Searching t for " + std::to_string(*o.target) + " correct of " + std::to_string(n) +
        " between " + o.from + " (t=0) and " + o.to + " (t=1)");
    found = convlab::tools::find_target(a, b, test, n, *o.target, o.scan_points, say);
  }
  prov["to"] = {{"file", fs::path(o.to).filename().string()}, {"provenance", provenance_of(b)}};
  prov["t"] = found.t;
  prov["target_correct"] = *o.target;
  prov["search_evaluations"] = found.evaluations;
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.17g", found.t);
  say(std::string("found t = ") + buf + " after " + std::to_string(found.evaluations) +
      " evaluations");
  return convlab::tools::interpolate(a, b, found.t);
}

struct Repaired {
  convlab::tools::Evaluation after;  ///< the exact network on the repaired weights
  int steps = 0;
};

// Step 2: margin repair, then an independent exact evaluation of the repaired weights.
Repaired repair_and_check(const Options& o, const convlab::data::Dataset& test,
                          convlab::Model& model, json& prov) {
  const std::int64_t n = test.count;
  const convlab::tools::Evaluation before = convlab::tools::evaluate_exact(model, test, n, true);
  char buf[256];
  std::snprintf(buf, sizeof buf, "before repair: %lld correct, min margin %.3e, max |logit| %.3f",
                static_cast<long long>(before.correct(n)), before.min_margin(),
                before.max_abs_logit());
  say(buf);
  const convlab::tools::RepairResult rep =
      convlab::tools::repair_margins(model, before, o.min_margin, say);

  const convlab::tools::Evaluation after = convlab::tools::evaluate_exact(model, test, n, false);
  if (after.predictions != before.predictions) {
    throw convlab::Error("margin repair changed a prediction (internal error)");
  }
  if (o.target && after.correct(n) != *o.target) {
    throw convlab::Error("calibrated count " + std::to_string(after.correct(n)) +
                         " is not the target " + std::to_string(*o.target));
  }
  if (after.min_margin() < o.min_margin) {
    throw convlab::Error("min margin after repair is below the bound (internal error)");
  }
  prov["repair"] = {{"bound", o.min_margin},
                    {"steps", rep.steps},
                    {"images_below", rep.images_below},
                    {"min_margin_before", rep.min_margin_before},
                    {"min_margin_after", after.min_margin()},
                    {"layer", "last fc (weights and bias) only"}};
  return {after, rep.steps};
}

// Step 3: a float32 evaluation must predict exactly what the exact network predicts.
void check_float32(const convlab::data::Dataset& test, const convlab::Model& model,
                   const convlab::tools::Evaluation& after, json& prov) {
  const std::int64_t n = test.count;
  std::vector<float> logits32;
  const std::vector<int> preds32 = convlab::tools::predict_float32(model, test, n, &logits32);
  std::int64_t differ = 0;
  double max_diff = 0.0;
  for (std::int64_t i = 0; i < n; ++i) {
    if (preds32[static_cast<std::size_t>(i)] != after.predictions[static_cast<std::size_t>(i)])
      ++differ;
  }
  for (std::size_t k = 0; k < logits32.size(); ++k) {
    max_diff = std::max(max_diff, std::abs(static_cast<double>(logits32[k]) - after.logits[k]));
  }
  char buf[256];
  std::snprintf(buf, sizeof buf,
                "float32 check: %lld predictions differ, largest logit difference %.3e",
                static_cast<long long>(differ), max_diff);
  say(buf);
  if (differ != 0) throw convlab::Error("float32 predictions differ from the exact network");
  prov["float32_check"] = {{"predictions_identical", true}, {"max_logit_difference", max_diff}};
}

// Step 4: the model file with its expected counts, read back to prove it reproduces them.
void write_and_reread(const std::string& out, const convlab::data::Dataset& test,
                      convlab::Model& model, const convlab::tools::Evaluation& after,
                      const json& prov) {
  const std::int64_t n = test.count;
  json correct = json::object();
  for (const std::int64_t k : {100, 1000, 2000, 10000}) {
    if (k <= n) {
      correct[std::to_string(k)] = after.correct(k);
      model.expected_correct[k] = after.correct(k);
    }
  }
  model.min_margin = after.min_margin();
  model.provenance = prov.dump();
  const json expected = {{"correct", correct},
                         {"min_margin", after.min_margin()},
                         {"max_abs_logit", after.max_abs_logit()}};
  convlab::save_model(out, model);
  // save_model writes the fields Model holds; add max_abs_logit to the same key.
  convlab::SafetensorsFile file = convlab::read_safetensors(out);
  file.metadata["convlab.expected"] = expected.dump();
  convlab::write_safetensors(out, file);

  const convlab::Model reread = convlab::load_model(out);
  const convlab::tools::Evaluation check = convlab::tools::evaluate_exact(reread, test, n, false);
  if (check.predictions != after.predictions) {
    throw convlab::Error("the written file does not reproduce the calibrated predictions");
  }
}

void calibrate(const Options& o) {
  using clock = std::chrono::steady_clock;
  const auto t_start = clock::now();
  const fs::path dir =
      convlab::data::data_dir(o.data_flag ? std::optional<fs::path>(*o.data_flag) : std::nullopt);
  const auto test = convlab::data::load_fashion_mnist(dir, convlab::data::Split::test);
  const std::int64_t n = test.count;
  const convlab::Model a = convlab::load_model(o.from);
  json prov = initial_provenance(o, test, a);
  convlab::Model model = o.to.empty() ? a : interpolate_to_target(o, test, a, prov);
  model.name = o.name;

  const Repaired repaired = repair_and_check(o, test, model, prov);
  const convlab::tools::Evaluation& after = repaired.after;
  check_float32(test, model, after, prov);
  write_and_reread(o.out, test, model, after, prov);

  char buf[512];
  std::snprintf(buf, sizeof buf,
                "wrote %s: %lld/%lld correct (100: %lld, 1000: %lld, 2000: %lld), min margin "
                "%.6e, max |logit| %.4f, %d repair steps, %.1f s",
                o.out.c_str(), static_cast<long long>(after.correct(n)), static_cast<long long>(n),
                static_cast<long long>(after.correct(std::min<std::int64_t>(100, n))),
                static_cast<long long>(after.correct(std::min<std::int64_t>(1000, n))),
                static_cast<long long>(after.correct(std::min<std::int64_t>(2000, n))),
                after.min_margin(), after.max_abs_logit(), repaired.steps,
                std::chrono::duration<double>(clock::now() - t_start).count());
  say(buf);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Calibrate a convlab model: exact test-set count, minimum logit margin"};
  Options o;
  add_options(app, o);
  CLI11_PARSE(app, argc, argv);
  if (!o.to.empty() && !o.target) {
    std::fprintf(stderr, "convlab-calibrate: --to needs --target-correct\n");
    return 2;
  }
  try {
    calibrate(o);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "convlab-calibrate: %s\n", e.what());
    return 1;
  }
  return 0;
}
