// `convlab run`, step 2: loads the data and the model, runs the network with each chosen
// convolution (the library's, the team's or the staff's), and counts the correct predictions.
#include <algorithm>
#include <iostream>
#include <map>
#include <set>
#include <string_view>

#include "reference/commands/check_command.hpp"
#include "reference/commands/run_execute.hpp"
#include "reference/commands/run_steps.hpp"
#include "reference/core/error.hpp"
#include "reference/data/fashion_mnist.hpp"
#include "reference/model/model.hpp"
#include "reference/network/exact.hpp"
#include "reference/network/runner.hpp"

namespace convlab {

std::string code_file(std::string_view id, Impl impl) {
  const Variant& v = find_variant(id);
  return std::string(impl == Impl::student ? v.student_file : v.staff_file);
}

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

namespace {

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
    run_gpu(plan, model, input, result, out);
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
