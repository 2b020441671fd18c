/// @file
/// @brief `convlab run`'s execute step, shared by run_execute.cpp and the file of the build's
/// platform: run_execute_gpu.cpp (the GPU variants, cuDNN, the profiler) or
/// run_execute_cpu_only.cpp (a build without CUDA).
#pragma once

#include <iosfwd>
#include <string>
#include <string_view>

#include "reference/commands/check_command.hpp"
#include "reference/commands/run_steps.hpp"
#include "reference/conv/variants.hpp"
#include "reference/core/error.hpp"
#include "reference/model/model.hpp"

namespace convlab {

/// Runs `body` and records its outcome; a stub or a failing kernel marks that run, not the
/// whole command, when several runs share one invocation.
template <typename Body>
void attempt(RunRecord& rec, bool keep_going, Body body) {
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

/// Where the code of variant `id` that `impl` runs lives (its declaration).
std::string code_file(std::string_view id, Impl impl);

/// The team's convolution checked output by output on the model's conv layers before the
/// network, so that no N, however small, lets a wrong one through. Returns false, the failure
/// printed to `out`, when it is wrong. A stub's NotImplemented or another Error goes through,
/// unless `keep_going` (a table of variants).
bool layer_check(const RunPlan& plan, const Model& model, const CheckTarget& target,
                 bool keep_going, std::ostream& out);

/// Marks a record whose layer check failed.
void mark_wrong(RunRecord& rec);

/// The GPU milestones: the chosen variants (or cuDNN for m1) into result.records, the profile
/// and the fp32 peak where asked.
void run_gpu(const RunPlan& plan, const Model& model, const Tensor& input, RunResult& result,
             std::ostream& out);

}  // namespace convlab
