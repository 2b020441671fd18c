// `convlab run`, step 1: every option is checked against the milestone before any data is
// loaded.
#include <algorithm>

#include "reference/commands/run_steps.hpp"
#include "reference/core/error.hpp"
#include "reference/model/model.hpp"

#ifdef CONVLAB_HAVE_CUDA
#include "reference/core/cuda_check.hpp"
#endif

namespace convlab {

namespace fs = std::filesystem;

RunPlan plan_run(const RunOptions& opt, bool fuse) {
  RunPlan plan;
  plan.opt = opt;
  plan.fuse = fuse;
  plan.wall_start = std::chrono::steady_clock::now();
  const fs::path root = convlab_root();
  plan.ms = load_milestone(root, opt.milestone);
  const Milestone& ms = plan.ms;

  const std::string device = opt.device.value_or(ms.default_device);
  if (std::find(ms.devices.begin(), ms.devices.end(), device) == ms.devices.end()) {
    throw Error("milestone " + ms.id + " runs on " + ms.devices.front() +
                " only; --device chooses between cpu and gpu for m1");
  }
#ifndef CONVLAB_HAVE_CUDA
  if (device == "gpu") {
    throw Error("this convlab was built without CUDA, so milestone " + ms.id +
                " cannot run here. Build with the default preset on a machine with the CUDA "
                "toolkit (cmake --preset default), or run m1 --device cpu or m2.");
  }
#endif
  const bool profiling = opt.profile || opt.profile_json.has_value();
  if (profiling && device != "gpu") {
    throw Error("--profile records GPU activity, and milestone " + ms.id +
                (ms.device_choice() ? " --device cpu" : "") +
                " runs on the CPU. Profile a GPU run: m1 --device gpu, m3 or final.");
  }
  if (opt.variant && ms.variants.empty()) {
    throw Error("--variant applies to m3 and final; milestone " + ms.id + " has no variants");
  }

  // Every option is checked before any data is loaded.
  if (opt.runs < 1 || opt.runs > 100) {
    throw Error("--runs must be between 1 and 100, got " + std::to_string(opt.runs));
  }
  if (opt.images && *opt.images < 1) {
    throw Error("N must be between 1 and the size of the test set (10000), got " +
                std::to_string(*opt.images));
  }
  for (const fs::path& d : opt.model_dirs) {
    if (!fs::is_directory(d)) {
      throw Error("--models " + d.string() +
                  " is not a directory (it holds *.safetensors model "
                  "files)");
    }
  }
  if (opt.variant && *opt.variant != "all" &&
      std::find(ms.variants.begin(), ms.variants.end(), *opt.variant) == ms.variants.end()) {
    std::string list;
    for (const std::string& v : ms.variants) list += (list.empty() ? "" : ", ") + v;
    throw Error("variant " + *opt.variant + " is not part of milestone " + ms.id +
                ": choose one of " + list + ", or all");
  }
  std::vector<fs::path> model_dirs = opt.model_dirs;
  model_dirs.push_back(root / "datasets" / "models");
  const std::string model_name = opt.model.value_or(ms.default_model);
  const fs::path model_path = find_model(model_name, model_dirs);
  const std::int64_t n = opt.images.value_or(ms.default_images);
#ifdef CONVLAB_HAVE_CUDA
  if (device == "gpu") {
    std::string why;
    if (!cuda_device_available(&why)) {
      const bool cpu_too = ms.device_choice();
      throw CudaError(
          "milestone " + ms.id + (cpu_too ? " --device gpu" : "") + " needs a CUDA GPU: " + why +
          ". Run it on the course's GPU machine" +
          (cpu_too ? "; here, run " + ms.id + " --device cpu or m2." : "; here, run m2."));
    }
  }
#endif

  plan.device = device;
  plan.profiling = profiling;
  plan.model_path = model_path;
  plan.n = n;
  if (const std::vector<std::string> cpu = variant_ids(ms.id, "cpu"); !cpu.empty()) {
    plan.cpu_code = cpu_conv(opt.impl, cpu.front());
  }
  return plan;
}

}  // namespace convlab
