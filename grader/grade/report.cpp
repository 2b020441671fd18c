#include "grader/grade/report.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>

#include "reference/conv/variant_table.hpp"
#include "reference/core/error.hpp"
#include "reference/core/format.hpp"
#include "reference/core/text.hpp"

namespace convlab::grader {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

template <typename T>
json opt(const std::optional<T>& v) {
  return v ? json(*v) : json(nullptr);
}

// A finite number, or null (JSON has no NaN or infinity).
json number(double v) {
  return std::isfinite(v) ? json(v) : json(nullptr);
}

json embedded(const std::string& text) {
  if (text.empty()) return json::object();
  try {
    return json::parse(text);
  } catch (const json::exception&) {
    return text;  // kept as a string rather than lost
  }
}

std::string score_text(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

std::string ms_text(double seconds) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f", seconds * 1e3);
  return buf;
}

// Every string of a document shown escaped (escape_control_chars): a report names paths and
// holds outputs a team chose. Only an "output" keeps its lines.
void escape_strings(json& doc, bool keep_newlines = false) {
  if (doc.is_string()) {
    doc = escape_control_chars(doc.get_ref<const std::string&>(), keep_newlines);
  } else if (doc.is_object()) {
    for (auto it = doc.begin(); it != doc.end(); ++it)
      escape_strings(it.value(), it.key() == "output");
  } else if (doc.is_array()) {
    for (json& e : doc) escape_strings(e, keep_newlines);
  }
}

bool on_gpu(const GradeResult& r) {
  const std::vector<std::string> cpu = variant_ids({}, "cpu");
  return std::find(cpu.begin(), cpu.end(), r.ranked_variant) == cpu.end();
}

}  // namespace

std::string report_json(const GradeResult& r) {
  json checks = json::array();
  for (const CheckResult& c : r.checks) {
    checks.push_back({{"id", c.id},
                      {"name", c.name},
                      {"kind", c.kind},
                      {"milestone", c.milestone},
                      {"status", status_name(c.status)},
                      {"reason", c.reason},
                      {"score", c.score},
                      {"max_score", c.max_score},
                      {"output", c.output},
                      {"hidden", c.hidden},
                      {"variant", c.variant},
                      {"model", c.model},
                      {"images", c.images},
                      {"expected_correct", opt(c.expected_correct)},
                      {"correct", opt(c.correct)},
                      {"op_time_s", opt(c.op_time_s)},
                      {"op_time_median_s", opt(c.op_time_median_s)},
                      {"op_time_runs_s", c.op_time_runs_s},
                      {"reference_time_s", opt(c.reference_time_s)},
                      {"worst_error", c.worst_error ? number(*c.worst_error) : json(nullptr)},
                      {"wall_s", c.wall_s},
                      {"details", embedded(c.details_json)}});
  }
  json report = {{"schema", kReportSchema},
                 {"grader_version", r.grader_version},
                 {"framework_hash", r.framework_hash},
                 {"team", r.team},
                 {"milestone", r.milestone},
                 {"submission", r.submission},
                 {"started_at", r.started_at},
                 {"duration_s", r.duration_s},
                 {"seed", r.seed},
                 {"score", r.score},
                 {"max_score", r.max_score},
                 {"op_time_s", opt(r.op_time_s)},
                 {"op_time_median_s", opt(r.op_time_median_s)},
                 {"reference_time_s", opt(r.reference_time_s)},
                 {"speedup", opt(r.speedup)},
                 {"ranked_variant", r.ranked_variant},
                 {"ranked_model", r.ranked_model},
                 {"ranked_images", r.ranked_images},
                 {"flags", r.flags},
                 {"partial", r.partial},
                 {"incomplete", r.incomplete},
                 {"points_not_checked", r.points_not_checked},
                 {"not_run", r.not_run},
                 {"only", r.only},
                 {"grader_error", r.grader_error},
                 {"machine",
                  {{"gpu_name", r.machine.gpu_name},
                   {"gpu_driver", r.machine.gpu_driver},
                   {"cuda_driver", r.machine.cuda_driver},
                   {"cpu_name", r.machine.cpu_name},
                   {"hostname", r.machine.hostname}}},
                 {"sandbox", embedded(r.sandbox_json)},
                 {"allow_degraded", r.allow_degraded},
                 {"degraded_features", r.degraded_features},
                 {"checks", checks}};
  escape_strings(report);
  return report.dump(2);
}

