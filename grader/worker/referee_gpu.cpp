#include "grader/worker/referee_gpu.hpp"

#include <cuda_runtime_api.h>

#include <optional>
#include <utility>

#include "grader/worker/protocol.hpp"
#include "reference/core/cuda_check.hpp"
#include "reference/core/cuda_stream.hpp"
#include "reference/core/device_buffer.hpp"
#include "reference/network/network_gpu.hpp"
#include "reference/network/runner_gpu.hpp"

namespace convlab::grader::referee {

using nlohmann::json;

namespace {

// The max-pool a fused launcher is checked with: the one the network runner fuses.
constexpr PoolShape kFusedPool{2, 2};

}  // namespace

json task_info() {
  std::string why;
  if (!cuda_device_available(&why)) return {{"status", "no_gpu"}, {"message", why}};
  return {{"status", "ok"}, {"gpu", gpu_json()}};
}

void require_gpu(const std::string&) {
  std::string why;
  if (!cuda_device_available(&why)) throw CudaError(why);
}

json gpu_json() {
  const GpuInfo info = gpu_info();
  return {{"name", info.name},
          {"driver", info.driver},
          {"cuda_driver", info.cuda_driver},
          {"sm_count", info.sm_count},
          {"compute_capability", info.compute_capability}};
}

NetworkRunner team_gpu_runner(const Model& model, RemoteConv& team, const std::string& variant) {
  GpuConvTanhPoolCall fused = nullptr;
  if (team.has_fused()) {
    fused = [&team](float* y, const float* x, const float* k, const ConvShape& s,
                    const PoolShape& p,
                    cudaStream_t st) { team.gpu_fused(y, x, k, s, p.size, st); };
  }
  return gpu_runner(
      model,
      [&team](float* y, const float* x, const float* k, const ConvShape& s, cudaStream_t st) {
        team.gpu(y, x, k, s, st);
      },
      std::move(fused), variant);
}

json gpu_elementwise(RemoteConv& team, std::uint64_t seed, const std::vector<ConvShape>& shapes,
                     json& out) {
  // A variant with a fused launcher has it checked too, on every shape a 2x2 pool fits; its
  // stub (NotImplemented) is reported, not failed: the fused launcher is optional.
  bool fused = team.has_fused();
  if (fused) out["fused"] = "ok";
  CudaStream stream;
  json outputs = json::array();
  for (std::size_t i = 0; i < shapes.size(); ++i) {
    const ConvShape& s = shapes[i];
    const std::vector<float> x = elementwise_values(seed, i, ElementwiseTensor::x, s.x_elements());
    const std::vector<float> k = elementwise_values(seed, i, ElementwiseTensor::k, s.k_elements());
    json o = json::object();
    DeviceBuffer dx(s.x_elements()), dk(s.k_elements()), dy(s.y_elements());
    dx.upload(x);
    dk.upload(k);
    for (int call = 0; call < 2; ++call) team.gpu(dy.data(), dx.data(), dk.data(), s, stream.get());
    stream.sync();
    o["y"] = encode_floats(dy.download());
    const bool fits = kFusedPool.size <= s.H_out() && kFusedPool.size <= s.W_out();
    if (fused && fits) {
      DeviceBuffer dp(kFusedPool.pooled_elements(s));
      try {
        for (int call = 0; call < 2; ++call) {
          team.gpu_fused(dp.data(), dx.data(), dk.data(), s, kFusedPool.size, stream.get());
        }
        stream.sync();
        o["pooled"] = encode_floats(dp.download());
      } catch (const NotImplemented& e) {
        fused = false;
        out["fused"] = "not_implemented";
        out["fused_message"] = e.what();
      }
    }
    outputs.push_back(std::move(o));
  }
  return outputs;
}

std::optional<json> gpu_failure(const std::exception& e) {
  const auto* cuda = dynamic_cast<const CudaError*>(&e);
  if (cuda == nullptr) return std::nullopt;
  std::string why;
  if (!cuda_device_available(&why)) return json{{"status", "no_gpu"}, {"message", why}};
  // The referee's memory is taken beside the team's process, on the team's one GPU: when it
  // runs out, the team's process holds the rest.
  if (cuda->out_of_memory()) return json{{"status", "gpu_memory"}, {"message", e.what()}};
  return json{{"status", "referee_error"}, {"message", e.what()}};
}

}  // namespace convlab::grader::referee
