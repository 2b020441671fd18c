#include "reference/bench/bench_report.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <string_view>
#include <tuple>

#include "reference/core/error.hpp"
#include "reference/core/format.hpp"
#include "reference/core/parallel.hpp"

namespace convlab {

using nlohmann::json;

double TimingStats::spread() const {
  return median_s > 0.0 ? (max_s - min_s) / median_s : 0.0;
}

TimingStats summarize(std::vector<double> samples_s) {
  if (samples_s.empty()) throw Error("no timed runs to summarize");
  TimingStats t;
  t.samples_s = samples_s;
  std::sort(samples_s.begin(), samples_s.end());
  const std::size_t n = samples_s.size();
  t.min_s = samples_s.front();
  t.max_s = samples_s.back();
  t.median_s = n % 2 == 1 ? samples_s[n / 2] : 0.5 * (samples_s[n / 2 - 1] + samples_s[n / 2]);
  return t;
}

Tolerance tolerance_for(const ConvShape& shape, Precision precision) {
  const std::int64_t n = std::int64_t{shape.C} * shape.K * shape.K;
  const double terms = static_cast<double>(n);
  Tolerance t{1e-4 * std::sqrt(terms), 1e-4};
  if (precision != Precision::fp32) t.atol += elementwise_bound(precision, n, terms, 1.0, 1.0);
  return t;
}

OutputCheck check_output(const std::vector<float>& out, const std::vector<float>& ref,
                         const ConvShape& shape, const Tolerance& tolerance) {
  OutputCheck c;
  c.atol = tolerance.atol;
  c.rtol = tolerance.rtol;
  if (out.size() != ref.size() || static_cast<std::int64_t>(out.size()) != shape.y_elements()) {
    c.ok = false;
    c.mismatches = shape.y_elements();
    c.first_mismatch = "output has " + std::to_string(out.size()) + " elements, expected " +
                       std::to_string(shape.y_elements());
    return c;
  }
  std::mutex merge;
  std::int64_t first = -1;
  parallel_for(static_cast<std::int64_t>(out.size()), [&](std::int64_t begin, std::int64_t end) {
    double worst = 0.0;
    std::int64_t bad = 0, first_bad = -1;
    for (std::int64_t i = begin; i < end; ++i) {
      const auto u = static_cast<std::size_t>(i);
      const double err = std::fabs(static_cast<double>(out[u]) - ref[u]);
      if (std::isfinite(err)) worst = std::max(worst, err);
      if (!(err <= tolerance.atol + tolerance.rtol * std::fabs(static_cast<double>(ref[u])))) {
        if (first_bad < 0) first_bad = i;  // NaN lands here too: the comparison is false
        ++bad;
      }
    }
    const std::lock_guard<std::mutex> lock(merge);
    c.worst_error = std::max(c.worst_error, worst);
    c.mismatches += bad;
    if (first_bad >= 0 && (first < 0 || first_bad < first)) first = first_bad;
  });
  c.ok = c.mismatches == 0;
  if (first >= 0) {
    const std::int64_t hw = std::int64_t{shape.H_out()} * shape.W_out();
    const std::int64_t b = first / (hw * shape.M), m = first / hw % shape.M;
    const std::int64_t h = first % hw / shape.W_out(), w = first % shape.W_out();
    std::ostringstream s;
    s << "y[" << b << "][" << m << "][" << h << "][" << w
      << "] = " << out[static_cast<std::size_t>(first)] << ", expected "
      << ref[static_cast<std::size_t>(first)];
    c.first_mismatch = s.str();
  }
  return c;
}

const char* bench_status_name(BenchStatus status) {
  switch (status) {
    case BenchStatus::ok:
      return "ok";
    case BenchStatus::wrong:
      return "wrong";
    case BenchStatus::not_implemented:
      return "not_implemented";
    case BenchStatus::error:
      return "error";
  }
  return "error";
}

const CudnnResult& LayerResult::cudnn_for(Precision precision) const {
  for (const CudnnResult& c : cudnn) {
    if (c.precision == precision) return c;
  }
  throw Error("layer " + name + " has no cuDNN figures of the " +
              std::string(precision_name(precision)) + " class");
}

namespace {

std::string printf_text(const char* format, double value) {
  char buf[64];
  std::snprintf(buf, sizeof buf, format, value);
  return buf;
}

}  // namespace

std::string ms_text(double seconds) {
  const double ms = seconds * 1e3;
  if (ms >= 1000) return printf_text("%.0f", ms);
  if (ms >= 100) return printf_text("%.1f", ms);
  if (ms >= 10) return printf_text("%.2f", ms);
  if (ms >= 1) return printf_text("%.3f", ms);
  return printf_text("%.4f", ms);
}

std::string bytes_text(double bytes) {
  if (bytes < 1024) return printf_text("%.0f B", bytes);
  if (bytes < 1024.0 * 1024) return printf_text("%.1f KiB", bytes / 1024);
  if (bytes < 1024.0 * 1024 * 1024) return printf_text("%.1f MiB", bytes / (1024.0 * 1024));
  return printf_text("%.2f GiB", bytes / (1024.0 * 1024 * 1024));
}

std::string shape_text(const ConvShape& s) {
  return "C=" + std::to_string(s.C) + " M=" + std::to_string(s.M) + " K=" + std::to_string(s.K) +
         " " + std::to_string(s.H) + "x" + std::to_string(s.W);
}

namespace {

double gflops(double flops, double seconds) {
  return seconds > 0 ? flops / seconds / 1e9 : 0.0;
}

bool timed(BenchStatus s) {
  return s == BenchStatus::ok || s == BenchStatus::wrong;
}

std::string plural(std::size_t n, const std::string& word) {
  return std::to_string(n) + " " + word + (n == 1 ? "" : "s");
}

// The roofline bound of `shape` in class `precision` on the report's GPU, or none where the
// class has no tabulated ceiling (or nothing was measured).
std::optional<RooflineBound> class_bound(const BenchMachine& m, const ConvShape& shape,
                                         Precision precision) {
  const Ceilings c = m.ceilings();
  if (!(c.peak(precision) > 0) || !(c.bandwidth > 0)) return std::nullopt;
  return roofline_bound(conv_traffic(shape), c.peak(precision), c.bandwidth);
}

// The classes the report's roofline table shows.
std::vector<Precision> report_classes(const BenchReport& r) {
  std::vector<Precision> used;
  for (const VariantInfo& v : r.variants) used.push_back(v.precision);
  return classes_in_use(used);
}

void append(std::vector<std::string>& row, const std::vector<std::string>& cells) {
  row.insert(row.end(), cells.begin(), cells.end());
}

// Min, median and spread of timed runs.
std::vector<std::string> time_cells(const TimingStats& t) {
  return {ms_text(t.min_s), ms_text(t.median_s), printf_text("%.1f%%", 100 * t.spread())};
}

// GFLOP/s, percent of the measured SGEMM peak and percent of the roofline bound (`bound_s`,
// the bound's time, 0 for none) of a run of `seconds`; "-" where a figure is undefined.
std::vector<std::string> rate_cells(double flops, double seconds, double sgemm_peak,
                                    double bound_s) {
  if (!(seconds > 0)) return {"-", "-", "-"};
  return {printf_text("%.0f", gflops(flops, seconds)),
          sgemm_peak > 0 ? printf_text("%.1f", 100.0 * flops / seconds / sgemm_peak) : "-",
          bound_s > 0 ? printf_text("%.1f", 100.0 * bound_s / seconds) : "-"};
}

// What a variant's table adds up over the layers.
struct Totals {
  double ours_min = 0, ours_med = 0, cudnn_min = 0, cudnn_med = 0, flops = 0, bound_s = 0;
  bool cudnn = true, bound = true;  // every layer has cuDNN figures, a bound
  int ok = 0, wrong = 0, missing = 0, failed = 0;

