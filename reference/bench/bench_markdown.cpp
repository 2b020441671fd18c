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

std::string machine_line(const json& r) {
  const json& m = r.at("machine");
  return m.at("gpu").get<std::string>() + ", driver " + m.at("driver").get<std::string>() +
         ", CUDA runtime " + m.at("cuda_runtime").get<std::string>() + ", cuDNN " +
         m.at("cudnn").get<std::string>() + "; batch " + std::to_string(r.at("batch").get<int>()) +
         ", " + std::to_string(r.at("runs").get<int>()) + " timed runs per layer, L2 " +
         (r.at("l2_flush").get<bool>() ? "flushed" : "warm") + "; times in ms, fastest run.\n";
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

std::string bench_markdown(const std::vector<BenchJson>& reports) {
  std::ostringstream out;
  for (const BenchJson& report : reports) {
    try {
      const json r = json::parse(report.text);
      if (!r.is_object() || r.value("command", "") != "bench") {
        throw Error(report.origin + ": not a convlab bench report (no \"command\": \"bench\")");
      }
      out << "### `--net " << r.at("net").get<std::string>() << "`\n\n"
          << machine_line(r) << "\n"
          << layer_table(r) << "\n"
          << variant_table(r) << "\n";
    } catch (const json::exception& e) {
      throw Error(report.origin + ": not a bench report this convlab can read (" + e.what() +
                  "); write it again with this convlab's bench --json FILE");
    }
  }
  return out.str();
}

}  // namespace convlab
