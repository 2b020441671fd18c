#include "reference/bench/bench_markdown.hpp"

#include <nlohmann/json.hpp>

#include <cstdio>
#include <optional>
#include <sstream>

#include "reference/bench/bench_report.hpp"
#include "reference/core/error.hpp"

namespace convlab {
namespace {

using nlohmann::json;

std::string fixed(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

std::string row(const std::vector<std::string>& cells) {
  std::string r = "|";
  for (const std::string& c : cells) r += " " + c + " |";
  return r + "\n";
}

// The header row and its separator; `right` says which columns hold numbers.
std::string header(const std::vector<std::string>& names, const std::vector<bool>& right) {
  std::string sep = "|";
  for (bool r : right) sep += r ? " ---: |" : " --- |";
  return row(names) + sep + "\n";
}

ConvShape shape_of(const json& layer) {
  const json& s = layer.at("shape");
  return {s.at("B").get<int>(), s.at("M").get<int>(), s.at("C").get<int>(),
          s.at("H").get<int>(), s.at("W").get<int>(), s.at("K").get<int>()};
}

// A timing's min, or none when it was not timed.
std::optional<double> min_of(const json& timing) {
  if (!timing.is_object() || !timing.contains("min_s")) return std::nullopt;
  const double s = timing.at("min_s").get<double>();
  return s > 0 ? std::optional<double>(s) : std::nullopt;
}

const json* cudnn_of(const json& layer, const std::string& precision) {
  const json& all = layer.at("cudnn");
  if (!all.contains(precision) || all.at(precision).contains("not_measured")) return nullptr;
  return &all.at(precision);
}

// The run's settings, above a report's tables.
std::string run_line(const json& r) {
  const int warmup = r.at("warmup").get<int>();
  return "Batch " + std::to_string(r.at("batch").get<int>()) + "; per layer " +
         std::to_string(warmup) + (warmup == 1 ? " warm-up call, then " : " warm-up calls, then ") +
         std::to_string(r.at("runs").get<int>()) + " timed runs, L2 " +
         (r.at("l2_flush").get<bool>() ? "flushed before each" : "left warm") +
         "; times in ms, the fastest run and the median.\n";
}

// `text` as inline code. Built piecewise: g++ 12 warns (-Wrestrict, wrongly) on "`" + string.
std::string code(const std::string& text) {
  std::string c = "`";
  c += text;
  c += '`';
  return c;
}

// A rate in units of `unit` (1e12: TFLOP/s), "-" where it was not measured or tabulated.
std::string rate(const json& v, double unit, int digits) {
  const double x = v.is_number() ? v.get<double>() : 0.0;
  return x > 0 ? fixed(x / unit, digits) : "-";
}

// A report's measured ceilings, a row of the machine section's second table.
std::string measured_row(const json& r) {
  const json& m = r.at("machine");
  const double fp32 = m.at("physical_peak_flops").at("fp32").get<double>();
  const double copy = m.at("memory_bandwidth_bytes_per_s").get<double>();
  return row({code(r.at("net").get<std::string>()), rate(m.at("fp32_peak_flops"), 1e12, 1),
              rate(m.at("memory_bandwidth_bytes_per_s"), 1e9, 0),
              rate(m.value("write_bandwidth_bytes_per_s", json(0.0)), 1e9, 0),
              fp32 > 0 && copy > 0 ? fixed(fp32 / copy, 1) : "-"});
}

// The GPU, its software and physical peaks (of the first report: one GPU), and the header of
// the table of the ceilings each report measured (measured_row).
std::string machine_section(const json& first) {
  const json& m = first.at("machine");
  const int cc = m.at("compute_capability").get<int>();
  std::string t = "## Machine\n\n";
  t += header({"GPU", "compute capability", "SMs", "clock (MHz)", "L2 (MiB)", "driver",
               "CUDA runtime", "cuDNN"},
              {false, false, true, true, true, false, false, false});
  t += row({m.at("gpu").get<std::string>(), std::to_string(cc / 10) + "." + std::to_string(cc % 10),
            std::to_string(m.at("sm_count").get<int>()), rate(m.at("clock_hz"), 1e6, 0),
            rate(m.at("l2_bytes"), 1 << 20, 1), m.at("driver").get<std::string>(),
            m.at("cuda_runtime").get<std::string>(), m.at("cudnn").get<std::string>()});
  const json& peaks = m.at("physical_peak_flops");
  t += "\nPhysical peaks (TFLOP/s, dense, at the reported clock): fp32 " +
       rate(peaks.at("fp32"), 1e12, 1) + ", tf32 " + rate(peaks.at("tf32"), 1e12, 1) + ", fp16 " +
       rate(peaks.at("fp16"), 1e12, 1) + "; theoretical memory bandwidth " +
       rate(m.at("memory_bandwidth_theoretical_bytes_per_s"), 1e9, 0) + " GB/s.\n\n";
  t += "Measured by each run:\n\n";
  t += header({"net", "fp32 SGEMM (TFLOP/s)", "copy bandwidth (GB/s)", "write bandwidth (GB/s)",
               "fp32 ridge (flops/byte)"},
              {false, true, true, true, true});
  return t;
}

// "[name](path)" for a report with a file, "name" for one measured in this run.
std::string source_list(const std::vector<json>& reports, const std::vector<std::string>& files) {
  std::string s;
  for (std::size_t i = 0; i < reports.size(); ++i) {
    if (i > 0) s += i + 1 == reports.size() ? " and " : ", ";
    const std::string net = code(reports[i].at("net").get<std::string>());
    s += i < files.size() && !files[i].empty() ? "[" + net + "](" + files[i] + ")" : net;
  }
  return s;
}

// Per layer: its work and bound, cuDNN fp32, and the fastest correct fp32-class variant.
std::string layer_table(const json& r) {
  std::string t =
      header({"layer", "shape", "GFLOP", "flops/byte", "fp32 bound", "limit", "cuDNN fp32",
              "median", "algorithm", "fastest variant", "ours", "median", "cuDNN/ours"},
             {false, false, true, true, true, false, true, true, false, false, true, true, true});
  for (const json& layer : r.at("layers")) {
    const json& roof = layer.at("roofline");
    const json& bound = roof.at("bounds").at("fp32");
    std::vector<std::string> cells = {layer.at("name").get<std::string>(),
                                      shape_text(shape_of(layer)),
                                      fixed(roof.at("flops").get<double>() / 1e9, 2),
                                      fixed(roof.at("intensity").get<double>(), 1),
                                      ms_text(bound.at("seconds").get<double>()),
                                      bound.at("limit").get<std::string>()};
    const json* cu = cudnn_of(layer, "fp32");
    const double cu_min = cu ? min_of(*cu).value_or(0.0) : 0.0;  // 0: not measured
    cells.push_back(cu_min > 0 ? ms_text(cu_min) : "-");
    cells.push_back(cu_min > 0 ? ms_text(cu->at("median_s").get<double>()) : "-");
    cells.push_back(cu_min > 0 ? cu->at("algorithm").get<std::string>() : "-");
    const json* best = nullptr;
    double best_min = 0.0;
    for (const json& v : layer.at("variants")) {
      const double v_min = min_of(v).value_or(0.0);
      if (v.at("status") != "ok" || v.at("precision") != "fp32" || !(v_min > 0)) continue;
      if (best == nullptr || v_min < best_min) {
        best = &v;
        best_min = v_min;
      }
    }
    if (best != nullptr) {
      cells.push_back(best->at("variant").get<std::string>());
      cells.push_back(ms_text(best_min));
      cells.push_back(ms_text(best->at("median_s").get<double>()));
      cells.push_back(cu_min > 0 ? fixed(cu_min / best_min, 2) : "-");
    } else {
      cells.insert(cells.end(), {"-", "-", "-", "-"});
    }
    t += row(cells);
  }
  return t;
}

// Per variant, over the net: totals of min and median, cuDNN of its class, % of the bound.
std::string variant_table(const json& r) {
  std::string t = header({"variant", "class", "total", "median", "cuDNN of its class", "cuDNN/ours",
                          "% bound", "correct layers"},
                         {false, false, true, true, true, true, true, true});
  const json& layers = r.at("layers");
  for (const json& info : r.at("variants")) {
    const std::string name = info.at("name").get<std::string>();
    const std::string precision = info.at("precision").get<std::string>();
    double total = 0, median = 0, cudnn = 0, bound = 0;
    std::size_t ok = 0, cudnn_layers = 0, bound_layers = 0;
    for (const json& layer : layers) {
      for (const json& v : layer.at("variants")) {
        if (v.at("variant") != name) continue;
        if (v.at("status") == "ok" && min_of(v)) {
          ++ok;
          total += *min_of(v);
          median += v.at("median_s").get<double>();
        }
      }
      if (const json* cu = cudnn_of(layer, precision); cu && min_of(*cu)) {
        ++cudnn_layers;
        cudnn += *min_of(*cu);
      }
      const json& bounds = layer.at("roofline").at("bounds");
      if (bounds.contains(precision)) {
        ++bound_layers;
        bound += bounds.at(precision).at("seconds").get<double>();
      }
    }
    const bool whole = ok == layers.size();
    t += row({name, precision, whole ? ms_text(total) : "-", whole ? ms_text(median) : "-",
              cudnn_layers == layers.size() ? ms_text(cudnn) : "-",
              whole && cudnn_layers == layers.size() ? fixed(cudnn / total, 2) : "-",
              whole && bound_layers == layers.size() ? fixed(100 * bound / total, 1) : "-",
              std::to_string(ok) + " of " + std::to_string(layers.size())});
  }
  return t;
}

}  // namespace

std::string bench_markdown(const std::vector<BenchJson>& reports, const BenchPageLinks& links) {
  if (reports.empty()) throw Error("no bench report to write a page of");
  std::vector<json> parsed;
  std::ostringstream sections;
  std::string machine, measured;
  for (const BenchJson& report : reports) {
    try {
      json r = json::parse(report.text);
      if (!r.is_object() || r.value("command", "") != "bench") {
        throw Error(report.origin + ": not a convlab bench report (no \"command\": \"bench\")");
      }
      const std::string gpu = r.at("machine").at("gpu").get<std::string>();
      if (!parsed.empty()) {
        const std::string first = parsed.front().at("machine").at("gpu").get<std::string>();
        if (gpu != first) {
          throw Error(report.origin + ": measured on " + gpu + ", the first report on " + first +
                      ": a page holds the reports of one GPU, so write a page per GPU");
        }
        sections << "\n";
      }
      if (parsed.empty()) machine = machine_section(r);
      measured += measured_row(r);
      sections << "## `--net " << r.at("net").get<std::string>() << "`\n\n"
               << run_line(r) << "\n"
               << layer_table(r) << "\n"
               << variant_table(r);
      parsed.push_back(std::move(r));
    } catch (const json::exception& e) {
      throw Error(report.origin + ": not a bench report this convlab can read (" + e.what() +
                  "); write it again with this convlab's bench --json FILE");
    }
  }
  const json& first = parsed.front();
  const std::string gpu = first.at("machine").at("gpu").get<std::string>();
  std::ostringstream out;
  out << "# Bench figures: " << gpu << "\n\n"
      << "Generated by `convlab bench --markdown` from the bench reports of "
      << source_list(parsed, links.reports) << " ("
      << (first.value("impl", "") == "solution" ? "the staff solutions" : "the team's code")
      << "): regenerate it, do not edit it by hand. docs/performance.md says how convlab measures "
         "and how to read these figures.\n\n";
  out << machine << measured << "\n";
  if (!links.svg.empty()) {
    out << "## Roofline\n\n![Roofline on the " << gpu << "](" << links.svg << ")\n\n";
  }
  return out.str() + sections.str();
}

}  // namespace convlab
