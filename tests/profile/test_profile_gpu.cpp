// The profiler on a GPU: a profiled network run shows its conv kernel, the copies and the CUDA
// calls with plausible times, and `convlab run ... --profile` prints the table.
#include <cuda.h>
#include <dlfcn.h>
#include <doctest/doctest.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "datasets/synthetic.hpp"
#include "reference/core/cuda_check.hpp"
#include "reference/network/network_gpu.hpp"
#include "reference/profile/profiler.hpp"
#include "tests/profile/profile_test_kernel.hpp"
#include "tests/support/test_support.hpp"

namespace test_profile_gpu {

using namespace convlab;
using namespace convlab::profile;

namespace {

const ProfileRow* row_named(const std::vector<ProfileRow>& rows, const std::string& name) {
  const auto it =
      std::find_if(rows.begin(), rows.end(), [&](const ProfileRow& r) { return r.name == name; });
  return it == rows.end() ? nullptr : &*it;
}

Tensor random_images(const Model& model, std::int64_t n) {
  Shape shape{n};
  shape.insert(shape.end(), model.input.begin(), model.input.end());
  std::int64_t count = 1;
  for (std::int64_t d : shape) count *= d;
  return Tensor(shape, test::random_values(count, 11));
}

}  // namespace

TEST_CASE("a profiled network run shows the conv kernel, copies and CUDA calls") {
  const Model model = load_model(test::source_dir() / "datasets/models/ece408-high.safetensors");
  const Tensor input = random_images(model, 256);
  const TimingOptions timing{1, 3};  // 4 calls of the conv kernel per conv layer

  const auto wall_start = std::chrono::steady_clock::now();
  Profiler profiler;
  const NetworkRun run =
      run_network_gpu(model, input, test::launch_profile_test_kernel, "test kernel", timing);
  const Profile profile = profiler.stop();
  const double wall_ns =
      std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - wall_start)
          .count();
  REQUIRE(run.conv_layers.size() == 1);
  CHECK(profile.dropped_records == 0);
  CHECK(profile.wall_ns > 0);
  CHECK(static_cast<double>(profile.wall_ns) <= wall_ns);

  const ProfileSummary s = summarize(profile);
  const ProfileRow* conv = row_named(s.gpu_activities, test::kProfileTestKernelName);
  REQUIRE_MESSAGE(conv != nullptr, format_summary(s, ::getpid(), "test"));
  CHECK(conv->calls == 4);
  CHECK(conv->min_ns > 0);
  // A kernel ends inside the host interval that waited for it: the fastest kernel is no slower
  // than the fastest timed call (Op Time), and all of them fit in the profiled interval.
  CHECK(static_cast<double>(conv->min_ns) <= run.conv_layers[0].seconds * 1e9);
  CHECK(static_cast<double>(conv->total_ns) <= static_cast<double>(profile.wall_ns));
  std::uint64_t gpu_total = 0;
  for (const ProfileRow& r : s.gpu_activities) gpu_total += r.total_ns;
  CHECK(gpu_total <= profile.wall_ns);  // one stream: activities do not overlap

  const ProfileRow* htod = row_named(s.gpu_activities, "[CUDA memcpy HtoD]");
  const ProfileRow* dtoh = row_named(s.gpu_activities, "[CUDA memcpy DtoH]");
  const ProfileRow* memset = row_named(s.gpu_activities, "[CUDA memset]");
  REQUIRE(htod != nullptr);
  REQUIRE(dtoh != nullptr);
  REQUIRE(memset != nullptr);
  CHECK(htod->calls >= 2);    // the images and the weights
  CHECK(dtoh->calls >= 1);    // the output
  CHECK(memset->calls >= 4);  // the output poisoned before every conv call

  const ProfileRow* launch = row_named(s.api_calls, "cudaLaunchKernel");
  const ProfileRow* memcpy = row_named(s.api_calls, "cudaMemcpy");
  const ProfileRow* sync = row_named(s.api_calls, "cudaDeviceSynchronize");
  REQUIRE(launch != nullptr);
  REQUIRE(memcpy != nullptr);
  REQUIRE(sync != nullptr);
  CHECK(launch->calls >= 4);
  CHECK(memcpy->calls >= htod->calls);
  CHECK(sync->calls >= 8);  // before and after every conv call
  for (const ProfileRow& r : s.api_calls) {
    CHECK_MESSAGE(r.name.starts_with("cuda"), "a driver call without driver_api: " << r.name);
  }

