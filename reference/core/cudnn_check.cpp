#include "reference/core/cudnn_check.hpp"

#include <string>

#include "reference/core/cuda_check.hpp"

namespace convlab {

void cudnn_check(cudnnStatus_t status, const char* call, const char* file, int line) {
  if (status == CUDNN_STATUS_SUCCESS) return;
  throw CudaError(std::string("cuDNN error ") + cudnnGetErrorString(status) + " in " + call +
                      " at " + file + ":" + std::to_string(line),
                  status == CUDNN_STATUS_INTERNAL_ERROR_DEVICE_ALLOCATION_FAILED);
}

}  // namespace convlab
