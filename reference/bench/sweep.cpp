// `convlab sweep`: the grid's points become bench candidates (one plain launcher each), the
// bench measures them on every layer with cuDNN of the variant's class beside them, and the
// report is one row per point: per-layer and total time, the check, the ratio to the best.
#include "reference/bench/sweep.hpp"

#include <algorithm>
#include <cstdio>
#include <limits>
#include <nlohmann/json.hpp>
#include <vector>

#include "reference/bench/bench.hpp"
#include "reference/bench/bench_report.hpp"
#include "reference/core/error.hpp"
#include "reference/core/format.hpp"

#ifdef CONVLAB_HAVE_CUDA
#include "reference/bench/bench_gpu.hpp"
#include "reference/core/cuda_check.hpp"
#endif

namespace convlab {

std::string sweep_variant_names() {
  std::string names;
  for (const Variant& v : variants()) {
    if (v.sweep) names += (names.empty() ? "" : ", ") + std::string(v.id);
  }
  return names;
}

namespace {

#ifdef CONVLAB_HAVE_CUDA
std::string ms(double seconds) {
  char text[32];
  std::snprintf(text, sizeof text, "%.4f", seconds * 1e3);
  return text;
}

// Total min time of candidate `i` over the layers, or infinity when a layer failed it.
double total_s(const BenchReport& r, std::size_t i) {
  double total = 0.0;
  for (const LayerResult& layer : r.layers) {
    const VariantResult& v = layer.variants[i];
    if (v.status != BenchStatus::ok) return std::numeric_limits<double>::infinity();
    total += v.time.min_s;
  }
  return total;
}

// The sweep's table: a row per point, then cuDNN of the class, then the best point.
std::string format_sweep(const BenchReport& r, const Variant& v,
                         const std::vector<std::string>& params) {
  std::vector<std::string> header{"point"};
  for (const LayerResult& layer : r.layers) header.push_back(layer.name + " (ms)");
  header.insert(header.end(), {"total (ms)", "vs best", "check"});
  std::size_t best = 0;
  for (std::size_t i = 1; i < params.size(); ++i) {
    if (total_s(r, i) < total_s(r, best)) best = i;
  }
  const double best_s = total_s(r, best);
  std::vector<std::vector<std::string>> rows;
  for (std::size_t i = 0; i < params.size(); ++i) {
    std::vector<std::string> row{params[i]};
    std::string check = "ok";
    for (const LayerResult& layer : r.layers) {
      const VariantResult& res = layer.variants[i];
      row.push_back(res.status == BenchStatus::ok ? ms(res.time.min_s) : "-");
      if (res.status != BenchStatus::ok) check = bench_status_name(res.status);
    }
    const double t = total_s(r, i);
    row.push_back(t < std::numeric_limits<double>::infinity() ? ms(t) : "-");
    char ratio[32];
    std::snprintf(ratio, sizeof ratio, "%.2fx", t / best_s);
    row.push_back(t < std::numeric_limits<double>::infinity() ? ratio : "-");
    row.push_back(check);
    rows.push_back(std::move(row));
  }
  const Precision cls = v.precision;
  std::vector<std::string> cudnn{"cuDNN (" + std::string(precision_name(cls)) + ")"};
  double cudnn_total = 0.0;
  bool measured = true;
  for (const LayerResult& layer : r.layers) {
    const CudnnResult& cu = layer.cudnn_for(cls);
    measured = measured && cu.not_measured.empty();
    cudnn.push_back(cu.not_measured.empty() ? ms(cu.time.min_s) : "-");
    cudnn_total += cu.time.min_s;
  }
  cudnn.insert(cudnn.end(), {measured ? ms(cudnn_total) : "-", "", ""});
  rows.push_back(std::move(cudnn));
  std::string text = "sweep of " + std::string(v.id) + ": " + std::to_string(params.size()) +
                     " points, net " + r.net + ", batch " +
                     std::to_string(r.layers.front().shape.B) +
                     ", min of " + std::to_string(r.runs) + " timed runs per point and layer" +
                     (r.l2_flush ? ", L2 flushed before each" : "") + "\n\n" +
                     format_table(header, rows);
  if (best_s < std::numeric_limits<double>::infinity()) {
    text += "\nbest point: " + params[best] + " (" + ms(best_s) + " ms over the layers)\n";
  } else {
    text += "\nno point passed on every layer\n";
  }
  for (std::size_t i = 0; i < params.size(); ++i) {
    for (const LayerResult& layer : r.layers) {
      const VariantResult& res = layer.variants[i];
      if (res.status == BenchStatus::ok) continue;
      text += params[i] + ", " + layer.name + ": " + bench_status_name(res.status) +
              (res.message.empty() ? "" : ": " + res.message) + "\n";
    }
  }
  return text;
}
#endif

}  // namespace

int run_sweep(const SweepOptions& opt, std::ostream& out, std::ostream& err) {
  const Variant& v = find_variant(opt.variant);
  if (!v.sweep) {
    throw Error("variant " + std::string(v.id) +
                " declares no parameter grid; the variants that do: " + sweep_variant_names() +
                " (reference/conv/variants.def, `sweep`)");
  }
  const CheckedNet checked = check_bench_options(opt.net, opt.batch, opt.runs, opt.impl);
#ifdef CONVLAB_HAVE_CUDA
  if (std::string why; !cuda_device_available(&why)) {
    throw Error("convlab sweep needs a CUDA GPU: " + why);
  }
  const GpuVariant& gv = find_gpu_variant(v.id);
  const std::span<const SweepPoint> points = gv.sweep(opt.impl)();
  const std::string file(opt.impl == Impl::student ? v.student_file : v.staff_file);
  if (points.empty()) {
    throw Error(v.entry_point() + "_sweep() returns no point yet: list your grid in " + file +
                " (" + std::string(v.handout) + ")");
  }
  std::vector<BenchCandidate> candidates;
  std::vector<std::string> params;
  for (const SweepPoint& p : points) {
    params.emplace_back(p.params);
    candidates.push_back({std::string(v.id) + " [" + p.params + "]", file, GpuLauncher(p.launch),
                          v.precision});
  }
  BenchOptions bench;
  bench.net = opt.net;
  bench.variant = std::string(v.id);
  bench.batch = checked.batch;
  bench.runs = opt.runs;
  bench.impl = opt.impl;
  bench.flush_l2 = opt.flush_l2;
  const BenchReport report =
      measure_bench(checked.net, checked.shapes, candidates, bench, err);
  out << format_sweep(report, v, params) << std::flush;
  if (opt.json) {
    write_report_file(*opt.json, bench_report_json(report, CONVLAB_VERSION), "JSON report");
  }
  return bench_exit_code(report);
#else
  (void)out;
  (void)err;
  throw Error(
      "convlab sweep times GPU kernels, and this convlab was built without CUDA. Build with the "
      "default preset on a machine with the CUDA toolkit (cmake --preset default && cmake "
      "--build --preset default) and run it there.");
#endif
}

}  // namespace convlab