  const std::string table = format_summary(s, ::getpid(), "test");
  CHECK(table.find(" GPU activities:  ") != std::string::npos);
  CHECK(table.find("      API calls:  ") != std::string::npos);
  CHECK(table.find(std::string("  ") + test::kProfileTestKernelName + "\n") != std::string::npos);
  CHECK(table.find("  [CUDA memcpy HtoD]\n") != std::string::npos);
  CHECK(table.find("  cudaLaunchKernel\n") != std::string::npos);
}

TEST_CASE("driver calls are recorded only when asked for") {
  // The driver library is looked up at run time, as the CUDA runtime does, so that this binary
  // still starts (and skips) on a machine without one.
  void* driver = dlopen("libcuda.so.1", RTLD_LAZY);
  REQUIRE(driver != nullptr);
  using MemGetInfo = CUresult (*)(std::size_t*, std::size_t*);
  void* symbol = dlsym(driver, "cuMemGetInfo_v2");
  REQUIRE(symbol != nullptr);
  const auto mem_get_info = reinterpret_cast<MemGetInfo>(symbol);
  for (const bool driver_api : {false, true}) {
    ProfilerOptions options;
    options.driver_api = driver_api;
    Profiler profiler(options);
    CUDA_CHECK(cudaFree(nullptr));  // the runtime's context exists and is current
    std::size_t free_bytes = 0, total_bytes = 0;
    REQUIRE(mem_get_info(&free_bytes, &total_bytes) == CUDA_SUCCESS);
    const ProfileSummary s = summarize(profiler.stop());
    INFO("driver_api=", driver_api, "\n", format_summary(s, ::getpid(), "test"));
    CHECK((row_named(s.api_calls, "cuMemGetInfo") != nullptr) == driver_api);
    CHECK(row_named(s.api_calls, "cudaFree") != nullptr);
  }
  dlclose(driver);
}

TEST_CASE("one profiler at a time, stopped once") {
  Profiler first;
  CHECK_THROWS_AS(Profiler(), Error);
  const Profile p = first.stop();
  CHECK(p.dropped_records == 0);
  CHECK_THROWS_AS(first.stop(), Error);
  Profiler second;  // the first one's stop released CUPTI
  const Profile nothing = second.stop();
  // Not even stop()'s own cudaDeviceSynchronize; only CUPTI's overhead records may be there.
  for (const ProfileRecord& r : nothing.records) {
    CHECK_MESSAGE(r.section == Section::overhead, r.name);
  }
}

TEST_CASE("convlab run --profile prints the table after the run's lines") {
  test::TempDir dir;
  data::write_dataset_files(dir.path(), data::make_synthetic(16, 28, 28, 1),
                            data::make_synthetic(64, 28, 28, 2));
  const std::string json_path = (dir.path() / "profile.json").string();
  std::string out;
  const int code = test::run_command(
      "CONVLAB_DATA=" + dir.path().string() + " " + test::convlab_binary().string() +
          " run m1 baseline 64 --device gpu --profile-json " + json_path + " 2>&1",
      &out);
  INFO(out);
  CHECK((code == 0 || code == 3));  // 3: the synthetic images have no expected count
  const std::size_t op = out.find("\nOp Time: ");
  const std::size_t correctness = out.find("\nCorrectness: ");
  const std::size_t result = out.find("== Profiling result:\n");
  REQUIRE(op != std::string::npos);
  REQUIRE(correctness != std::string::npos);
  REQUIRE(result != std::string::npos);
  CHECK(op < correctness);
  CHECK(correctness < result);
  CHECK(out.find("== Profiling application: convlab run m1 baseline 64 --device gpu") !=
        std::string::npos);
  CHECK(
      out.find("            Type  Time(%)      Time     Calls       Avg       Min       Max  Name\n"
               " GPU activities:  ") != std::string::npos);
  CHECK(out.find("      API calls:  ") != std::string::npos);
  CHECK(out.find("  [CUDA memcpy HtoD]\n") != std::string::npos);
  CHECK(out.find("  [CUDA memcpy DtoH]\n") != std::string::npos);
  CHECK(out.find("  cudaMemcpy\n") != std::string::npos);

  std::ifstream f(json_path);
  REQUIRE(f.good());
  const nlohmann::json j = nlohmann::json::parse(f);
  CHECK(j["gpu_activities"].size() >= 3);
  CHECK(j["api_calls"].size() >= 3);
  double kernel_s = 0.0;
  for (const auto& row : j["gpu_activities"]) {
    CHECK(row["calls"].get<int>() > 0);
    const std::string name = row["name"];
    if (!name.starts_with("[CUDA ")) kernel_s += row["time_s"].get<double>();
  }
  CHECK(kernel_s > 0.0);
  CHECK(kernel_s <= j["wall_time_s"].get<double>());
}

}  // namespace test_profile_gpu
