#include "grader/grade/grading_plan.hpp"

#include <fnmatch.h>

#include <algorithm>

#include "reference/conv/variant_table.hpp"
#include "reference/core/error.hpp"
#include "reference/model/model.hpp"

namespace convlab::grader {

namespace fs = std::filesystem;

namespace {

std::string points_text(double p) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", p);
  return buf;
}

MilestoneSpec load_one(const fs::path& root, const std::string& id) {
  MilestoneSpec spec;
  spec.milestone = load_milestone(root, id);
  const Milestone& ms = spec.milestone;
  spec.gpu = ms.default_device == "gpu";
  spec.variants = ms.variants;
  if (spec.variants.empty()) spec.variants = variant_ids(ms.id, "cpu");  // m2's, declared
  spec.ranked_variant = ms.ranked_variant.empty() ? spec.variants.front() : ms.ranked_variant;
  // Ranked one first (the parser checked that it is one of the variants).
  const auto ranked = std::find(spec.variants.begin(), spec.variants.end(), spec.ranked_variant);
  std::rotate(spec.variants.begin(), ranked, ranked + 1);
  spec.timed_runs = ms.timed_runs;
  if (ms.grading) {
    const MilestoneGrading& g = *ms.grading;
    spec.elementwise = g.elementwise;
    spec.hidden_model_points = g.hidden_model_points;
    spec.other_points_per_check = g.other_points_per_check;
    spec.variant_points = g.variant_points;
    spec.flag_speedup_over = g.flag_speedup_over;
    if (spec.gpu) spec.memcheck = g.memcheck;
  }
  return spec;
}

}  // namespace

std::vector<MilestoneSpec> load_milestone_specs(const fs::path& root, const std::string& id) {
  const std::vector<std::string> graded = graded_milestone_ids(root);
  if (id == "all") {
    std::vector<MilestoneSpec> specs;
    for (const std::string& g : graded) specs.push_back(load_one(root, g));
    return specs;
  }
  if (std::find(graded.begin(), graded.end(), id) == graded.end()) {
    std::string choices, ungraded;
    for (const std::string& g : graded) choices += g + ", ";
    for (const std::string& m : milestone_ids(root)) {
      if (std::find(graded.begin(), graded.end(), m) == graded.end()) {
        ungraded += (ungraded.empty() ? "" : ", ") + m;
      }
    }
    if (!choices.empty()) choices.resize(choices.size() - 2);
    throw Error("cannot grade milestone '" + id + "': choose " + choices + " or all" +
                (ungraded.empty() ? "" : " (" + ungraded + " has no team code to grade)"));
  }
  return {load_one(root, id)};
}

std::vector<HiddenModel> find_hidden_models(const std::vector<fs::path>& dirs,
                                            std::int64_t max_images,
                                            std::vector<std::string>* skipped) {
  std::vector<HiddenModel> out;
  for (const fs::path& dir : dirs) {
    std::error_code ec;
    if (!fs::is_directory(dir, ec)) {
      throw Error("--models " + dir.string() + " is not a folder of .safetensors model files");
    }
    std::vector<fs::path> files;
    for (const fs::directory_entry& e : fs::directory_iterator(dir)) {
      if (e.is_regular_file() && e.path().extension() == ".safetensors") files.push_back(e.path());
    }
    std::sort(files.begin(), files.end());
    for (const fs::path& f : files) {
      const Model model = load_model(f);
      // The largest N the calibration lists that the test set can supply.
      std::optional<std::pair<std::int64_t, std::int64_t>> best;
      for (const auto& [n, correct] : model.expected_correct) {
        if (n >= 1 && n <= max_images) best = std::make_pair(n, correct);
      }
      if (!best) {
        if (skipped != nullptr) {
          skipped->push_back(f.string() + ": no expected counts (convlab.expected) for N <= " +
                             std::to_string(max_images) + "; not a hidden check");
        }
        continue;
      }
      HiddenModel h;
      h.file = f;
      h.name = f.stem().string();
      h.number = static_cast<int>(out.size()) + 1;
      h.images = best->first;
      h.expected = best->second;
      out.push_back(h);
    }
  }
  return out;
}

