#include "reference/bench/bench_report.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <mutex>
#include <nlohmann/json.hpp>
#include <sstream>

#include "reference/core/error.hpp"
#include "reference/core/parallel.hpp"
#include "reference/driver/format.hpp"

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

Tolerance tolerance_for(const ConvShape& shape) {
  const double terms = static_cast<double>(shape.C) * shape.K * shape.K;
  return {1e-4 * std::sqrt(terms), 1e-4};
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

namespace {

std::string printf_text(const char* format, double value) {
  char buf[64];
  std::snprintf(buf, sizeof buf, format, value);
  return buf;
}

// Milliseconds with about four significant digits.
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

double gflops(double flops, double seconds) {
  return seconds > 0 ? flops / seconds / 1e9 : 0.0;
}

std::string percent_text(double flops, double seconds, double peak) {
  return peak > 0 && seconds > 0 ? printf_text("%.1f", 100.0 * flops / seconds / peak) : "-";
}

bool timed(BenchStatus s) {
  return s == BenchStatus::ok || s == BenchStatus::wrong;
}

// One variant's table: a row per layer, then the total.
std::string variant_table(const BenchReport& r, std::size_t v) {
  const double peak = r.machine.fp32_peak;
  std::vector<std::vector<std::string>> rows;
  double ours_min = 0, ours_med = 0, cudnn_min = 0, cudnn_med = 0, flops = 0;
  int ok = 0, wrong = 0, missing = 0, failed = 0;
  for (const LayerResult& layer : r.layers) {
    const VariantResult& vr = layer.variants.at(v);
    const CudnnResult& cu = layer.cudnn;
    const double f = layer.shape.flops();
    std::vector<std::string> row{layer.name, shape_text(layer.shape)};
    if (timed(vr.status)) {
      row.insert(row.end(), {ms_text(vr.time.min_s), ms_text(vr.time.median_s),
                             printf_text("%.1f%%", 100 * vr.time.spread())});
    } else {
      row.insert(row.end(), 3, "-");
    }
    row.insert(row.end(), {ms_text(cu.time.min_s), ms_text(cu.time.median_s),
                           printf_text("%.1f%%", 100 * cu.time.spread())});
    // A wrong kernel's speed is not a result: no ratio, no GFLOP/s.
    const bool good = vr.status == BenchStatus::ok;
    row.push_back(good ? printf_text("%.2f", cu.time.min_s / vr.time.min_s) : "-");
    row.push_back(cu.algorithm);
    row.push_back(bytes_text(static_cast<double>(cu.workspace_bytes)));
    row.push_back(good ? printf_text("%.0f", gflops(f, vr.time.min_s)) : "-");
    row.push_back(good ? percent_text(f, vr.time.min_s, peak) : "-");
    row.push_back(printf_text("%.0f", gflops(f, cu.time.min_s)));
    row.push_back(percent_text(f, cu.time.min_s, peak));
    switch (vr.status) {
      case BenchStatus::ok:
        row.push_back("ok");
        ++ok;
        break;
      case BenchStatus::wrong:
        row.push_back("WRONG");
        ++wrong;
        break;
      case BenchStatus::not_implemented:
        row.push_back("not implemented");
        ++missing;
        break;
      case BenchStatus::error:
        row.push_back("error");
        ++failed;
        break;
    }
    rows.push_back(std::move(row));
    ours_min += vr.time.min_s;
    ours_med += vr.time.median_s;
    cudnn_min += cu.time.min_s;
    cudnn_med += cu.time.median_s;
    flops += f;
  }
  // The total compares the whole net only when every layer ran correctly.
  const bool all_ok = ok == static_cast<int>(r.layers.size());
  std::vector<std::string> total{"total", ""};
  if (all_ok) {
    total.insert(total.end(), {ms_text(ours_min), ms_text(ours_med), ""});
  } else {
    total.insert(total.end(), {"-", "-", ""});
  }
  total.insert(total.end(), {ms_text(cudnn_min), ms_text(cudnn_med), ""});
  total.push_back(all_ok ? printf_text("%.2f", cudnn_min / ours_min) : "-");
  total.insert(total.end(), {"", ""});
  total.push_back(all_ok ? printf_text("%.0f", gflops(flops, ours_min)) : "-");
  total.push_back(all_ok ? percent_text(flops, ours_min, peak) : "-");
  total.push_back(printf_text("%.0f", gflops(flops, cudnn_min)));
  total.push_back(percent_text(flops, cudnn_min, peak));
  std::string summary;
  const auto add = [&](int n, const char* what) {
    if (n > 0) summary += (summary.empty() ? "" : ", ") + std::to_string(n) + " " + what;
  };
  add(ok, "ok");
  add(wrong, "WRONG");
  add(missing, "not implemented");
  add(failed, "error");
  total.push_back(summary);
  rows.push_back(std::move(total));

  const std::vector<std::string> header{
      "layer",      "shape",           "ours (ms)", "median",
      "spread",     "cuDNN (ms)",      "median",    "spread",
      "cuDNN/ours", "cuDNN algorithm", "workspace", "ours GFLOP/s",
      "% peak",     "cuDNN GFLOP/s",   "% peak",    "check"};
  return format_table(header, rows, {2, 3, 4, 5, 6, 7, 8, 10, 11, 12, 13, 14});
}

json timing_json(const TimingStats& t, double flops, double peak) {
  return {{"min_s", t.min_s},
          {"median_s", t.median_s},
          {"max_s", t.max_s},
          {"spread", t.spread()},
          {"samples_s", t.samples_s},
          {"gflops", gflops(flops, t.min_s)},
          {"percent_of_peak", peak > 0 && t.min_s > 0 ? 100.0 * flops / t.min_s / peak : 0.0}};
}

json check_json(const OutputCheck& c) {
  return {{"ok", c.ok},
          {"atol", c.atol},
          {"rtol", c.rtol},
          {"worst_error", c.worst_error},
          {"mismatches", c.mismatches},
          {"first_mismatch", c.first_mismatch}};
}

}  // namespace

std::string format_bench_report(const BenchReport& r) {
  const BenchMachine& m = r.machine;
  std::ostringstream out;
  out << "convlab bench: net " << r.net << " (" << r.net_file << "), " << r.layers.size()
      << " conv layer" << (r.layers.size() == 1 ? "" : "s") << ", batch " << r.batch << ", "
      << r.impl << " code\n";
  out << "GPU: " << m.gpu << " (compute capability " << m.compute_capability / 10 << "."
      << m.compute_capability % 10 << ", " << m.sm_count << " SMs, "
      << bytes_text(static_cast<double>(m.l2_bytes)) << " L2), driver " << m.driver << " (CUDA "
      << m.cuda_driver << "), CUDA runtime " << m.cuda_runtime << ", cuDNN " << m.cudnn << "\n";
  out << "fp32 peak (measured): " << printf_text("%.1f", m.fp32_peak / 1e12) << " TFLOP/s, "
      << m.fp32_peak_method << "\n";
  out << "memory bandwidth (measured): " << printf_text("%.0f", m.hbm_bandwidth / 1e9) << " GB/s, "
      << m.hbm_method << "\n";
  out << "method: per layer and implementation, 1 checked call, " << r.warmup << " warm-up call"
      << (r.warmup == 1 ? "" : "s") << ", then " << r.runs << " run" << (r.runs == 1 ? "" : "s")
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
         "1e-4*sqrt(C*K*K) + 1e-4*|ref|, after the first call and after the last timed run\n";
  out << "cuDNN: the fastest algorithm of cudnnFindConvolutionForwardAlgorithmEx with FMA math "
         "(fp32, no TF32), timed the same way\n";
  out << "GFLOP/s and % peak: the direct convolution's 2*C*K*K flops per output over the min "
         "time; FFT and Winograd algorithms do fewer operations, so theirs may pass 100%\n";

  for (std::size_t v = 0; v < r.variants.size(); ++v) {
    out << "\nvariant " << r.variants[v].name << " (" << r.variants[v].file << ")\n";
    out << variant_table(r, v);
  }

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
    if (!layer.cudnn.check.ok) {
      notes += "cuDNN " + layer.cudnn.algorithm + ", " + layer.name + ": " +
               std::to_string(layer.cudnn.check.mismatches) +
               " outputs outside the tolerance of IMPLICIT_GEMM (worst error " +
               printf_text("%.3g", layer.cudnn.check.worst_error) +
               "): its transforms round more than a direct sum; shown for information\n";
    }
  }
  if (!notes.empty()) out << "\n" << notes;
  return out.str();
}

