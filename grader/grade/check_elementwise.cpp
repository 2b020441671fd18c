// The element-wise check: the layer alone on the milestone's shapes, inputs drawn from the
// grade's seed, every output compared with a double-precision reference (and a fused
// conv + tanh + max-pool launcher too, where the variant offers one and it is written).
#include <algorithm>
#include <cmath>

#include "grader/grade/elementwise.hpp"
#include "grader/grade/grading.hpp"
#include "grader/worker/protocol.hpp"
#include "reference/conv/variant_table.hpp"

namespace convlab::grader {

using nlohmann::json;

namespace {

json shape_json(const ConvShape& s) {
  return {{"B", s.B}, {"M", s.M}, {"C", s.C}, {"H", s.H}, {"W", s.W}, {"K", s.K}};
}

json mismatch_json(const ElementMismatch& m) {
  return {{"b", m.b},
          {"m", m.m},
          {"h", m.h},
          {"w", m.w},
          {"got", std::isfinite(m.got) ? json(m.got) : json(std::to_string(m.got))},
          {"want", m.want},
          {"error", std::isfinite(m.error) ? json(m.error) : json(nullptr)}};
}

// Judges outputs against their references and keeps the totals and the failures' text.
struct Judge {
  Judge(const ElementwiseSpec& spec, Precision p) : e(spec), precision(p) {}

  const ElementwiseSpec& e;
  Precision precision;  // the variant's class, whose rounding bound the allowance adds
  std::string failures;
  std::int64_t total = 0;
  double worst = 0.0;
  bool nan_seen = false;

  // False when the output is malformed. `allowed`: each output's allowance.
  bool operator()(const std::string& label, const json& encoded, const std::vector<double>& want,
                  const std::vector<double>& allowed, const OutputDims& dims, json& d) {
    const auto got = encoded.is_string() ? decode_floats(encoded.get<std::string>()) : std::nullopt;
    if (!got || static_cast<std::int64_t>(got->size()) != dims.elements()) return false;
    const ElementwiseComparison cmp = compare_elementwise_within(*got, want, allowed, dims);
    total += cmp.elements;
    d["elements"] = cmp.elements;
    d["mismatches"] = cmp.mismatches;
    d["non_finite"] = cmp.non_finite;
    d["worst"] = cmp.worst ? mismatch_json(*cmp.worst) : json(nullptr);
    json first = json::array();
    for (const ElementMismatch& m : cmp.first) first.push_back(mismatch_json(m));
    d["first"] = first;
    if (cmp.worst && std::isfinite(cmp.worst->error)) worst = std::max(worst, cmp.worst->error);
    if (cmp.ok) return true;
    nan_seen = nan_seen || cmp.non_finite > 0;
    failures += label + ", output " + dims.to_string() + ": " + std::to_string(cmp.mismatches) +
                " of " + std::to_string(cmp.elements) + " outputs wrong";
    if (cmp.non_finite > 0) {
      failures += " (" + std::to_string(cmp.non_finite) + " NaN or infinite)";
    }
    failures += ".\n  worst: " + describe_mismatch(*cmp.worst) + "\n  first mismatches:\n";
    for (const ElementMismatch& m : cmp.first) failures += "    " + describe_mismatch(m) + "\n";
    return true;
  }
};

class ElementwiseCheck final : public CheckKind {
 public:
  void run(Grading& g, PlannedCheck& p, CheckResult& c) const override;

