// `convlab check` in a build without CUDA: the GPU milestones cannot be checked here.
#include "reference/commands/check_command.hpp"
#include "reference/core/error.hpp"

namespace convlab {

std::vector<CheckTarget> gpu_check_targets(const Milestone& ms, const std::string&, Impl) {
  throw Error("convlab check " + ms.id +
              " needs a CUDA GPU, and this convlab was built without "
              "CUDA. Build with the default preset on a machine with the CUDA toolkit and a "
              "GPU (cmake --preset default), or check m2 here.");
}

}  // namespace convlab
