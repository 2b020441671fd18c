// `convlab check` on the GPU: the GPU variants as check targets.
#include "reference/commands/check_gpu.hpp"

#include <algorithm>
#include <string>
#include <vector>

#include "reference/core/cuda_check.hpp"
#include "reference/core/cuda_stream.hpp"
#include "reference/core/device_buffer.hpp"

namespace convlab {

CheckTarget gpu_check_target(const GpuVariant& v, Impl impl) {
  const GpuLauncher fn = v.launcher(impl);
  return {std::string(v.name), std::string(v.student_file),
          [fn](float* y, const float* x, const float* k, const ConvShape& s) {
            Workspace workspace;
            workspace.reserve(fn.workspace_bytes(s));
            DeviceBuffer dx(s.x_elements()), dk(s.k_elements()), dy(s.y_elements());
            dx.upload({x, static_cast<std::size_t>(s.x_elements())});
            dk.upload({k, static_cast<std::size_t>(s.k_elements())});
            dy.fill_bytes(0xff);
            const CudaStream stream;
            fn(dy.data(), dx.data(), dk.data(), s, workspace.data(), stream.get());
            stream.sync();
            const std::vector<float> got = dy.download();
            std::copy(got.begin(), got.end(), y);
          }};
}

std::vector<CheckTarget> gpu_check_targets(const Milestone& ms, const std::string& choice,
                                           Impl impl) {
  std::string why;
  if (!cuda_device_available(&why)) {
    throw Error("convlab check " + ms.id + " needs a CUDA GPU: " + why +
                ". Run it on the course's GPU machine; on this one, check m2.");
  }
  std::vector<CheckTarget> targets;
  for (const std::string& v : ms.variants) {
    if (choice == "all" || choice == v) {
      targets.push_back(gpu_check_target(find_gpu_variant(v), impl));
    }
  }
  return targets;
}

}  // namespace convlab
