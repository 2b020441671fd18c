// `convlab run` in a build without CUDA: plan_run() refuses the GPU milestones before this.
#include "reference/commands/run_execute.hpp"
#include "reference/core/error.hpp"

namespace convlab {

void run_gpu(const RunPlan&, const Model&, const Tensor&, RunResult&, std::ostream&) {
  throw Error(
      "this convlab was built without CUDA: build with the default preset to run on "
      "the GPU");
}

}  // namespace convlab
