// `convlab run`, step 2: loads the data and the model, runs the network with each chosen
// convolution (the library's, the team's or the staff's), and counts the correct predictions.
#include <algorithm>
#include <iostream>
#include <map>
#include <set>
#include <string_view>

#include "datasets/fashion_mnist.hpp"
#include "reference/core/error.hpp"
#include "reference/driver/check_command.hpp"
#include "reference/driver/run_steps.hpp"
#include "reference/model/model.hpp"
#include "reference/network/exact.hpp"
#include "reference/network/runner.hpp"

#ifdef CONVLAB_HAVE_CUDA
#include "reference/core/cuda_check.hpp"
#include "reference/device/peak.hpp"
#include "reference/network/runner_gpu.hpp"
#include "reference/profile/profiler.hpp"
#endif

namespace convlab {

namespace {

// Runs `body` and records its outcome; a stub or a failing kernel marks that run, not the
// whole command, when several runs share one invocation.
template <typename Body>
[[maybe_unused]] void attempt(RunRecord& rec, bool keep_going, Body body) {
  try {
    rec.run = body();
  } catch (const NotImplemented& e) {
    if (!keep_going) throw;
    rec.status = RunStatus::not_implemented;
    rec.error = e.what();
  } catch (const Error& e) {
    if (!keep_going) throw;
    rec.status = RunStatus::error;
    rec.error = e.what();
  }
}

// Where the code of variant `id` that `impl` runs lives (its declaration).
[[maybe_unused]] std::string code_file(std::string_view id, Impl impl) {
  const Variant& v = find_variant(id);
  return std::string(impl == Impl::student ? v.student_file : v.staff_file);
}

// The team's convolution checked output by output on the model's conv layers before the
// network, so that no N, however small, lets a wrong one through. Returns false, the failure
// printed to `out`, when it is wrong. A stub's NotImplemented or another Error goes through,
// unless `keep_going` (a table of variants).
bool layer_check(const RunPlan& plan, const Model& model, const CheckTarget& target,
                 bool keep_going, std::ostream& out) {
  const std::vector<ConvShape> shapes = run_check_shapes(model.conv_shapes(1), plan.n);
  try {
    return check_before_run(target, shapes, plan.ms.id, plan.ms.elementwise_atol(),
                            plan.ms.elementwise_rtol(), out);
  } catch (const Error&) {
    // A stub or a failing launch: in a table, the network call records it on its row.
    if (!keep_going) throw;
    return true;
  }
}

void mark_wrong(RunRecord& rec) {
  rec.status = RunStatus::wrong;
  rec.error =
      "its output differs from the library convolution's on the model's conv layers "
      "(printed above); the network did not run";
}

#ifdef CONVLAB_HAVE_CUDA
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
#endif

// The precision rule for every tf32 or fp16 row, cuDNN's tf32 row too: its predictions against
// the float64 network's (computed here, once per class, on the same input).
void judge_precision(const Model& model, const Tensor& input, RunResult& result) {
  std::map<Precision, ExactRun> exact;
  for (RunRecord& rec : result.records) {
    if (rec.status != RunStatus::ok || rec.precision == Precision::fp32) continue;
    auto it = exact.find(rec.precision);
    if (it == exact.end()) {
      it = exact.emplace(rec.precision, run_network_exact(model, input, rec.precision)).first;
    }
    const ExactRun& e = it->second;
    rec.verdict = judge_predictions(rec.precision, predictions(rec.run.output), e.predictions,
                                    e.margins, e.sigma);
  }
}

// Runs the plan's convolution(s) on `input` into result.records.
void run_convolutions(const RunPlan& plan, const Model& model, const Tensor& input,
                      RunResult& result, std::ostream& out) {
  const TimingOptions cpu_timing = run_timing(Device::cpu, plan.opt.runs);
  if (plan.ms.runs_library() && plan.device == "cpu") {
    RunRecord& rec = result.records.emplace_back();
    rec.label = "reference";
    rec.code_file = "reference/conv/library_conv_cpu.cpp";
    rec.run = library_runner(model, Device::cpu)(input, cpu_timing);
  } else if (plan.cpu_code != nullptr) {
    // A milestone of CPU variants (m2): its declared convolution.
    RunRecord& rec = result.records.emplace_back();
    rec.label = variant_ids(plan.ms.id, "cpu").front();
    rec.precision = find_variant(rec.label).precision;
    rec.code_file = code_file(rec.label, plan.opt.impl);
    const CheckTarget target{rec.label, rec.code_file,
                             [fn = plan.cpu_code](float* y, const float* x, const float* k,
                                                  const ConvShape& s) { fn(y, x, k, s); }};
    if (!layer_check(plan, model, target, /*keep_going=*/false, out)) {
      mark_wrong(rec);
      return;
    }
    rec.run = cpu_runner(model, plan.cpu_code, rec.label)(input, cpu_timing);
  } else {
#ifdef CONVLAB_HAVE_CUDA
    run_gpu(plan, model, input, result, out);
#endif
  }
}

}  // namespace

RunResult execute_run(const RunPlan& plan, std::ostream& out) {
  const std::int64_t n = plan.n;
  out << "Loading fashion-mnist data..." << std::flush;
  const data::Dataset test =
      data::load_fashion_mnist(data::data_dir(plan.opt.data), data::Split::test);
  out << " done\n";
  if (n < 1 || n > test.count) {
    throw Error("N must be between 1 and " + std::to_string(test.count) +
                " (the size of the test set), got " + std::to_string(n));
  }
  out << "Loading model..." << std::flush;
  const Model model = load_model(plan.model_path);
  out << " done" << std::endl;

  const Tensor input = test.images(n, model.input_scale);
  const std::span<const std::uint8_t> labels(test.labels.data(), static_cast<std::size_t>(n));
  auto expected = plan.ms.expected(model.name, n, plan.device);
  if (!expected) {
    if (auto it = model.expected_correct.find(n); it != model.expected_correct.end()) {
      expected = it->second;
    }
  }

  RunResult result;
  result.model_name = model.name;
  run_convolutions(plan, model, input, result, out);
  for (RunRecord& rec : result.records) {
    if (rec.status != RunStatus::ok) continue;
    rec.correct = count_correct(predictions(rec.run.output), labels);
    rec.expected = expected;
  }
  judge_precision(model, input, result);
  return result;
}

}  // namespace convlab
