// The shared network runner's GPU entry points in a build without CUDA.
#include "reference/core/error.hpp"
#include "reference/network/runner.hpp"

namespace convlab {

NetworkRunner cudnn_runner(const Model&, Precision, bool) {
  throw Error(
      "cuDNN runs on the GPU, but this build has no CUDA: configure with the default "
      "preset on a machine with the CUDA toolkit");
}

}  // namespace convlab
