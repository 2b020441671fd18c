// `convlab run`, step 3: the result as the original two lines or a table, the advice for a
// wrong count, the profile, and the same figures as JSON.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iostream>

#include "reference/commands/run_steps.hpp"
#include "reference/conv/variant_table.hpp"
#include "reference/core/error.hpp"
#include "reference/core/format.hpp"
#include "reference/core/stopwatch.hpp"

namespace convlab {

const char* run_status_name(RunStatus s) {
  switch (s) {
    case RunStatus::not_implemented:
      return "not_implemented";
    case RunStatus::error:
      return "error";
    case RunStatus::wrong:
      return "wrong";
    case RunStatus::ok:
      break;
  }
  return "ok";
}

using nlohmann::json;

namespace {

json shape_json(const ConvShape& s) {
  return {{"B", s.B}, {"M", s.M}, {"C", s.C}, {"H", s.H}, {"W", s.W}, {"K", s.K}};
}

double flops_of(const NetworkRun& run) {
  double f = 0.0;
  for (const ConvLayerTime& t : run.conv_layers) f += t.shape.flops();
  return f;
}

// The command a profile describes, as nvprof's "Profiling application:" line showed it.
std::string profiled_command(const RunOptions& opt, const std::string& milestone,
                             const std::string& model, std::int64_t n) {
  std::string cmd = "convlab run " + milestone + " " + model + " " + std::to_string(n);
  if (opt.device) cmd += " --device " + *opt.device;
  if (opt.variant) cmd += " --variant " + *opt.variant;
  cmd += " --impl " + std::string(impl_name(opt.impl));
  if (opt.runs != 1) cmd += " --runs " + std::to_string(opt.runs);
  return cmd;
}

// The conv layers of `run` whose timed call also computed the tanh and max-pool after them
// ("0, 3"), or "" when none did.
std::string fused_layers(const NetworkRun& run) {
  std::string list;
  for (const ConvLayerTime& t : run.conv_layers) {
    if (t.fused.empty()) continue;
    list += (list.empty() ? "" : ", ") + std::to_string(t.layer);
  }
  return list;
}

std::string ms_text(double seconds) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f", seconds * 1e3);
  return buf;
}

// Whether any row ran and has a Layer Time (GPU runs measure it; a CPU table has none).
bool has_layer_times(const RunResult& result) {
  return std::any_of(result.records.begin(), result.records.end(), [](const RunRecord& r) {
    return r.status == RunStatus::ok && r.run.layer_time();
  });
}

// Whether the record is a variant declared `host` (variants.def): its Op Time is its Layer Time.
bool takes_host_memory(const RunRecord& rec) {
  const auto& all = variants();
  const auto v =
      std::find_if(all.begin(), all.end(), [&](const Variant& d) { return d.id == rec.label; });
  return !rec.reference && v != all.end() && v->host();
}

constexpr const char* kHostNote =
    "takes host memory and does its own allocation and copies, so its Op Time is its Layer Time";

// The original two lines (and a note where the conv call also ran the tanh and max-pool).
void print_single(const RunPlan& plan, const RunResult& result, std::ostream& out) {
  const RunRecord& rec = result.records.front();
  out << "Op Time: " << format_seconds(rec.run.op_time()) << "\n";
  if (const auto layer = rec.run.layer_time()) {
    out << "Layer Time: " << format_seconds(*layer)
        << " (the same calls fed from host memory: allocation, copies in and out)\n";
  }
  out << "Correctness: " << format_accuracy(static_cast<double>(rec.correct) / plan.n)
      << " Model: " << result.model_name << std::endl;
  if (rec.verdict) out << describe_verdict(*rec.verdict) << std::endl;
  if (takes_host_memory(rec)) out << rec.label << " " << kHostNote << "." << std::endl;
  if (const std::string fused = fused_layers(rec.run); !fused.empty()) {
    out << "Op Time includes the fused tanh and max-pool: conv layer " << fused
        << " and the tanh and 2x2 max-pool after it ran as one call (--no-fuse times the "
           "convolution alone)."
        << std::endl;
  }
}

// One row of the --variant all table.
std::vector<std::string> table_row(const RunPlan& plan, const RunResult& result,
                                   const RunRecord& rec, double baseline_time, bool layer_times) {
  const bool medians = plan.opt.runs > 1;
  std::vector<std::string> row{rec.label + (rec.reference ? " (library)" : ""),
                               std::string(precision_name(rec.precision))};
  if (rec.status != RunStatus::ok) {
    row.insert(row.end(), (medians ? 6 : 5) + (layer_times ? 1 : 0), "-");
    row.push_back(rec.status == RunStatus::not_implemented ? "not implemented"
                  : rec.status == RunStatus::wrong         ? "WRONG"
                                                           : "error");
    return row;
  }
  const std::optional<double>& peak_flops = result.peak_flops;
  const double t = rec.run.op_time();
  double median = 0.0;
  for (const ConvLayerTime& l : rec.run.conv_layers) median += l.median();
  char speed[32], gflops[32], of_peak[32];
  std::snprintf(speed, sizeof speed, "%.2fx", baseline_time > 0 && t > 0 ? baseline_time / t : 0.0);
  std::snprintf(gflops, sizeof gflops, "%.0f", t > 0 ? flops_of(rec.run) / t / 1e9 : 0.0);
  std::snprintf(of_peak, sizeof of_peak, "%.1f%%",
                peak_flops && t > 0 ? 100.0 * flops_of(rec.run) / t / *peak_flops : 0.0);
  const bool ok = rec.passes();
  row.push_back(ms_text(t));
  if (medians) row.push_back(ms_text(median));
  if (layer_times) {
    const std::optional<double> layer = rec.run.layer_time();
    row.push_back(layer ? ms_text(*layer) : "-");
  }
  row.push_back(baseline_time > 0 ? speed : "-");
  row.push_back(gflops);
  row.push_back(peak_flops ? of_peak : "-");
  row.push_back(format_accuracy(static_cast<double>(rec.correct) / plan.n));
  row.push_back(rec.expected || rec.verdict ? (ok ? "correct" : "WRONG") : "no expectation");
  return row;
}

// The notes under the table: the fp32 peak, and which rows' Op Time includes a fused pool.
void print_table_notes(const RunResult& result, std::ostream& out) {
  if (result.peak_flops) {
    char peak[64];
    std::snprintf(peak, sizeof peak, "%.1f TFLOP/s", *result.peak_flops / 1e12);
    out << "fp32 peak: " << peak << " measured (" << result.peak_note << ")\n";
  } else if (!result.peak_note.empty()) {
    out << "fp32 peak: not measured (" << result.peak_note << ")\n";
  }
  for (const RunRecord& rec : result.records) {
    if (rec.verdict) out << rec.label << ": " << describe_verdict(*rec.verdict) << "\n";
  }
  if (has_layer_times(result)) {
    out << "Layer Time: each conv call again, fed from page-locked host memory: device buffers "
           "allocated, x and k copied in, y copied back, buffers freed (fastest run).\n";
  }
  for (const RunRecord& rec : result.records) {
    if (rec.status == RunStatus::ok && takes_host_memory(rec)) {
      out << rec.label << ": " << kHostNote << "; compare it with the other rows' Layer Time.\n";
    }
  }
  std::string fused_rows, fused_at;
  for (const RunRecord& rec : result.records) {
    const std::string fused = rec.status == RunStatus::ok ? fused_layers(rec.run) : "";
    if (fused.empty()) continue;
    fused_rows += (fused_rows.empty() ? "" : ", ") + rec.label;
    fused_at = fused;
  }
  if (!fused_rows.empty()) {
    out << "Op Time of " << fused_rows << " includes the fused tanh and max-pool: conv layer "
        << fused_at
        << " and the tanh and 2x2 max-pool after it ran as one call (--no-fuse times the "
           "convolutions alone).\n";
  }
}

// The --variant all table: one row per variant, cuDNN last.
void print_table(const RunPlan& plan, const RunResult& result, std::ostream& out,
                 std::ostream& err) {
  const RunOptions& opt = plan.opt;
  double baseline_time = 0.0;
  for (const RunRecord& rec : result.records) {
    // The first row is the baseline where there is a table of variants (run_execute.cpp).
    if (&rec == &result.records.front() && !rec.reference && rec.status == RunStatus::ok) {
      baseline_time = rec.run.op_time();
    }
  }
  const bool medians = opt.runs > 1;
  const bool layer_times = has_layer_times(result);
  std::vector<std::vector<std::string>> rows;
  for (const RunRecord& rec : result.records) {
    rows.push_back(table_row(plan, result, rec, baseline_time, layer_times));
  }
  out << "Model: " << result.model_name << ", " << plan.n << " images, " << impl_name(opt.impl)
      << " code";
  if (!result.gpu.is_null()) out << ", " << result.gpu["name"].get<std::string>();
  if (medians) out << ", fastest and median of " << opt.runs << " timed runs";
  out << "\n\n";
  std::vector<std::string> header{"variant", "class", "Op Time (ms)"};
  if (medians) header.push_back("median (ms)");
  if (layer_times) header.push_back("Layer Time (ms)");
  header.insert(header.end(),
                {"speedup vs baseline", "GFLOP/s", "% of fp32 peak", "correctness", "check"});
  // The figures, from Op Time to % of fp32 peak, right-aligned.
  std::vector<int> right;
  const int figures = 4 + (medians ? 1 : 0) + (layer_times ? 1 : 0);
  for (int c = 2; c < 2 + figures; ++c) right.push_back(c);
  out << format_table(header, rows, right);
  print_table_notes(result, out);
  for (const RunRecord& rec : result.records) {
    if (rec.status != RunStatus::ok) err << rec.label << ": " << rec.error << "\n";
  }
}

// kExitIncorrect, with advice, where a team's count differs from the expected one.
int advise_wrong_counts(const RunPlan& plan, const RunResult& result, std::ostream& err) {
  const Milestone& ms = plan.ms;
  const std::int64_t n = plan.n;
  int code = 0;
  for (const RunRecord& rec : result.records) {
    // Its layer check printed what is wrong and what to do next.
    if (rec.status == RunStatus::wrong) code = kExitIncorrect;
    if (rec.status == RunStatus::ok && rec.verdict && !rec.verdict->ok() && !rec.reference) {
      code = kExitIncorrect;
      err << "convlab: " << rec.label << " (" << precision_name(rec.precision)
          << "): " << describe_verdict(*rec.verdict)
          << ". Those images are far enough from a tie that no rounding of this class moves them:"
             " the convolution in "
          << rec.code_file << " computes something else. Run `convlab check " << ms.id
          << (ms.variants.empty() ? std::string() : " --variant " + rec.label)
          << "` first: it names the wrong outputs by (b, m, h, w).\n";
      continue;
    }
    if (rec.status == RunStatus::ok && !rec.verdict && rec.expected &&
        rec.correct != *rec.expected && !rec.reference) {
      code = kExitIncorrect;
      err << "convlab: " << rec.label << " got " << rec.correct << " of " << n
          << " images right; model " << result.model_name << " expects " << *rec.expected << " ("
          << format_accuracy(static_cast<double>(*rec.expected) / n) << "). The convolution in "
          << rec.code_file << " computes something else. Run `convlab check " << ms.id
          << (ms.variants.empty() ? std::string() : " --variant " + rec.label)
          << "` first: it names the wrong outputs by (b, m, h, w).\n";
    }
  }
  return code;
}

// The nvprof-shaped summary of what --profile recorded, and its JSON (null without one).
json print_profile(const RunPlan& plan, const RunResult& result, std::ostream& out) {
  if (!result.profiled) return nullptr;
  const profile::ProfileSummary summary = profile::summarize(*result.profiled);
  const std::string command = profiled_command(plan.opt, plan.ms.id, result.model_name, plan.n);
  const long pid = static_cast<long>(::getpid());
  out << profile::format_summary(summary, pid, command) << std::flush;
  json report = profile::summary_json(summary, pid, command);
  if (plan.opt.profile_json) {
    std::ofstream f(*plan.opt.profile_json);
    if (!f) throw Error("cannot write the profile to " + plan.opt.profile_json->string());
    f << report.dump(2) << "\n";
  }
  return report;
}

json record_json(const RunPlan& plan, const RunResult& result, const RunRecord& rec) {
  json r = {
      {"variant", rec.label}, {"status", run_status_name(rec.status)}, {"library", rec.reference}};
  if (rec.status != RunStatus::ok) {
    r["error"] = rec.error;
    return r;
  }
  json layers = json::array();
  for (const ConvLayerTime& t : rec.run.conv_layers) {
    layers.push_back({{"layer", t.layer},
                      {"shape", shape_json(t.shape)},
                      {"seconds", t.seconds},
                      {"median_seconds", t.median()},
                      {"samples", t.samples},
                      {"flops", t.shape.flops()},
                      {"fused", t.fused.empty() ? json(nullptr) : json(t.fused)},
                      {"layer_time_s", t.layer_seconds ? json(*t.layer_seconds) : json(nullptr)}});
  }
  const double t = rec.run.op_time();
  r["op_time_s"] = t;
  const std::optional<double> layer_time = rec.run.layer_time();
  r["layer_time_s"] = layer_time ? json(*layer_time) : json(nullptr);
  r["gflops"] = t > 0 ? flops_of(rec.run) / t / 1e9 : 0.0;
  if (result.peak_flops) {
    r["percent_of_fp32_peak"] = t > 0 ? 100.0 * flops_of(rec.run) / t / *result.peak_flops : 0.0;
  }
  r["correct"] = rec.correct;
  r["accuracy"] = static_cast<double>(rec.correct) / plan.n;
  r["expected_correct"] = rec.expected ? json(*rec.expected) : json(nullptr);
  r["matches_expected"] = !rec.expected || rec.correct == *rec.expected;
  r["precision"] = precision_name(rec.precision);
  r["passes"] = rec.passes();
  if (rec.verdict) {
    const PrecisionVerdict& v = *rec.verdict;
    r["precision_rule"] = {{"images", v.images},
                           {"under_bound", v.under_bound},
                           {"moved_under_bound", v.moved_under_bound},
                           {"wrong_images", v.wrong},
                           {"ok", v.ok()},
                           {"text", describe_verdict(v)}};
  } else {
    r["precision_rule"] = nullptr;
  }
  r["conv_layers"] = layers;
  return r;
}

void write_json(const RunPlan& plan, const RunResult& result, const json& profile_report) {
  const RunOptions& opt = plan.opt;
  json runs = json::array();
  for (const RunRecord& rec : result.records) runs.push_back(record_json(plan, result, rec));
  const json report = {
      {"convlab_version", CONVLAB_VERSION},
      {"milestone", plan.ms.id},
      {"model", result.model_name},
      {"model_file", plan.model_path.string()},
      {"images", plan.n},
      {"timed_runs", opt.runs},
      {"impl", impl_name(opt.impl)},
      {"device", plan.device},
      {"gpu", result.gpu},
      {"runs", runs},
      {"profile", profile_report},
      {"wall_time_s", seconds_since(plan.wall_start)}};
  std::ofstream f(*opt.json);
  if (!f) throw Error("cannot write the JSON report to " + opt.json->string());
  f << report.dump(2) << "\n";
}

}  // namespace

int report_run(const RunPlan& plan, const RunResult& result, std::ostream& out, std::ostream& err) {
  if (result.records.size() > 1) {
    print_table(plan, result, out, err);
  } else if (result.records.front().status == RunStatus::ok) {
    print_single(plan, result, out);
  }
  const int code = advise_wrong_counts(plan, result, err);
  const json profile_report = print_profile(plan, result, out);
  if (plan.opt.json) write_json(plan, result, profile_report);
  return code;
}

}  // namespace convlab