std::string gradescope_json(const GradeResult& r) {
  json tests = json::array();
  for (const CheckResult& c : r.checks) {
    json t = {{"name", c.name},
              {"score", c.score},
              {"max_score", c.max_score},
              {"status", c.status == CheckStatus::passed ? "passed" : "failed"},
              {"output", c.status == CheckStatus::skipped ? "Not run: " + c.output : c.output},
              {"visibility", c.hidden ? "after_published" : "visible"}};
    tests.push_back(t);
  }
  std::string output = "convlab grade " + r.milestone + ": " + score_text(r.score) + " of " +
                       score_text(r.max_score) + " points.";
  if (r.partial) output += " Partial grade: only some checks ran.";
  for (const std::string& line : r.not_run) output += "\nNot run: " + line;
  if (r.op_time_s) {
    output += " Op Time " + ms_text(*r.op_time_s) + " ms (" + r.ranked_variant + ", " +
              r.ranked_model + ", " + std::to_string(r.ranked_images) + " images)";
    if (r.speedup) {
      char buf[64];
      std::snprintf(buf, sizeof buf, ", %.2fx %s", *r.speedup,
                    on_gpu(r) ? "the speed of cuDNN" : "the speed of the library convolution");
      output += buf;
    }
    output += ".";
  } else if (!r.ranked_variant.empty()) {
    output += " No ranked time: it counts only when every correctness check of " +
              r.ranked_variant + " passes.";
  }
  if (!r.machine.gpu_name.empty()) output += " GPU: " + r.machine.gpu_name + ".";
  if (!r.grader_error.empty()) output += "\nThe grade is incomplete: " + r.grader_error;
  json doc = {{"score", r.score},
              {"execution_time", static_cast<long long>(std::lround(r.duration_s))},
              {"output", output},
              {"tests", tests}};
  if (r.op_time_s) {
    json board = json::array();
    board.push_back({{"name", "Op Time (ms)"}, {"value", *r.op_time_s * 1e3}, {"order", "asc"}});
    if (r.speedup) {
      board.push_back({{"name", on_gpu(r) ? "Speedup vs cuDNN" : "Speedup vs library conv"},
                       {"value", *r.speedup},
                       {"order", "desc"}});
    }
    doc["leaderboard"] = board;
  }
  escape_strings(doc);
  return doc.dump(2);
}

std::string run_lines(const GradeResult& r) {
  std::vector<const CheckResult*> runs;
  for (const CheckResult& c : r.checks) {
    if (c.kind == "network") {
      runs.push_back(&c);
    } else if (c.status == CheckStatus::failed) {
      return summary_table(r);
    }
  }
  std::string out;
  for (const CheckResult* c : runs) {
    if (runs.size() > 1) out += c->variant + ":\n";
    if (c->status != CheckStatus::passed || !c->correct || c->images <= 0) {
      out += std::string(status_name(c->status)) + " (" + c->reason + "): " + c->output + "\n";
      continue;
    }
    if (c->op_time_s) out += "Op Time: " + format_seconds(*c->op_time_s) + "\n";
    out += "Correctness: " +
           format_accuracy(static_cast<double>(*c->correct) / static_cast<double>(c->images)) +
           " Model: " + c->model + "\n";
  }
  return out;
}

std::string summary_table(const GradeResult& r) {
  std::vector<std::vector<std::string>> rows;
  for (const CheckResult& c : r.checks) {
    // A check not run is neither scored nor failed: no score of 0 that reads as a failure.
    const bool not_run = c.status == CheckStatus::skipped;
    rows.push_back(
        {c.id, not_run ? "not run" : status_name(c.status),
         (not_run ? std::string("-") : score_text(c.score)) + "/" + score_text(c.max_score),
         c.reason});
  }
  std::string out = format_table({"check", "status", "score", "reason"}, rows, {2});
  if (r.points_not_checked > 0) {
    // The total of what ran, then what did not: "0 / 32" would read as a failing grade.
    const double checked = r.max_score - r.points_not_checked;
    out += checked > 0 ? "\nTotal: " + score_text(r.score) + " / " + score_text(checked) +
                             " points checked here"
                       : std::string("\nTotal: no points checked here");
    out += "; incomplete: " + score_text(r.points_not_checked) + " of " + score_text(r.max_score) +
           " points not checked here";
  } else {
    out += "\nTotal: " + score_text(r.score) + " / " + score_text(r.max_score) + " points";
    if (r.incomplete) out += "; incomplete: not every check ran here";
  }
  if (!r.only.empty() && r.partial) out += " (partial: --only)";
  out += "\n";
  if (!r.not_run.empty()) {
    out += "Not run here:\n";
    for (const std::string& line : r.not_run) out += "  " + line + "\n";
  }
  if (r.points_not_checked > 0) {
    out +=
        "Those points are neither scored nor failed: grade again on the course's GPU machine "
        "for them.\n";
  }
  if (r.op_time_s) {
    out += "Op Time: " + format_seconds(*r.op_time_s) + " s (" + r.ranked_variant + ", " +
           r.ranked_model + ", " + std::to_string(r.ranked_images) + " images)";
    if (r.speedup) {
      char buf[48];
      std::snprintf(buf, sizeof buf, ", speedup %.2fx vs %s", *r.speedup,
                    on_gpu(r) ? "cuDNN" : "the library convolution");
      out += buf;
    }
    out += "\n";
  }
  for (const std::string& f : r.flags) out += "Flag: " + f + "\n";
  if (!r.grader_error.empty()) out += "Grader error: " + r.grader_error + "\n";
  return escape_control_chars(out, true);
}

void write_reports(const GradeResult& result, const fs::path& out) {
  std::error_code ec;
  fs::create_directories(out, ec);
  const auto write = [&](const char* name, const std::string& text) {
    std::ofstream f(out / name);
    f << text << "\n";
    if (!f) throw Error("cannot write " + (out / name).string() + ": choose another --out");
  };
  write("report.json", report_json(result));
  write("results.json", gradescope_json(result));
}

}  // namespace convlab::grader