std::vector<PlannedCheck> plan_checks(const std::vector<MilestoneSpec>& specs,
                                      const std::vector<HiddenModel>& hidden,
                                      const fs::path& models_dir) {
  std::vector<PlannedCheck> plan;
  for (const MilestoneSpec& spec : specs) {
    const Milestone& ms = spec.milestone;
    const auto add = [&](const std::string& variant, const std::string& kind, const std::string& id,
                         const std::string& name, double points) -> PlannedCheck& {
      PlannedCheck& p = plan.emplace_back();
      p.check.id = id;
      p.check.name = name;
      p.check.kind = kind;
      p.check.milestone = ms.id;
      p.check.variant = variant;
      p.check.max_score = points;
      p.gpu = spec.gpu;
      p.spec = &spec;
      return p;
    };
    const auto network = [&](const std::string& variant, const Check& c, double points) {
      const std::string id = "network/" + variant + "/" + c.model + "/" + std::to_string(c.images);
      PlannedCheck& p =
          add(variant, "network", id,
              variant + ": " + c.model + ", " + std::to_string(c.images) + " images (expects " +
                  std::to_string(c.expected_correct) + " correct)",
              points);
      p.check.model = c.model;
      p.check.images = c.images;
      p.check.expected_correct = c.expected_correct;
      p.model_file = find_model(c.model, {models_dir});
      p.timed = variant == spec.ranked_variant && c.model == ms.default_model &&
                c.images == ms.default_images;
    };
    const auto elementwise = [&](const std::string& variant, double points) {
      if (!spec.elementwise) return;
      const ElementwiseSpec& e = *spec.elementwise;
      add(variant, "elementwise", "elementwise/" + variant,
          variant + ": element-wise against a double-precision reference (" +
              std::to_string(e.shapes.size()) + " shapes, |error| <= " + points_text(e.atol) +
              " + " + points_text(e.rtol) + " |reference| + the sum's rounding bound)",
          points);
    };
    const auto memcheck = [&](const std::string& variant, double points) {
      if (!spec.memcheck) return;
      PlannedCheck& p = add(variant, "memcheck", "memcheck/" + variant,
                            variant + ": compute-sanitizer memcheck, " + ms.default_model + ", " +
                                std::to_string(spec.memcheck->images) + " images",
                            points);
      p.check.model = ms.default_model;
      p.check.images = spec.memcheck->images;
      p.model_file = find_model(ms.default_model, {models_dir});
    };
    const Check* default_check = nullptr;
    for (const Check& c : ms.checks) {
      if (c.model == ms.default_model && c.images == ms.default_images) default_check = &c;
    }
    if (default_check == nullptr) {
      throw Error("milestones/" + ms.id + "/checks.json lists no check for its default model " +
                  ms.default_model + " on " + std::to_string(ms.default_images) + " images");
    }

    const std::string& ranked = spec.ranked_variant;
    for (const Check& c : ms.checks) network(ranked, c, c.points);
    for (const HiddenModel& h : hidden) {
      PlannedCheck& p =
          add(ranked, "network", "hidden/" + ranked + "/" + h.name + "/" + std::to_string(h.images),
              ranked + ": hidden model " + std::to_string(h.number) + ", " +
                  std::to_string(h.images) + " images",
              spec.hidden_model_points);
      p.check.hidden = true;
      p.check.model = h.name;
      p.check.images = h.images;
      p.check.expected_correct = h.expected;
      p.model_file = h.file;
    }
    elementwise(ranked, spec.elementwise ? spec.elementwise->points : 0.0);
    memcheck(ranked, spec.memcheck ? spec.memcheck->points : 0.0);
    {
      PlannedCheck& p =
          add(ranked, "time",
              "time/" + ranked + "/" + ms.default_model + "/" + std::to_string(ms.default_images),
              ranked + ": Op Time, " + ms.default_model + ", " + std::to_string(ms.default_images) +
                  " images (fastest of the timed runs)",
              0.0);
      p.check.model = ms.default_model;
      p.check.images = ms.default_images;
      p.check.expected_correct = default_check->expected_correct;
      p.model_file = find_model(ms.default_model, {models_dir});
      p.timed = true;
    }
    for (const std::string& v : spec.variants) {
      if (v == ranked) continue;
      // Two scored checks: a menu weight is shared by them.
      const auto weight = spec.variant_points.find(v);
      const double per_check =
          weight == spec.variant_points.end() ? spec.other_points_per_check : weight->second / 2;
      network(v, *default_check, per_check);
      elementwise(v, per_check);
      memcheck(v, 0.0);
    }
  }
  return plan;
}

fs::path default_out_dir(const fs::path& submission, const std::string& team,
                         const std::string& milestone, const fs::path& cwd) {
  const std::string name = "grade-" + team;
  const fs::path here = fs::weakly_canonical(fs::absolute(cwd) / name);
  const fs::path rel = here.lexically_relative(fs::weakly_canonical(submission));
  if (rel.empty() || *rel.begin() == "..") return cwd / name;
  // One folder per milestone: a team grades m2, m3 and final from the same checkout.
  return submission / "build" / ("grade-" + milestone);
}

bool id_selected(const std::string& id, const std::vector<std::string>& globs) {
  if (globs.empty()) return true;
  return std::any_of(globs.begin(), globs.end(), [&](const std::string& g) {
    return ::fnmatch(g.c_str(), id.c_str(), 0) == 0;
  });
}

}  // namespace convlab::grader
