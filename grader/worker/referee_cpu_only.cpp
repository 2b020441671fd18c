// The referee's GPU work in a build without CUDA: there is no GPU to use.
#include "grader/worker/referee_gpu.hpp"

namespace convlab::grader::referee {

using nlohmann::json;

namespace {

constexpr const char* kNoCuda = "this harness was built without CUDA";

}  // namespace

json task_info() {
  return {{"status", "no_gpu"}, {"message", kNoCuda}};
}

void require_gpu(const std::string& variant) {
  throw Error("variant '" + variant + "' runs on the GPU, but " + kNoCuda);
}

json gpu_json() {
  throw Error(kNoCuda);
}

NetworkRunner team_gpu_runner(const Model&, RemoteConv&, const std::string& variant) {
  require_gpu(variant);
  throw Error(kNoCuda);
}

json gpu_elementwise(RemoteConv&, std::uint64_t, const std::vector<ConvShape>&, json&) {
  throw Error(kNoCuda);
}

std::optional<json> gpu_failure(const std::exception&) {
  return std::nullopt;
}

}  // namespace convlab::grader::referee