  void count(BenchStatus s) {
    switch (s) {
      case BenchStatus::ok:
        ++ok;
        break;
      case BenchStatus::wrong:
        ++wrong;
        break;
      case BenchStatus::not_implemented:
        ++missing;
        break;
      case BenchStatus::error:
        ++failed;
        break;
    }
  }

  std::string summary() const {
    std::string s;
    const auto add = [&](int n, const char* what) {
      if (n > 0) s += (s.empty() ? "" : ", ") + std::to_string(n) + " " + what;
    };
    add(ok, "ok");
    add(wrong, "WRONG");
    add(missing, "not implemented");
    add(failed, "error");
    return s;
  }
};

const char* status_cell(BenchStatus s) {
  switch (s) {
    case BenchStatus::ok:
      return "ok";
    case BenchStatus::wrong:
      return "WRONG";
    case BenchStatus::not_implemented:
      return "not implemented";
    case BenchStatus::error:
      return "error";
  }
  return "error";
}

// One layer's row of variant `v`'s table; adds the layer to `tot`.
std::vector<std::string> layer_row(const BenchReport& r, const LayerResult& layer, std::size_t v,
                                   Totals& tot) {
  const VariantResult& vr = layer.variants.at(v);
  const Precision precision = r.variants.at(v).precision;
  const CudnnResult& cu = layer.cudnn_for(precision);
  const bool has_cudnn = cu.not_measured.empty();
  const double f = layer.shape.flops(), peak = r.machine.fp32_peak;
  const std::optional<RooflineBound> bound = class_bound(r.machine, layer.shape, precision);
  const double bound_s = bound ? bound->seconds : 0.0;
  // A wrong kernel's speed is not a result: no ratio, no GFLOP/s.
  const bool good = vr.status == BenchStatus::ok;

  std::vector<std::string> row{layer.name, shape_text(layer.shape)};
  append(row, timed(vr.status) ? time_cells(vr.time) : std::vector<std::string>(3, "-"));
  append(row, has_cudnn ? time_cells(cu.time) : std::vector<std::string>(3, "-"));
  row.push_back(good && has_cudnn ? printf_text("%.2f", cu.time.min_s / vr.time.min_s) : "-");
  row.push_back(has_cudnn ? cu.algorithm : "not measured");
  row.push_back(has_cudnn ? bytes_text(static_cast<double>(cu.workspace_bytes)) : "-");
  append(row, rate_cells(f, good ? vr.time.min_s : 0.0, peak, bound_s));
  append(row, rate_cells(f, has_cudnn ? cu.time.min_s : 0.0, peak, bound_s));
  row.push_back(status_cell(vr.status));

  tot.count(vr.status);
  tot.ours_min += vr.time.min_s;
  tot.ours_med += vr.time.median_s;
  tot.cudnn_min += cu.time.min_s;
  tot.cudnn_med += cu.time.median_s;
  tot.flops += f;
  tot.bound_s += bound_s;
  tot.cudnn = tot.cudnn && has_cudnn;
  tot.bound = tot.bound && bound.has_value();
  return row;
}

// The total row: it compares the whole net only when every layer ran correctly.
std::vector<std::string> total_row(const Totals& t, std::size_t layers, double peak) {
  const bool all_ok = t.ok == static_cast<int>(layers);
  const double bound_s = t.bound ? t.bound_s : 0.0;
  std::vector<std::string> row{"total", ""};
  append(row, all_ok ? std::vector<std::string>{ms_text(t.ours_min), ms_text(t.ours_med), ""}
                     : std::vector<std::string>{"-", "-", ""});
  append(row, t.cudnn ? std::vector<std::string>{ms_text(t.cudnn_min), ms_text(t.cudnn_med), ""}
                      : std::vector<std::string>{"-", "-", ""});
  row.push_back(all_ok && t.cudnn ? printf_text("%.2f", t.cudnn_min / t.ours_min) : "-");
  append(row, {"", ""});
  append(row, rate_cells(t.flops, all_ok ? t.ours_min : 0.0, peak, bound_s));
  append(row, rate_cells(t.flops, t.cudnn ? t.cudnn_min : 0.0, peak, bound_s));
  row.push_back(t.summary());
  return row;
}

// One variant's table: a row per layer, then the total.
std::string variant_table(const BenchReport& r, std::size_t v) {
  std::vector<std::vector<std::string>> rows;
  Totals tot;
  for (const LayerResult& layer : r.layers) rows.push_back(layer_row(r, layer, v, tot));
  rows.push_back(total_row(tot, r.layers.size(), r.machine.fp32_peak));
  const std::vector<std::string> header{
      "layer",   "shape",   "ours (ms)",     "median",          "spread",    "cuDNN (ms)",
      "median",  "spread",  "cuDNN/ours",    "cuDNN algorithm", "workspace", "ours GFLOP/s",
      "% SGEMM", "% bound", "cuDNN GFLOP/s", "% SGEMM",         "% bound",   "check"};
  return format_table(header, rows, {2, 3, 4, 5, 6, 7, 8, 10, 11, 12, 13, 14, 15, 16});
}

// The time to write y at the measured write bandwidth, where it was measured.
std::optional<double> write_floor_seconds(const BenchMachine& m, const ConvShape& shape) {
  if (!(m.write_bandwidth > 0)) return std::nullopt;
  return static_cast<double>(shape.y_elements()) * sizeof(float) / m.write_bandwidth;
}

// Per layer: work, compulsory traffic, intensity, the floor of writing y (where the write
// bandwidth was measured) and the bound of every class in use.
std::string roofline_table(const BenchReport& r) {
  const std::vector<Precision> classes = report_classes(r);
  const bool write_floor = r.machine.write_bandwidth > 0;
  std::vector<std::string> header{"layer", "shape", "GFLOP", "MB moved", "flops/byte"};
  if (write_floor) header.push_back("y write floor (ms)");
  for (Precision c : classes) {
    header.insert(header.end(),
                  {std::string(precision_name(c)) + " bound (ms)", "TFLOP/s", "limit"});
  }
  std::vector<std::vector<std::string>> rows;
  for (const LayerResult& layer : r.layers) {
    const LayerTraffic t = conv_traffic(layer.shape);
    std::vector<std::string> row{
        layer.name, shape_text(layer.shape), printf_text("%.3f", t.flops / 1e9),
        printf_text("%.1f", t.bytes / 1e6), printf_text("%.1f", t.intensity())};
    if (const auto floor = write_floor_seconds(r.machine, layer.shape)) {
      row.push_back(ms_text(*floor));
    }
    for (Precision c : classes) {
      const std::optional<RooflineBound> b = class_bound(r.machine, layer.shape, c);
      if (b) {
        row.insert(row.end(), {ms_text(b->seconds), printf_text("%.1f", b->flops_per_s / 1e12),
                               b->memory_bound ? "memory" : "compute"});
      } else {
        row.insert(row.end(), {"-", "-", "-"});
      }
    }
    rows.push_back(std::move(row));
  }
  std::vector<int> right{2, 3, 4};
  const int first = write_floor ? 6 : 5;  // the first class's bound
  if (write_floor) right.push_back(5);
  for (std::size_t i = 0; i < classes.size(); ++i) {
    right.insert(right.end(),
                 {static_cast<int>(first + 3 * i), static_cast<int>(first + 1 + 3 * i)});
  }
  return format_table(header, rows, right);
}

std::string tflops_text(double flops_per_s) {
  return printf_text("%.1f", flops_per_s / 1e12) + " TFLOP/s";
}

// The header's lines on the GPU's ceilings: physical and measured peaks, bandwidths.
std::string ceilings_text(const BenchMachine& m) {
  const DeviceSpec& d = m.device;
  const Ceilings c = m.ceilings();
  const SmRates rates = sm_rates(d.compute_capability);
  const std::string clock = printf_text("%.0f MHz", d.clock_hz / 1e6);
  const std::string sms = std::to_string(d.sm_count) + " SMs x ";
  std::ostringstream out;
  out << "fp32 peak: ";
  if (c.fp32 > 0) {
    out << tflops_text(c.fp32) << " physical (" << sms << printf_text("%.0f", rates.fp32)
        << " flops per clock x " << clock << "), ";
  } else {
    out << "physical peak not tabulated for this compute capability, ";
  }
  out << tflops_text(m.fp32_peak) << " measured (" << m.fp32_peak_method << ")\n";
  out << "tensor-core peaks (dense, physical): ";
  for (const auto& [name, peak, rate] :
       {std::tuple{"tf32", c.tf32, rates.tf32}, std::tuple{"fp16", c.fp16, rates.fp16}}) {
    out << name << " ";
    if (peak > 0) {
      out << tflops_text(peak) << " (" << sms << printf_text("%.0f", rate) << " x " << clock << ")";
    } else {
      out << "none (not tabulated for this compute capability)";
    }
    out << (std::string_view(name) == "tf32" ? "; " : "\n");
  }
  out << "memory bandwidth: " << printf_text("%.0f", m.hbm_bandwidth / 1e9) << " GB/s measured ("
      << m.hbm_method << "), " << printf_text("%.0f", theoretical_bandwidth(d) / 1e9)
      << " GB/s theoretical (2 x " << printf_text("%.0f MHz", d.memory_clock_hz / 1e6) << " x "
      << d.memory_bus_bits << "-bit bus)\n";
  if (m.write_bandwidth > 0) {
    out << "write bandwidth: " << printf_text("%.0f", m.write_bandwidth / 1e9) << " GB/s measured ("
        << m.write_method << "): a layer's output bytes over it are the floor of writing them\n";
  }
  return out.str();
}

// The header: what ran where, the ceilings, and how it was measured.
std::string header_text(const BenchReport& r) {
  const BenchMachine& m = r.machine;
  std::ostringstream out;
  out << "convlab bench: net " << r.net << " (" << r.net_file << "), "
      << plural(r.layers.size(), "conv layer") << ", batch " << r.batch << ", " << r.impl
      << " code\n";
  out << "GPU: " << m.gpu << " (compute capability " << m.device.compute_capability / 10 << "."
      << m.device.compute_capability % 10 << ", " << m.device.sm_count << " SMs at "
      << printf_text("%.0f MHz", m.device.clock_hz / 1e6) << ", "
      << bytes_text(static_cast<double>(m.l2_bytes)) << " L2), driver " << m.driver << " (CUDA "
      << m.cuda_driver << "), CUDA runtime " << m.cuda_runtime << ", cuDNN " << m.cudnn << "\n";
  out << ceilings_text(m);
  out << "method: per layer and implementation, 1 checked call, "
      << plural(r.warmup, "warm-up call") << ", then " << plural(r.runs, "run")
      << " timed with CUDA events";
  if (r.l2_flush) {
    out << ", L2 flushed before each (" << bytes_text(static_cast<double>(r.flush_bytes))
        << " written)";
  } else {
    out << ", L2 not flushed (--no-flush: y is still poisoned before each run, as in "
           "convlab run)";
  }
  out << "; min and median in ms, spread = (max - min) / median\n";
  out << "check: inputs uniform in [-1, 1) (seed " << r.seed
      << "); every output is compared with cuDNN's IMPLICIT_GEMM (fp32) within "
         "1e-4*sqrt(C*K*K) + 1e-4*|ref| (a tf32 or fp16 variant: plus its class's worst-case "
         "bound for |x|, |k| < 1, docs/grader.md), after the first call and after the last "
         "timed run\n";
  out << "cuDNN: each variant is compared with cuDNN of its precision class; fp32: the fastest "
         "algorithm of cudnnFindConvolutionForwardAlgorithmEx with FMA math (no TF32), timed the "
         "same way; tf32: the same with TENSOR_OP math (TF32 tensor cores allowed); fp16: x and k "
         "rounded to half on the device, cuDNN's half convolution with float accumulation, y "
         "converted back, all in the timed call\n";
  out << "GFLOP/s: the direct convolution's 2*C*K*K flops per output over the min time; % SGEMM: "
         "of the measured fp32 peak; % bound: the roofline bound's time over the min time, the "
         "bound of the variant's class. FFT and Winograd algorithms do fewer operations, so "
         "cuDNN's may pass 100%\n";
  return out.str();
}

// The notes under the tables: failed checks and errors, cuDNN's own check.
std::string notes_text(const BenchReport& r) {
  std::string notes;
  for (std::size_t v = 0; v < r.variants.size(); ++v) {
    for (const LayerResult& layer : r.layers) {
      const VariantResult& vr = layer.variants.at(v);
      const std::string who = r.variants[v].name + ", " + layer.name + ": ";
      if (vr.status == BenchStatus::wrong) {
        notes += who + "WRONG: " + std::to_string(vr.check.mismatches) + " of " +
                 std::to_string(layer.shape.y_elements()) +
                 " outputs differ from cuDNN by more than " + printf_text("%.2g", vr.check.atol) +
                 " + " + printf_text("%.2g", vr.check.rtol) + "*|ref|; first " +
                 vr.check.first_mismatch + "; worst error " +
                 printf_text("%.3g", vr.check.worst_error) + "." +
                 (vr.message.empty() ? "" : " " + vr.message) + "\n";
      } else if (vr.status == BenchStatus::error) {
        notes += who + "error: " + vr.message + "\n";
      }
    }
  }
  for (const LayerResult& layer : r.layers) {
    for (const CudnnResult& cu : layer.cudnn) {
      const std::string who =
          "cuDNN " + std::string(precision_name(cu.precision)) + ", " + layer.name + ": ";
      if (!cu.not_measured.empty()) {
        notes += who + "not measured: " + cu.not_measured + "\n";
      } else if (!cu.check.ok) {
        notes += who + cu.algorithm + ": " + std::to_string(cu.check.mismatches) +
                 " outputs outside the tolerance of IMPLICIT_GEMM (worst error " +
                 printf_text("%.3g", cu.check.worst_error) +
                 "): its transforms round more than a direct sum; shown for information\n";
      }
    }
  }
  return notes;
}

// Timing figures of one implementation as JSON, with its rates against both ceilings.
json timing_json(const TimingStats& t, double flops, double peak,
                 const std::optional<RooflineBound>& bound) {
  json j = {{"min_s", t.min_s},
            {"median_s", t.median_s},
            {"max_s", t.max_s},
            {"spread", t.spread()},
            {"samples_s", t.samples_s},
            {"gflops", gflops(flops, t.min_s)},
            {"percent_of_peak", peak > 0 && t.min_s > 0 ? 100.0 * flops / t.min_s / peak : 0.0}};
  if (bound) j["percent_of_bound"] = percent_of_bound(*bound, t.min_s);
  return j;
}

json check_json(const OutputCheck& c) {
  return {{"ok", c.ok},
          {"atol", c.atol},
          {"rtol", c.rtol},
          {"worst_error", c.worst_error},
          {"mismatches", c.mismatches},
          {"first_mismatch", c.first_mismatch}};
}

json cudnn_json(const BenchMachine& m, const LayerResult& layer, const CudnnResult& cu) {
  if (!cu.not_measured.empty()) return {{"not_measured", cu.not_measured}};
  json candidates = json::array();
  for (const CudnnCandidate& c : cu.candidates) {
    candidates.push_back({{"algorithm", c.algorithm},
                          {"status", c.status},
                          {"time_s", c.time_s},
                          {"workspace_bytes", c.workspace_bytes},
                          {"math", c.math},
                          {"eligible", c.eligible}});
  }
  json j = timing_json(cu.time, layer.shape.flops(), m.fp32_peak,
                       class_bound(m, layer.shape, cu.precision));
  j["algorithm"] = cu.algorithm;
  j["workspace_bytes"] = cu.workspace_bytes;
  j["math"] = cu.math;
  j["find_time_s"] = cu.find_time_s;
  j["workspace_limit_bytes"] = cu.workspace_limit;
  j["check"] = check_json(cu.check);
  j["candidates"] = candidates;
  return j;
}

json variant_json(const BenchReport& r, const LayerResult& layer, std::size_t v) {
  const VariantResult& vr = layer.variants.at(v);
  const Precision precision = r.variants.at(v).precision;
  json j = {{"variant", vr.variant},
            {"precision", precision_name(precision)},
            {"status", bench_status_name(vr.status)},
            {"message", vr.message}};
  if (!timed(vr.status)) return j;
  j.update(timing_json(vr.time, layer.shape.flops(), r.machine.fp32_peak,
                       class_bound(r.machine, layer.shape, precision)));
  const CudnnResult& cu = layer.cudnn_for(precision);
  if (cu.not_measured.empty()) {
    j["cudnn_over_ours"] = vr.time.min_s > 0 ? cu.time.min_s / vr.time.min_s : 0.0;
  }
  j["check"] = check_json(vr.check);
  return j;
}

// The layer's work, compulsory traffic and intensity, and the bound of each class with a ceiling.
json roofline_json(const BenchReport& r, const LayerResult& layer) {
  const LayerTraffic t = conv_traffic(layer.shape);
  json bounds = json::object();
  for (Precision c : precision_classes()) {
    if (const auto b = class_bound(r.machine, layer.shape, c)) {
      bounds[std::string(precision_name(c))] = {{"seconds", b->seconds},
                                                {"flops_per_s", b->flops_per_s},
                                                {"limit", b->memory_bound ? "memory" : "compute"}};
    }
  }
  json j = {
      {"flops", t.flops}, {"bytes", t.bytes}, {"intensity", t.intensity()}, {"bounds", bounds}};
  if (const auto floor = write_floor_seconds(r.machine, layer.shape)) {
    j["write_floor_seconds"] = *floor;
  }
  return j;
}

json layer_json(const BenchReport& r, const LayerResult& layer) {
  json cudnn = json::object();
  for (const CudnnResult& cu : layer.cudnn) {
    cudnn[std::string(precision_name(cu.precision))] = cudnn_json(r.machine, layer, cu);
  }
  json variants = json::array();
  for (std::size_t v = 0; v < layer.variants.size(); ++v) {
    variants.push_back(variant_json(r, layer, v));
  }
  const ConvShape& s = layer.shape;
  return {{"name", layer.name},
          {"shape", {{"B", s.B}, {"M", s.M}, {"C", s.C}, {"H", s.H}, {"W", s.W}, {"K", s.K}}},
          {"flops", s.flops()},
          {"y_bytes", s.y_elements() * std::int64_t{sizeof(float)}},
          {"roofline", roofline_json(r, layer)},
          {"cudnn", cudnn},
          {"variants", variants}};
}

json machine_json(const BenchMachine& m) {
  const Ceilings c = m.ceilings();
  return {{"gpu", m.gpu},
          {"driver", m.driver},
          {"cuda_driver", m.cuda_driver},
          {"cuda_runtime", m.cuda_runtime},
          {"cudnn", m.cudnn},
          {"compute_capability", m.device.compute_capability},
          {"sm_count", m.device.sm_count},
          {"clock_hz", m.device.clock_hz},
          {"memory_clock_hz", m.device.memory_clock_hz},
          {"memory_bus_bits", m.device.memory_bus_bits},
          {"l2_bytes", m.l2_bytes},
          {"fp32_peak_flops", m.fp32_peak},
          {"fp32_peak_method", m.fp32_peak_method},
          {"physical_peak_flops", {{"fp32", c.fp32}, {"tf32", c.tf32}, {"fp16", c.fp16}}},
          {"memory_bandwidth_bytes_per_s", m.hbm_bandwidth},
          {"memory_bandwidth_method", m.hbm_method},
          {"memory_bandwidth_theoretical_bytes_per_s", theoretical_bandwidth(m.device)},
          {"write_bandwidth_bytes_per_s", m.write_bandwidth},
          {"write_bandwidth_method", m.write_method}};
}

}  // namespace

std::string format_bench_report(const BenchReport& r) {
  std::ostringstream out;
  out << header_text(r);
  out << "\nroofline: bound = max(flops / class peak, compulsory bytes / measured bandwidth); x "
         "and k read once, y written once, 4 bytes per value\n"
      << roofline_table(r);
  for (std::size_t v = 0; v < r.variants.size(); ++v) {
    out << "\nvariant " << r.variants[v].name << " (" << r.variants[v].file << "), "
        << precision_name(r.variants[v].precision) << " class\n";
    out << variant_table(r, v);
  }
  const std::string notes = notes_text(r);
  if (!notes.empty()) out << "\n" << notes;
  return out.str();
}

std::string bench_report_json(const BenchReport& r, const std::string& version) {
  json layers = json::array();
  for (const LayerResult& layer : r.layers) layers.push_back(layer_json(r, layer));
  json variant_list = json::array();
  for (const VariantInfo& v : r.variants) {
    variant_list.push_back(
        {{"name", v.name}, {"file", v.file}, {"precision", precision_name(v.precision)}});
  }
  const json report = {{"convlab_version", version},
                       {"command", "bench"},
                       {"net", r.net},
                       {"net_file", r.net_file},
                       {"batch", r.batch},
                       {"impl", r.impl},
                       {"warmup", r.warmup},
                       {"runs", r.runs},
                       {"l2_flush", r.l2_flush},
                       {"l2_flush_bytes", r.flush_bytes},
                       {"seed", r.seed},
                       {"machine", machine_json(r.machine)},
                       {"variants", variant_list},
                       {"layers", layers}};
  return report.dump(2) + "\n";
}

int bench_exit_code(const BenchReport& r) {
  for (const LayerResult& layer : r.layers) {
    for (const VariantResult& v : layer.variants) {
      if (v.status == BenchStatus::wrong || v.status == BenchStatus::error) return 3;
    }
  }
  return 0;
}

}  // namespace convlab
