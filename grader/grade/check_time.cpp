// The time check: Op Time of the ranked variant on the milestone's default model and N, the
// fastest of the timed passes by the referee's clock, with cuDNN (or the library convolution)
// timed in the same run; a speedup past the milestone's bound gets a flag for a human look.
#include "grader/grade/grading.hpp"

namespace convlab::grader {

using nlohmann::json;

namespace {

class TimeCheck final : public CheckKind {
 public:
  void run(Grading& g, PlannedCheck& p, CheckResult& c) const override;
};

void TimeCheck::run(Grading& g, PlannedCheck& p, CheckResult& c) const {
  const std::string key = timed_run_key(p);
  auto it = g.timed_runs().find(key);
  if (it == g.timed_runs().end()) {
    // The network check did not run (--only): count and time the default check here.
    CheckResult scratch = c;
    const WorkerOutcome w = g.run_network(p, p.check.id, NetworkPasses::count_and_timed);
    std::optional<Failure> f = g.failure_of(w, p, false);
    if (!f) f = judge_predictions(g, w, p, scratch, network_advice(g, p));
    c.correct = scratch.correct;
    it = g.timed_runs().emplace(key, std::make_pair(w, f)).first;
  }
  const auto& [w, f] = it->second;
  c.wall_s = w.run.wall_s;
  if (f) {
    apply_failure(*f, c);
    c.output = "No time: the ranked network check did not pass.\n" + f->output;
    return;
  }
  if (auto v = judge_verification(*w.doc, p)) {
    apply_failure(*v, c);
    return;
  }
  const json& t = field(*w.doc, "timing");
  c.correct = p.check.expected_correct;
  take_op_times(*w.doc, c);
  json details = {{"runs", c.op_time_runs_s.size()},
                  {"clock", "referee"},
                  {"noise_seed", (*w.doc).value("noise_seed", json(nullptr))},
                  {"verification", (*w.doc).value("verification", json(nullptr))},
                  {"layers", t.value("layers", json::array())},
                  {"reference", (*w.doc).value("reference", json(nullptr))},
                  {"gpu", (*w.doc).value("gpu", json(nullptr))}};
  const json& ref = field(*w.doc, "reference");
  std::string ref_name = p.gpu ? "cuDNN" : "the library convolution";
  if (ref.is_object()) c.reference_time_s = ref.value("op_time_s", 0.0);
  c.status = CheckStatus::passed;
  c.reason = "ok";
  c.output = "Op Time " + fmt("%.6f", *c.op_time_s) + " s, ";
  c.output += c.op_time_runs_s.size() == 1
                  ? std::string("one timed run")
                  : "the fastest of " + std::to_string(c.op_time_runs_s.size()) +
                        " timed runs (median " + fmt("%.6f", *c.op_time_median_s) + " s)";
  if (c.reference_time_s && *c.reference_time_s > 0 && *c.op_time_s > 0) {
    const double speedup = *c.reference_time_s / *c.op_time_s;
    details["speedup"] = speedup;
    c.output += "; " + ref_name + " took " + fmt("%.6f", *c.reference_time_s) +
                " s in the same run: speedup " + fmt("%.2f", speedup) + "x";
    if (speedup > p.spec->flag_speedup_over) {
      g.result().flags.push_back(p.check.variant + " (" + p.check.milestone + ") is " +
                                 fmt("%.1f", speedup) + "x faster than " + ref_name + " on " +
                                 p.check.model + ", " + std::to_string(p.check.images) +
                                 " images: look at its code before trusting the time");
    }
  }
  if (*c.op_time_s <= 0.0) {
    g.result().flags.push_back(p.check.variant + " (" + p.check.milestone +
                               ") reports an Op Time of zero");
  }
  c.output += ".";
  c.details_json = details.dump();
}

}  // namespace

const CheckKind& time_check() {
  static const TimeCheck kind;
  return kind;
}

}  // namespace convlab::grader