std::string bench_report_json(const BenchReport& r, const std::string& version) {
  const BenchMachine& m = r.machine;
  const double peak = m.fp32_peak;
  json layers = json::array();
  for (const LayerResult& layer : r.layers) {
    const double f = layer.shape.flops();
    const CudnnResult& cu = layer.cudnn;
    json candidates = json::array();
    for (const CudnnCandidate& c : cu.candidates) {
      candidates.push_back({{"algorithm", c.algorithm},
                            {"status", c.status},
                            {"time_s", c.time_s},
                            {"workspace_bytes", c.workspace_bytes},
                            {"math", c.math},
                            {"eligible", c.eligible}});
    }
    json cudnn = timing_json(cu.time, f, peak);
    cudnn["algorithm"] = cu.algorithm;
    cudnn["workspace_bytes"] = cu.workspace_bytes;
    cudnn["math"] = cu.math;
    cudnn["find_time_s"] = cu.find_time_s;
    cudnn["workspace_limit_bytes"] = cu.workspace_limit;
    cudnn["check"] = check_json(cu.check);
    cudnn["candidates"] = candidates;

    json variants = json::array();
    for (const VariantResult& vr : layer.variants) {
      json v = {{"variant", vr.variant},
                {"status", bench_status_name(vr.status)},
                {"message", vr.message}};
      if (timed(vr.status)) {
        v.update(timing_json(vr.time, f, peak));
        v["cudnn_over_ours"] = vr.time.min_s > 0 ? cu.time.min_s / vr.time.min_s : 0.0;
        v["check"] = check_json(vr.check);
      }
      variants.push_back(v);
    }
    const ConvShape& s = layer.shape;
    layers.push_back(
        {{"name", layer.name},
         {"shape", {{"B", s.B}, {"M", s.M}, {"C", s.C}, {"H", s.H}, {"W", s.W}, {"K", s.K}}},
         {"flops", f},
         {"y_bytes", s.y_elements() * std::int64_t{sizeof(float)}},
         {"cudnn", cudnn},
         {"variants", variants}});
  }
  json variant_list = json::array();
  for (const VariantInfo& v : r.variants)
    variant_list.push_back({{"name", v.name}, {"file", v.file}});
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
                       {"machine",
                        {{"gpu", m.gpu},
                         {"driver", m.driver},
                         {"cuda_driver", m.cuda_driver},
                         {"cuda_runtime", m.cuda_runtime},
                         {"cudnn", m.cudnn},
                         {"compute_capability", m.compute_capability},
                         {"sm_count", m.sm_count},
                         {"l2_bytes", m.l2_bytes},
                         {"fp32_peak_flops", m.fp32_peak},
                         {"fp32_peak_method", m.fp32_peak_method},
                         {"memory_bandwidth_bytes_per_s", m.hbm_bandwidth},
                         {"memory_bandwidth_method", m.hbm_method}}},
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
