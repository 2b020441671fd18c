// Network checks: the network runs on the first N test images with the team's convolution and
// must get exactly the expected count; the ranked check also makes the timed passes, in a run
// of their own.
#include "grader/grade/grading.hpp"
#include "reference/conv/variant_table.hpp"
#include "reference/network/exact.hpp"

namespace convlab::grader {

using nlohmann::json;

std::string network_advice(const Grading& g, const PlannedCheck& p) {
  return "Your convolution computes something other than the formula. Check the index "
         "arithmetic against the handout, and read the element-wise check: it names the first "
         "wrong outputs with their coordinates. Run `" +
         g.run_command(p, p.check.images) + "` to see the same count.";
}

void take_op_times(const json& doc, CheckResult& c) {
  const json& t = field(doc, "timing");
  c.op_time_s = t.value("op_time_s", 0.0);
  c.op_time_median_s = t.value("op_time_median_s", 0.0);
  c.op_time_runs_s = t.value("op_time_runs_s", std::vector<double>{});
}

namespace {

// A tf32 or fp16 variant's predictions (pass 0: the test images in order) by the precision
// rule: the float64 network, computed here on the trusted side, decides every image whose
// margin clears the class's error estimate.
std::optional<Failure> judge_by_precision_rule(Grading& g, const json& predictions,
                                               const PlannedCheck& p, Precision precision,
                                               CheckResult& c, const std::string& advice) {
  const Model model = load_model(p.model_file);
  const Tensor input = g.test_set().images(p.check.images, model.input_scale);
  const ExactRun exact = run_network_exact(model, input, precision);
  const std::vector<int> got = predictions.get<std::vector<int>>();
  const PrecisionVerdict v =
      judge_predictions(precision, got, exact.predictions, exact.margins, exact.sigma);
  c.output = describe_verdict(v) + ".";
  if (v.ok()) return std::nullopt;
  return Failure{"wrong_count", c.output + "\n" + advice};
}

}  // namespace

std::optional<Failure> judge_predictions(Grading& g, const WorkerOutcome& w, const PlannedCheck& p,
                                         CheckResult& c, const std::string& advice) {
  const std::int64_t n = p.check.images;
  const std::int64_t expected = p.check.expected_correct.value_or(-1);
  const json& passes = field(*w.doc, "passes");
  if (!passes.is_array() || passes.empty()) {
    return Failure{"no_result", "The harness returned no timed pass."};
  }
  const std::int64_t classes = g.model_classes(p.model_file);
  const std::vector<std::uint8_t>& labels = g.test_set().labels;
  // Every timed pass is judged, not only the last: a result is only as good as its worst pass.
  std::int64_t correct = -1;
  std::size_t wrong_pass = 0;
  for (std::size_t pass = 0; pass < passes.size(); ++pass) {
    const json* preds = passes[pass].is_object() && passes[pass].contains("predictions")
                            ? &passes[pass]["predictions"]
                            : nullptr;
    if (preds == nullptr || !preds->is_array() || static_cast<std::int64_t>(preds->size()) != n) {
      return Failure{"no_result", "The harness returned no prediction for each of the " +
                                      std::to_string(n) + " images."};
    }
    std::int64_t count = 0;
    for (std::int64_t i = 0; i < n; ++i) {
      const json& v = (*preds)[static_cast<std::size_t>(i)];
      if (!v.is_number_integer() || v.get<std::int64_t>() < 0 || v.get<std::int64_t>() >= classes) {
        return Failure{"no_result", "The harness returned an invalid prediction for image " +
                                        std::to_string(i) + "."};
      }
      count += v.get<std::int64_t>() == labels[static_cast<std::size_t>(i)];
    }
    if (correct < 0 || (correct == expected && count != expected)) {
      correct = count;
      wrong_pass = pass;
    }
  }
  c.correct = correct;
  if (const Precision precision = find_variant(p.check.variant).precision;
      precision != Precision::fp32) {
    return judge_by_precision_rule(g, passes[0]["predictions"], p, precision, c, advice);
  }
  if (correct == expected) return std::nullopt;
  std::string pass_text;
  if (passes.size() > 1) {
    pass_text = "In timed run " + std::to_string(wrong_pass + 1) + " of " +
                std::to_string(passes.size()) +
                " (each run gets the images in another order; "
                "every run must be right): ";
  }
  const std::string text = pass_text + "Got " + std::to_string(correct) + " of " +
                           std::to_string(n) + " images right (" + accuracy(correct, n) +
                           "); the model gives " + std::to_string(expected) + " (" +
                           accuracy(expected, n) + ").\n" + advice;
  return Failure{"wrong_count", text};
}

void run_counted_network(Grading& g, PlannedCheck& p, CheckResult& c, const std::string& advice) {
  const WorkerOutcome w = g.run_network(p, p.check.id, NetworkPasses::count);
  c.wall_s = w.run.wall_s;
  std::optional<Failure> f = g.failure_of(w, p, false);
  if (!f) f = judge_predictions(g, w, p, c, advice);
  if (f) {
    if (p.timed) g.timed_runs()[timed_run_key(p)] = {w, f};
    apply_failure(*f, c);
    return;
  }
  c.status = CheckStatus::passed;
  c.reason = "ok";
  c.score = c.max_score;
  const std::string counted = std::to_string(*c.correct) + " of " + std::to_string(p.check.images) +
                              " images right (" + accuracy(*c.correct, p.check.images) + ")";
  // A tf32 or fp16 variant passed by the precision rule, whose line is already there.
  c.output = c.output.empty() ? counted + ", as expected." : counted + "; " + c.output;
}

void time_network(Grading& g, PlannedCheck& p, CheckResult& c) {
  if (c.status != CheckStatus::passed) return;
  const WorkerOutcome w = g.run_network(p, p.check.id + "/timed", NetworkPasses::timed);
  c.wall_s += w.run.wall_s;
  std::optional<Failure> f = g.failure_of(w, p, false);
  // The timed passes belong to the check: a wrong timed call fails it, whatever the count.
  if (!f) f = judge_verification(*w.doc, p);
  g.timed_runs()[timed_run_key(p)] = {w, f};
  if (f) {
    apply_failure(*f, c);
    return;
  }
  take_op_times(*w.doc, c);
}

namespace {

class NetworkCheck final : public CheckKind {
 public:
  void run(Grading& g, PlannedCheck& p, CheckResult& c) const override {
    run_counted_network(g, p, c, network_advice(g, p));
  }
};

}  // namespace

const CheckKind& network_check() {
  static const NetworkCheck kind;
  return kind;
}

}  // namespace convlab::grader
