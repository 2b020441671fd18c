// `convlab run`'s GPU milestones: the chosen GPU variants, cuDNN beside them, the profile and
// the fp32 peak of the --variant all table.
#include <algorithm>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "reference/commands/check_gpu.hpp"
#include "reference/commands/run_execute.hpp"
#include "reference/core/cuda_check.hpp"
#include "reference/device/peak.hpp"
#include "reference/network/runner_gpu.hpp"
#include "reference/profile/profiler.hpp"

namespace convlab {

namespace {

// The GPU variants --variant names: one, or all of the milestone's (baseline first, so that
// every other variant has a speedup to show).
std::vector<const GpuVariant*> chosen_variants(const RunPlan& plan) {
  const Milestone& ms = plan.ms;
  const std::string choice = plan.opt.variant.value_or(ms.default_variant);
  std::vector<const GpuVariant*> chosen;
  if (choice == "all") {
    const GpuVariant* baseline = &gpu_variants().front();  // the first GPU variant declared
    chosen.push_back(baseline);
    for (const std::string& v : ms.variants) {
      if (v != baseline->name) chosen.push_back(&find_gpu_variant(v));
    }
    return chosen;
  }
  const GpuVariant& v = find_gpu_variant(choice);
  if (std::find(ms.variants.begin(), ms.variants.end(), v.name) == ms.variants.end()) {
    throw Error("variant " + choice + " belongs to milestone " + std::string(v.milestone) +
                ", not " + ms.id);
  }
  chosen.push_back(&v);
  return chosen;
}

// The chosen variants, and with --variant all cuDNN as the table's last (library) row.
void run_gpu_variants(const RunPlan& plan, const Model& model, const Tensor& input,
                      const std::set<std::string_view>& wrong, RunResult& result) {
  const RunOptions& opt = plan.opt;
  const bool all = opt.variant.value_or(plan.ms.default_variant) == "all";
  for (const GpuVariant* v : chosen_variants(plan)) {
    RunRecord& rec = result.records.emplace_back();
    rec.label = std::string(v->name);
    rec.precision = find_variant(v->name).precision;
    rec.code_file = code_file(v->name, opt.impl);
    if (wrong.contains(v->name)) {
      mark_wrong(rec);
      continue;
    }
    attempt(rec, all, [&] {
      const GpuConvTanhPoolFn fused = plan.fuse ? v->fused_launcher(opt.impl) : nullptr;
      const auto n = static_cast<int>(input.shape()[0]);
      const NetworkRunner runner = gpu_runner(
          model, bind_workspace(v->launcher(opt.impl), model.conv_shapes(n)), fused, rec.label);
      return runner(input, run_timing(Device::gpu, opt.runs));
    });
  }
  if (!all) return;
  // Fused exactly when a variant was: then its row times cuDNN's conv, tanh and max-pool.
  const bool fused =
      std::any_of(result.records.begin(), result.records.end(),
                  [](const RunRecord& r) { return r.status == RunStatus::ok && any_fused(r.run); });
  // cuDNN of each class in the table: fp32 always, tf32 and fp16 where a variant of that class
  // ran, the comparison such a kernel is held to (the precision rule judges those rows as it
  // judges the variants).
  for (const Precision p : precision_classes()) {
    const bool in_table =
        std::any_of(result.records.begin(), result.records.end(),
                    [&](const RunRecord& r) { return !r.reference && r.precision == p; });
    if (p != Precision::fp32 && !in_table) continue;
    const std::string name(precision_name(p));
    RunRecord& rec = result.records.emplace_back();
    rec.label = p == Precision::fp32 ? "cudnn" : "cudnn_" + name;
    rec.reference = true;
    rec.precision = p;
    rec.run = cudnn_runner(model, p, fused)(input, run_timing(Device::gpu, opt.runs));
  }
}

// Started before the run's first CUDA call, so that the profile covers all of it (the
// profiler cannot move: it is emplaced where it lives).
void start_profiler(std::optional<profile::Profiler>& profiler) {
  try {
    profiler.emplace();
  } catch (const Error&) {
    // Without a GPU CUPTI fails too, but "no GPU" is the message that helps.
    std::string why;
    if (!cuda_device_available(&why)) throw CudaError("--profile needs a GPU: " + why);
    throw;
  }
}

}  // namespace

void run_gpu(const RunPlan& plan, const Model& model, const Tensor& input, RunResult& result,
             std::ostream& out) {
  // Checked before the profiler starts, so that the profile holds the network's calls only.
  std::set<std::string_view> wrong;
  if (!plan.ms.runs_library()) {
    const bool all = plan.opt.variant.value_or(plan.ms.default_variant) == "all";
    for (const GpuVariant* v : chosen_variants(plan)) {
      if (!layer_check(plan, model, gpu_check_target(*v, plan.opt.impl), all, out)) {
        wrong.insert(v->name);
      }
    }
  }
  std::optional<profile::Profiler> profiler;
  if (plan.profiling) start_profiler(profiler);
  const GpuInfo info = gpu_info();
  result.gpu = {{"name", info.name},
                {"driver", info.driver},
                {"cuda_driver", info.cuda_driver},
                {"sm_count", info.sm_count},
                {"compute_capability", info.compute_capability}};
  if (plan.ms.runs_library()) {
    RunRecord& rec = result.records.emplace_back();
    rec.label = "cudnn";
    rec.code_file = "reference/conv/cudnn_conv.cu";
    rec.run = library_runner(model, Device::gpu)(input, run_timing(Device::gpu, plan.opt.runs));
  } else {
    run_gpu_variants(plan, model, input, wrong, result);
  }
  if (profiler) result.profiled = profiler->stop();
  // Measured after the profile stops, so that its SGEMM stays out of the table.
  if (result.records.size() > 1) {
    try {
      const Fp32Peak& peak = measured_fp32_peak();
      result.peak_flops = peak.flops_per_s;
      result.peak_note = peak.method;
      result.gpu["fp32_peak_flops"] = peak.flops_per_s;
      result.gpu["fp32_peak_method"] = peak.method;
    } catch (const Error& e) {
      result.peak_note = e.what();
    }
  }
}

}  // namespace convlab
