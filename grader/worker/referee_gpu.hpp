// The referee's GPU work, apart from its tasks (referee.cpp): defined by referee_gpu.cpp in a
// build with CUDA, and by referee_cpu_only.cpp, which says there is no GPU, in one without.
#pragma once

#include <cstdint>
#include <exception>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "grader/worker/remote_conv.hpp"
#include "reference/conv/conv_shape.hpp"
#include "reference/model/model.hpp"
#include "reference/network/runner.hpp"

namespace convlab::grader::referee {

/// The `info` task's document: the GPU and its drivers, or status no_gpu with the reason.
nlohmann::json task_info();

/// Throws unless the GPU can be used here for the GPU variant `variant`.
void require_gpu(const std::string& variant);

/// The GPU in use (name, drivers, SMs, compute capability) as a check's document states it.
nlohmann::json gpu_json();

/// The team's GPU convolution in the network runner `convlab run` uses: with the variant's
/// fused launcher where it offers one (a stub falls back to the plain launcher in the runner).
NetworkRunner team_gpu_runner(const Model& model, RemoteConv& team, const std::string& variant);

/// The elementwise task on the GPU: x and k of each shape drawn from `seed`, the team's
/// convolution called twice (y poisoned before each call), and its fused launcher too where it
/// has one and a 2x2 pool fits. Returns one {"shape", "y"[, "pooled"]} per shape; sets
/// out["fused"] (and out["fused_message"] when the fused launcher is a stub).
nlohmann::json gpu_elementwise(RemoteConv& team, std::uint64_t seed,
                               const std::vector<ConvShape>& shapes, nlohmann::json& out);

/// The document of a failure of the referee's own GPU work (no GPU, its memory full, another
/// CUDA error), or nothing when `e` is not a CUDA error.
std::optional<nlohmann::json> gpu_failure(const std::exception& e);

}  // namespace convlab::grader::referee