 private:
  // Judges every shape's output; false (with c's reason and output set) for a malformed one.
  static bool judge_shapes(std::uint64_t seed, const json& outputs, const std::string& fused,
                           Judge& judge, json& details, CheckResult& c);
  static void conclude(std::uint64_t seed, const std::string& fused, const Judge& judge,
                       CheckResult& c);
};

bool ElementwiseCheck::judge_shapes(std::uint64_t seed, const json& outputs,
                                    const std::string& fused, Judge& judge, json& details,
                                    CheckResult& c) {
  const ElementwiseSpec& e = judge.e;
  const PoolShape pool{2, 2};
  for (std::size_t i = 0; i < e.shapes.size(); ++i) {
    const ConvShape& s = e.shapes[i];
    const std::string label =
        s.to_string() + (e.why[i].empty() ? std::string() : " (" + e.why[i] + ")");
    const json& o = outputs[i];
    const std::vector<float> x = elementwise_values(seed, i, ElementwiseTensor::x, s.x_elements());
    const std::vector<float> k = elementwise_values(seed, i, ElementwiseTensor::k, s.k_elements());
    const std::vector<double> want = conv_reference_double(s, x, k);
    const std::vector<double> allowed =
        elementwise_allowance(judge.precision, s, x, k, want, e.atol, e.rtol);
    json d = {{"shape", shape_json(s)}, {"why", e.why[i]}};
    if (!o.is_object() ||
        !judge(label, o.value("y", json()), want, allowed, conv_output_dims(s), d)) {
      c.reason = "no_result";
      c.output = "The harness returned a malformed output for " + label + ".";
      return false;
    }
    const bool fits = pool.size <= s.H_out() && pool.size <= s.W_out();
    if (fused == "ok" && fits) {
      json f = {{"pool", "2x2 stride 2"}};
      if (!judge("fused conv + tanh + max-pool, " + label, o.value("pooled", json()),
                 tanh_maxpool_reference(want, s, pool), pooled_allowance(allowed, s, pool),
                 pooled_output_dims(s, pool), f)) {
        c.reason = "no_result";
        c.output = "The harness returned a malformed fused output for " + label + ".";
        return false;
      }
      d["fused"] = f;
    }
    details.push_back(d);
  }
  return true;
}

void ElementwiseCheck::conclude(std::uint64_t seed, const std::string& fused, const Judge& judge,
                                CheckResult& c) {
  const ElementwiseSpec& e = judge.e;
  std::string fused_note;
  if (fused == "ok") {
    fused_note = " Your fused conv + tanh + max-pool launcher was checked too.";
  } else if (fused == "not_implemented") {
    fused_note =
        " Your fused launcher is not written (optional): the network runs your plain "
        "launcher and the framework's tanh and max-pool.";
  }
  const std::string rule = "|got - want| <= " + points_text(e.atol) + " + " +
                           points_text(e.rtol) + " |want| + the " +
                           std::string(precision_name(judge.precision)) +
                           " rounding bound of the sum (docs/grader.md, the element-wise check)";
  if (judge.failures.empty()) {
    c.status = CheckStatus::passed;
    c.reason = "ok";
    c.score = c.max_score;
    c.output = std::to_string(e.shapes.size()) + " shapes, " + std::to_string(judge.total) +
               " outputs, every one within " + rule +
               " of a double-precision reference; the "
               "largest error was " +
               fmt("%.3g", judge.worst) + "." + fused_note;
    return;
  }
  c.status = CheckStatus::failed;
  c.reason = "mismatch";
  c.output = "Outputs outside " + rule + " (inputs uniform in [-1, 1), seed " +
             std::to_string(seed) + "):\n" + judge.failures;
  if (judge.nan_seen) {
    c.output +=
        "NaN means your code did not write that element on the second call: the harness fills "
        "y with NaN before every call. Check that your launch covers every output, including "
        "sizes that are not multiples of your tile, on every call.\n";
  }
  c.output +=
      "Compare your indexing with y[b][m][h][w] = sum over c, p, q of "
      "x[b][c][h+p][w+q] * k[m][c][p][q] at the coordinates above.";
}

void ElementwiseCheck::run(Grading& g, PlannedCheck& p, CheckResult& c) const {
  const ElementwiseSpec& e = *p.spec->elementwise;
  const std::uint64_t seed = g.result().seed;
  std::vector<std::string> args = {"elementwise", "--variant", p.check.variant, "--seed",
                                   std::to_string(seed)};
  for (const ConvShape& s : e.shapes) {
    args.push_back("--shape");
    args.push_back(shape_argument(s));
  }
  const WorkerOutcome w = g.run_worker(p.check.id, args, g.time_limit(p), {}, true, p.check.hidden);
  c.wall_s = w.run.wall_s;
  if (auto f = g.failure_of(w, p, false)) {
    apply_failure(*f, c);
    return;
  }
  const json& outputs = field(*w.doc, "outputs");
  if (!outputs.is_array() || outputs.size() != e.shapes.size()) {
    c.reason = "no_result";
    c.output = "The harness returned no output for each of the " + std::to_string(e.shapes.size()) +
               " shapes.";
    return;
  }
  // A fused conv + tanh + max-pool launcher is judged too when the variant offers one and it
  // is written (its stub is optional).
  const std::string fused = w.doc->value("fused", "");
  Judge judge(e, find_variant(p.check.variant).precision);
  json details = json::array();
  if (!judge_shapes(seed, outputs, fused, judge, details, c)) return;
  c.worst_error = judge.worst;
  c.details_json = json{
      {"seed", seed},
      {"atol", e.atol},
      {"rtol", e.rtol},
      {"fused", fused.empty() ? json(nullptr) : json(fused)},
      {"shapes",
       details}}.dump();
  conclude(seed, fused, judge, c);
}

}  // namespace

const CheckKind& elementwise_check() {
  static const ElementwiseCheck kind;
  return kind;
}

}  // namespace convlab::grader
