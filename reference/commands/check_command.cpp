#include "reference/commands/check_command.hpp"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <limits>
#include <memory>
#include <random>
#include <sstream>

#include "reference/commands/commands.hpp"
#include "reference/commands/run_command.hpp"
#include "reference/conv/elementwise.hpp"
#include "reference/conv/variants.hpp"
#include "reference/core/error.hpp"
#include "reference/milestones/cli_values.hpp"
#include "reference/milestones/milestone.hpp"

namespace convlab {

namespace {

// How many mismatches a failing shape lists.
constexpr std::size_t kShown = 5;

std::string shape_text(const ConvShape& s) {
  char buf[96];
  std::snprintf(buf, sizeof buf, "B=%d M=%d C=%d H=%d W=%d K=%d", s.B, s.M, s.C, s.H, s.W, s.K);
  return buf;
}

std::string mismatch_text(const ElementMismatch& m) {
  std::string text = describe_mismatch(m);
  if (std::isnan(m.got)) text += ": never written (y holds NaN before each call)";
  return text;
}

// Compares one call's output; prints the failure and returns false on a mismatch.
bool report(const ElementwiseComparison& c, int call, std::ostream& out) {
  if (c.ok) return true;
  out << "    WRONG";
  if (call == 2)
    out << " on the second call (the first was right: does the code read y, or keep "
           "state between calls?)";
  out << ": " << c.mismatches << " of " << c.elements << " outputs wrong";
  if (c.non_finite > 0) out << ", " << c.non_finite << " of them NaN or infinite";
  out << "\n    worst  " << mismatch_text(*c.worst) << "\n";
  for (const ElementMismatch& m : c.first) out << "    first  " << mismatch_text(m) << "\n";
  return false;
}

std::string next_step(const std::string& milestone, const std::string& target) {
  const bool several = variant_ids(milestone).size() > 1;
  return "convlab run " + milestone + (several ? " --variant " + target : "");
}

std::uint64_t fresh_seed() {
  std::random_device rd;
  return (std::uint64_t{rd()} << 32 | rd()) % 1000000000ull;
}

}  // namespace

std::vector<ConvShape> check_shapes(std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  const auto pick = [&](int lo, int hi) {
    return lo + static_cast<int>(rng() % static_cast<std::uint64_t>(hi - lo + 1));
  };
  // An output size that is not a multiple of 8 (so of no common tile either).
  const auto awkward = [&](int K, int lo, int hi) {
    int size = K - 1 + pick(lo, hi);
    if ((size - K + 1) % 8 == 0) ++size;
    return size;
  };
  std::vector<ConvShape> shapes;
  for (int K = 1; K <= 7; ++K) {
    ConvShape s;
    s.B = pick(1, 3);
    s.M = pick(1, 9);
    s.C = K % 3 == 0 ? 1 : pick(2, 4);  // mostly C > 1; C = 1 as in the first layer too
    s.K = K;
    s.H = awkward(K, 3, 33);
    s.W = awkward(K, 3, 33);
    shapes.push_back(s);
  }
  shapes.push_back({2, 50, 1, 28, 28, 5});  // the project's layer
  return shapes;
}

bool check_target_on(const CheckTarget& t, const std::vector<ConvShape>& shapes, std::uint64_t seed,
                     double atol, double rtol, bool quiet, std::ostream& out) {
  const Precision precision = find_variant(t.name).precision;
  bool ok = true;
  for (std::size_t i = 0; i < shapes.size(); ++i) {
    const ConvShape& s = shapes[i];
    const auto x = elementwise_values(seed, i, ElementwiseTensor::x, s.x_elements());
    const auto k = elementwise_values(seed, i, ElementwiseTensor::k, s.k_elements());
    const std::vector<double> want = conv_reference_double(s, x, k);
    const std::vector<double> allowed = elementwise_allowance(precision, s, x, k, want, atol, rtol);
    std::vector<float> y(static_cast<std::size_t>(s.y_elements()));
    char line[64];
    std::snprintf(line, sizeof line, "  %-36s", shape_text(s).c_str());
    // Quiet: a shape's lines are kept back and printed only when it fails.
    std::ostringstream held;
    std::ostream& shape_out = quiet ? held : out;
    shape_out << line << std::flush;
    bool shape_ok = true;
    double worst = 0.0;
    for (int call = 1; call <= 2 && shape_ok; ++call) {
      std::fill(y.begin(), y.end(), std::numeric_limits<float>::quiet_NaN());
      t.call(y.data(), x.data(), k.data(), s);
      const ElementwiseComparison c =
          compare_elementwise_within(y, want, allowed, conv_output_dims(s), kShown);
      if (call == 1) shape_out << (c.ok ? "" : "\n");
      shape_ok = report(c, call, shape_out);
      if (c.worst) worst = std::max(worst, c.worst->error);
    }
    if (shape_ok) {
      char buf[48];
      std::snprintf(buf, sizeof buf, "ok (worst error %.2g)\n", worst);
      shape_out << buf;
    }
    if (quiet && !shape_ok) out << held.str();
    ok = ok && shape_ok;
  }
  return ok;
}

int check_targets(const std::vector<CheckTarget>& targets, const std::string& milestone,
                  std::uint64_t seed, double atol, double rtol, std::ostream& out) {
  const std::vector<ConvShape> shapes = check_shapes(seed);
  out << "convlab check " << milestone << ", seed " << seed << " (the same shapes and inputs "
      << "again: convlab check " << milestone << " --seed " << seed << ")\n"
      << "Each output y[b][m][h][w] is compared with the library convolution in double "
         "precision: |y - want| <= "
      << atol << " + " << rtol << " * |want| + what a float32 sum of the output's terms can "
      << "round away (a tf32 or fp16 variant: its class's rounding too; docs/grader.md). y is "
      << "filled with NaN before each of two calls.\n";
  std::optional<NotImplemented> first_missing;
  int checked = 0, failed = 0;
  for (const CheckTarget& t : targets) {
    const Precision precision = find_variant(t.name).precision;
    out << "\n" << t.name << " (" << t.file;
    if (precision != Precision::fp32) out << ", " << precision_name(precision) << " class";
    out << ")\n";
    bool ok = true;
    try {
      ok = check_target_on(t, shapes, seed, atol, rtol, /*quiet=*/false, out);
    } catch (const NotImplemented& e) {
      // Alone, the stub's message is the command's error; in a list, it is one line of it.
      out << "not implemented yet" << (targets.size() > 1 ? std::string(": ") + e.what() : "")
          << "\n";
      if (!first_missing) first_missing = e;
      continue;
    } catch (const Error& e) {
      out << "\n    ERROR: " << e.what() << "\n";
      ok = false;
    }
    ++checked;
    if (ok) {
      out << t.name << ": every output right on " << shapes.size()
          << " shapes. Next: " << next_step(milestone, t.name) << "\n";
    } else {
      ++failed;
      out << t.name << ": WRONG. Fix " << t.file
          << " (the handout's formula and indexing), then run convlab check " << milestone
          << (targets.size() > 1 || variant_ids(milestone).size() > 1 ? " --variant " + t.name : "")
          << " --seed " << seed << " again.\n";
    }
  }
  if (checked == 0 && first_missing) throw *first_missing;
  return failed == 0 ? 0 : kExitIncorrect;
}

std::vector<ConvShape> run_check_shapes(const std::vector<ConvShape>& layers, std::int64_t n) {
  const int images = static_cast<int>(std::clamp<std::int64_t>(n, 1, 3));
  std::vector<ConvShape> shapes;
  bool channels = false;
  for (ConvShape s : layers) {
    s.B = images;
    channels = channels || s.C > 1;
    shapes.push_back(s);
  }
  // With C = 1 everywhere a wrong channel stride reads the right values; three channels show it.
  if (!channels && !layers.empty()) {
    ConvShape s = layers.front();
    s.B = 1;
    s.C = 3;
    shapes.push_back(s);
  }
  return shapes;
}

bool check_before_run(const CheckTarget& target, const std::vector<ConvShape>& shapes,
                      const std::string& milestone, double atol, double rtol, std::ostream& out) {
  std::ostringstream failures;
  if (check_target_on(target, shapes, kRunCheckSeed, atol, rtol, /*quiet=*/true, failures)) {
    return true;
  }
  const bool several = variant_ids(milestone).size() > 1;
  out << target.name << " (" << target.file
      << ") is WRONG, so the network did not run. Before the network, each output "
         "y[b][m][h][w] of this model's conv layers was compared with the library convolution "
         "in double precision (random inputs, y filled with NaN before each of two calls), and "
         "where every layer has C = 1, of its first layer with C = 3 input channels too (a "
         "wrong channel stride only shows with C > 1; other models have it). The shapes with "
         "wrong outputs:\n"
      << failures.str() << "Fix " << target.file
      << " (the handout's formula and indexing), then run convlab check " << milestone
      << (several ? " --variant " + target.name : "")
      << ": it names the wrong outputs on more shapes. Run this again once it passes.\n";
  return false;
}

int run_check(const CheckOptions& o, std::ostream& out) {
  const Milestone ms = load_milestone(convlab_root(), o.milestone);
  if (ms.team_writes.empty()) {
    throw Error("milestone " + ms.id +
                " has no code of yours to check (it runs the library "
                "convolution): check m2, m3 or final");
  }
  if (!o.variant.empty() && ms.variants.empty()) {
    throw Error("--variant applies to m3 and final; milestone " + ms.id + " has no variants");
  }
  if (!o.variant.empty() && o.variant != "all" &&
      std::find(ms.variants.begin(), ms.variants.end(), o.variant) == ms.variants.end()) {
    std::string list;
    for (const std::string& v : ms.variants) list += (list.empty() ? "" : ", ") + v;
    throw Error("unknown variant '" + o.variant + "' for milestone " + ms.id + ": choose one of " +
                list + ", or all");
  }
  const Impl impl = o.solution ? Impl::solution : Impl::student;
  const std::uint64_t seed = o.seed_given ? o.seed : fresh_seed();

  std::vector<CheckTarget> targets;
  if (ms.variants.empty()) {
    // The milestone's CPU variants (m2's convolution).
    for (const std::string& id : variant_ids(ms.id, "cpu")) {
      targets.push_back({id, std::string(find_variant(id).student_file),
                         [fn = cpu_conv(impl, id)](float* y, const float* x, const float* k,
                                                   const ConvShape& s) { fn(y, x, k, s); }});
    }
  } else {
    const std::string choice = o.variant.empty() ? ms.default_variant : o.variant;
    targets = gpu_check_targets(ms, choice, impl);
  }
  return check_targets(targets, ms.id, seed, ms.elementwise_atol(), ms.elementwise_rtol(), out);
}

void add_check_command(CLI::App& app, int& exit_code) {
  auto opt = std::make_shared<CheckOptions>();
  auto impl = std::make_shared<std::string>("student");
  CLI::App* cmd = app.add_subcommand(
      "check",
      "Compare your convolution with the library convolution, output by output, on awkward "
      "random shapes (run it first, after every change)");
  cmd->add_option("milestone", opt->milestone, "m2, m3 or final")
      ->required()
      ->check(CLI::IsMember(milestone_ids()));
  cmd->add_option("--variant", opt->variant, "m3, final: " + variant_names_help() + ", or all")
      ->check(CLI::IsMember(variant_choices()));
  cmd->add_option("--seed", opt->seed,
                  "the shapes and inputs (default: a fresh one, printed so that a failure can be "
                  "run again)")
      ->check(CLI::NonNegativeNumber);
  if (solutions_available()) {
    cmd->add_option("--impl", *impl, "student (default) or solution (staff)")
        ->check(CLI::IsMember({"student", "solution"}));
  }
  cmd->callback([opt, impl, cmd, &exit_code] {
    opt->seed_given = cmd->count("--seed") > 0;
    opt->solution = *impl == "solution";
    exit_code = run_check(*opt, std::cout);
  });
}

}  // namespace convlab
