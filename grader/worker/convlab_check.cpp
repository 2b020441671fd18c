// convlab-check: the harness the grader runs inside the sandbox, linked with one team's code.
//
// It runs one task and writes one JSON document (grader/worker/protocol.hpp) to the file
// descriptor in $CONVLAB_RESULT_FD when it ends; stdout and stderr belong to the team's code.
// It never sees a label: the grader counts the correct predictions itself.
//
//   convlab-check info
//       the GPU (name, drivers), or status no_gpu
//   convlab-check network --model FILE --images FILE --variant NAME|cpu [--runs N]
//                         [--warmup N] [--reference]
//       runs the model's network over the images (gzipped IDX, [N][rows][cols] bytes) with the
//       team's convolution: --warmup untimed passes (default one on the GPU, none on the CPU),
//       then --runs timed passes, each on the images in another rotation, each calling the
//       convolution once per conv layer; returns every timed pass's predictions (in the file's
//       order) and each conv layer's times (fastest, median, every pass); --reference also
//       times the library convolution (cuDNN on the GPU, the CPU reference on the CPU) the same
//       way on the same layers in the same process
//   convlab-check elementwise --variant NAME|cpu --seed S --shape B,M,C,H,W,K [--shape ...]
//       draws x and k for each shape from the seed (elementwise_values()), calls the team's
//       convolution twice with y poisoned (NaN) before each call, and returns the second y
//
// Exit status: 0 when the task ran, 1 when it reported a failure in its document, 2 when no
// document could be written.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <limits>
#include <new>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "datasets/fashion_mnist.hpp"
#include "datasets/idx.hpp"
#include "grader/worker/protocol.hpp"
#include "reference/conv/library_conv.hpp"
#include "reference/conv/student_api.hpp"
#include "reference/core/error.hpp"
#include "reference/model/model.hpp"
#include "reference/network/network.hpp"

#ifdef CONVLAB_HAVE_CUDA
#include "reference/conv/cudnn_conv.hpp"
#include "reference/core/cuda_check.hpp"
#include "reference/core/cuda_stream.hpp"
#include "reference/core/device_buffer.hpp"
#include "reference/network/network_gpu.hpp"
#endif

namespace {

using convlab::ConvShape;
using convlab::Error;
using nlohmann::json;
namespace grader = convlab::grader;

// The GPU variants' names, and (with CUDA) the team's launchers, straight from the registry
// file: only namespace student is linked in here, never the staff solutions.
#define CONVLAB_GPU_VARIANT(id, milestone, file, handout, idea) #id,
constexpr const char* kVariantNames[] = {
#include "reference/conv/gpu_variants.def"
};
#undef CONVLAB_GPU_VARIANT

#ifdef CONVLAB_HAVE_CUDA
struct StudentVariant {
  const char* name;
  convlab::GpuConvFn launcher;
};
#define CONVLAB_GPU_VARIANT(id, milestone, file, handout, idea) {#id, &convlab::student::conv_##id},
constexpr StudentVariant kVariants[] = {
#include "reference/conv/gpu_variants.def"
};
#undef CONVLAB_GPU_VARIANT

// The team's fused conv + tanh + max-pool launcher of `name`, or nullptr where the variant
// offers none.
convlab::GpuConvTanhPoolFn fused_launcher(const std::string& name) {
#define CONVLAB_GPU_FUSED_VARIANT(id) \
  if (name == #id) return &convlab::student::conv_tanh_maxpool_##id;
#include "reference/conv/gpu_variants.def"
#undef CONVLAB_GPU_FUSED_VARIANT
  return nullptr;
}
#endif

// The max-pool a fused launcher is checked with: the one the network runner fuses.
constexpr convlab::PoolShape kFusedPool{2, 2};

struct Args {
  std::string task;
  std::string model, images, variant;
  int runs = 1;
  int warmup = -1;  // -1: one on the GPU, none on the CPU (as `convlab run`)
  bool reference = false;
  std::optional<std::uint64_t> seed;
  std::vector<ConvShape> shapes;
};

template <typename T>
T parse_number(const std::string& flag, const std::string& text, T low, T high) {
  T v{};
  const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || ptr != text.data() + text.size() || v < low || v > high) {
    throw Error(flag + " takes a number from " + std::to_string(low) + " to " +
                std::to_string(high) + ", got '" + text + "'");
  }
  return v;
}

Args parse_args(int argc, char** argv) {
  if (argc < 2) throw Error("usage: convlab-check info|network|elementwise [options]");
  Args a;
  a.task = argv[1];
  if (a.task != "info" && a.task != "network" && a.task != "elementwise") {
    throw Error("unknown task '" + a.task + "': use info, network or elementwise");
  }
  for (int i = 2; i < argc; ++i) {
    const std::string flag = argv[i];
    const auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw Error(flag + " needs a value");
      return argv[++i];
    };
    if (flag == "--model") {
      a.model = value();
    } else if (flag == "--images") {
      a.images = value();
    } else if (flag == "--variant") {
      a.variant = value();
    } else if (flag == "--runs") {
      a.runs = parse_number(flag, value(), 1, 1000);
    } else if (flag == "--warmup") {
      a.warmup = parse_number(flag, value(), 0, 100);
    } else if (flag == "--reference") {
      a.reference = true;
    } else if (flag == "--seed") {
      a.seed =
          parse_number<std::uint64_t>(flag, value(), 0, std::numeric_limits<std::uint64_t>::max());
    } else if (flag == "--shape") {
      const std::string text = value();
      const auto s = grader::parse_shape_argument(text);
      if (!s) throw Error("--shape takes B,M,C,H,W,K (six positive integers), got '" + text + "'");
      s->validate();
      a.shapes.push_back(*s);
    } else {
      throw Error("unknown option '" + flag + "'");
    }
  }
  const auto need = [&](bool ok, const char* what) {
    if (!ok) throw Error(a.task + " needs " + what);
  };
  if (a.task == "network") {
    need(!a.model.empty(), "--model");
    need(!a.images.empty(), "--images");
    need(!a.variant.empty(), "--variant");
  } else if (a.task == "elementwise") {
    need(!a.variant.empty(), "--variant");
    need(a.seed.has_value(), "--seed");
    need(!a.shapes.empty(), "at least one --shape");
  }
  return a;
}

json shape_json(const ConvShape& s) {
  return {{"B", s.B}, {"M", s.M}, {"C", s.C}, {"H", s.H}, {"W", s.W}, {"K", s.K}};
}

// Op Time figures of one network run: the fastest (sum of each layer's fastest call, the rule
// `convlab run` prints), the median (sum of the layers' medians) and every timed run (sum over
// the layers of that run's calls).
json timing_json(const convlab::NetworkRun& run) {
  json layers = json::array();
  std::vector<double> runs;
  double median = 0.0;
  for (const convlab::ConvLayerTime& t : run.conv_layers) {
    layers.push_back({{"layer", t.layer},
                      {"shape", shape_json(t.shape)},
                      {"seconds", t.seconds},
                      {"median_seconds", t.median()},
                      {"samples", t.samples},
                      {"fused", t.fused.empty() ? json(nullptr) : json(t.fused)}});
    median += t.median();
    if (runs.size() < t.samples.size()) runs.resize(t.samples.size(), 0.0);
    for (std::size_t r = 0; r < t.samples.size(); ++r) runs[r] += t.samples[r];
  }
  return {{"op_time_s", run.op_time()},
          {"op_time_median_s", median},
          {"op_time_runs_s", runs},
          {"layers", layers}};
}

#ifdef CONVLAB_HAVE_CUDA
const StudentVariant& find_variant(const std::string& name) {
  std::string names;
  for (const StudentVariant& v : kVariants) {
    if (name == v.name) return v;
    names += (names.empty() ? "" : ", ") + std::string(v.name);
  }
  throw Error("unknown variant '" + name + "': use cpu or one of " + names);
}

json gpu_json() {
  const convlab::GpuInfo info = convlab::gpu_info();
  return {{"name", info.name},
          {"driver", info.driver},
          {"cuda_driver", info.cuda_driver},
          {"sm_count", info.sm_count},
          {"compute_capability", info.compute_capability}};
}
#endif

// Throws unless `variant` names a GPU variant and the GPU can be used; a CPU-only harness cannot
// run a GPU variant at all.
void require_gpu(const std::string& variant) {
  std::string names;
  bool known = false;
  for (const char* name : kVariantNames) {
    known = known || variant == name;
    names += (names.empty() ? "" : ", ") + std::string(name);
  }
  if (!known) throw Error("unknown variant '" + variant + "': use cpu or one of " + names);
#ifdef CONVLAB_HAVE_CUDA
  std::string why;
  if (!convlab::cuda_device_available(&why)) throw convlab::CudaError(why);
#else
  throw Error("variant '" + variant + "' runs on the GPU, but this harness was built without CUDA");
#endif
}

json task_info() {
#ifdef CONVLAB_HAVE_CUDA
  std::string why;
  if (!convlab::cuda_device_available(&why)) return {{"status", "no_gpu"}, {"message", why}};
  return {{"status", "ok"}, {"gpu", gpu_json()}};
#else
  return {{"status", "no_gpu"}, {"message", "this harness was built without CUDA"}};
#endif
}

// The images of pass `pass`, rotated so that no two passes give a call the same input: image i
// of the batch is image (i + offset) % n of the file, offset = pass * 7919 % n (7919 is odd, so
// on the CPU no 128-image chunk repeats from one pass to the next either). A result kept from an
// earlier call is then a wrong result, not a fast one.
std::int64_t pass_offset(int pass, std::int64_t n) {
  return static_cast<std::int64_t>(pass) * 7919 % n;
}

convlab::Tensor rotated(const convlab::Tensor& input, std::int64_t offset) {
  const std::int64_t n = input.dim(0), per_image = input.size() / n;
  convlab::Tensor out(input.shape());
  const float* src = input.data();
  float* dst = out.data();
  std::copy(src + offset * per_image, src + n * per_image, dst);
  std::copy(src, src + offset * per_image, dst + (n - offset) * per_image);
  return out;
}

// Runs the network `warmup` untimed passes and then `runs` timed passes, one call per conv
// layer (per chunk on the CPU) each, every pass on differently rotated images. Returns the
// timed passes' runs, their predictions in file order, and the offsets used.
struct Passes {
  std::vector<convlab::NetworkRun> runs;
  std::vector<std::vector<int>> predictions;
  std::vector<std::int64_t> offsets;
};

template <typename RunOnce>
Passes run_passes(const convlab::Tensor& input, int warmup, int runs, RunOnce&& run_once) {
  const std::int64_t n = input.dim(0);
  Passes p;
  for (int pass = 0; pass < warmup + runs; ++pass) {
    const std::int64_t offset = pass_offset(pass, n);
    convlab::NetworkRun run = run_once(rotated(input, offset));
    if (pass < warmup) continue;
    const std::vector<int> rotated_pred = convlab::predictions(run.output);
    std::vector<int> pred(rotated_pred.size());
    for (std::int64_t i = 0; i < n; ++i) {
      pred[static_cast<std::size_t>((i + offset) % n)] = rotated_pred[static_cast<std::size_t>(i)];
    }
    p.predictions.push_back(std::move(pred));
    p.offsets.push_back(offset);
    p.runs.push_back(std::move(run));
  }
  return p;
}

// One run whose conv layers carry every timed pass's sample; each layer's figure is the
// fastest of them (the original rule: re-run and keep the fastest).
convlab::NetworkRun merged(const std::vector<convlab::NetworkRun>& runs) {
  convlab::NetworkRun m;
  m.conv_layers = runs.front().conv_layers;
  for (convlab::ConvLayerTime& t : m.conv_layers) t.samples.clear();
  for (const convlab::NetworkRun& r : runs) {
    for (std::size_t l = 0; l < m.conv_layers.size() && l < r.conv_layers.size(); ++l) {
      const auto& samples = r.conv_layers[l].samples;
      m.conv_layers[l].samples.insert(m.conv_layers[l].samples.end(), samples.begin(),
                                      samples.end());
    }
  }
  for (convlab::ConvLayerTime& t : m.conv_layers) {
    t.seconds = *std::min_element(t.samples.begin(), t.samples.end());
  }
  return m;
}

json task_network(const Args& a) {
  const convlab::Model model = convlab::load_model(a.model);
  convlab::data::IdxArray idx = convlab::data::read_idx_gz(a.images);
  if (idx.dims.size() != 3 || idx.dims[0] < 1) {
    throw Error(a.images + " must hold images as [count][rows][cols] bytes");
  }
  convlab::data::Dataset images;
  images.count = idx.dims[0];
  images.rows = static_cast<int>(idx.dims[1]);
  images.cols = static_cast<int>(idx.dims[2]);
  images.pixels = std::move(idx.values);
  const convlab::Tensor input = images.images(images.count, model.input_scale);

  const bool gpu = a.variant != "cpu";
  // Every timed call's output is checked: each pass times one call per layer, so the output
  // that goes on through the network is the timed one (never an untimed call's).
  const convlab::TimingOptions once{0, 1};
  const int warmup = a.warmup >= 0 ? a.warmup : (gpu ? 1 : 0);
  json out = {{"variant", a.variant}, {"device", gpu ? "gpu" : "cpu"}, {"images", images.count}};
  Passes team, reference;
  std::string reference_name;
  if (!gpu) {
    team = run_passes(input, warmup, a.runs, [&](const convlab::Tensor& in) {
      return convlab::run_network_cpu(model, in, convlab::student::conv_forward_cpu, once);
    });
    if (a.reference) {
      reference_name = "cpu_reference";
      reference = run_passes(input, warmup, a.runs, [&](const convlab::Tensor& in) {
        return convlab::run_network_cpu(model, in, convlab::conv_forward_reference, once);
      });
    }
    out["gpu"] = nullptr;
  } else {
    require_gpu(a.variant);
#ifdef CONVLAB_HAVE_CUDA
    const StudentVariant& v = find_variant(a.variant);
    out["gpu"] = gpu_json();
    // As `convlab run`: the variant's fused launcher where it offers one (a stub falls back to
    // the plain launcher inside the runner), and cuDNN fused exactly when the team's run was.
    const convlab::GpuConvTanhPoolFn fused_fn = fused_launcher(v.name);
    team = run_passes(input, warmup, a.runs, [&](const convlab::Tensor& in) {
      return convlab::run_network_gpu(model, in, v.launcher, fused_fn, v.name, once);
    });
    const auto& layers = team.runs.front().conv_layers;
    const bool fused =
        std::any_of(layers.begin(), layers.end(), [](const auto& t) { return !t.fused.empty(); });
    if (a.reference) {
      reference_name = "cudnn";
      const convlab::GpuConvTanhPoolCall cudnn_fused =
          fused ? convlab::GpuConvTanhPoolCall(convlab::conv_tanh_maxpool_cudnn) : nullptr;
      reference = run_passes(input, warmup, a.runs, [&](const convlab::Tensor& in) {
        return convlab::run_network_gpu(model, in, convlab::conv_forward_cudnn, cudnn_fused,
                                        "cuDNN", once);
      });
    }
#endif
  }
  json passes = json::array();
  for (std::size_t i = 0; i < team.runs.size(); ++i) {
    passes.push_back({{"offset", team.offsets[i]}, {"predictions", team.predictions[i]}});
  }
  out["warmup_passes"] = warmup;
  out["passes"] = passes;
  out["timing"] = timing_json(merged(team.runs));
  out["reference"] = nullptr;
  if (a.reference) {
    out["reference"] = timing_json(merged(reference.runs));
    out["reference"]["name"] = reference_name;
  }
  return out;
}

// One element-wise case on the CPU: y poisoned, the call, twice; the second y is returned.
std::vector<float> elementwise_cpu(const ConvShape& s, const std::vector<float>& x,
                                   const std::vector<float>& k) {
  std::vector<float> y(static_cast<std::size_t>(s.y_elements()));
  for (int call = 0; call < 2; ++call) {
    std::fill(y.begin(), y.end(), std::numeric_limits<float>::quiet_NaN());
    convlab::student::conv_forward_cpu(y.data(), x.data(), k.data(), s);
  }
  return y;
}

#ifdef CONVLAB_HAVE_CUDA
// The same on the GPU: a kernel must write every element on every call, not only the first.
// `launch(y, x, k, stream)` makes one call; `y_elements` is the size of its output.
template <typename Launch>
std::vector<float> elementwise_gpu(const std::string& what, const ConvShape& s,
                                   std::int64_t y_elements, const std::vector<float>& x,
                                   const std::vector<float>& k, Launch&& launch) {
  convlab::DeviceBuffer dx(s.x_elements()), dk(s.k_elements()), dy(y_elements);
  dx.upload(x);
  dk.upload(k);
  convlab::CudaStream stream;
  try {
    for (int call = 0; call < 2; ++call) {
      dy.fill_bytes(0xff);
      launch(dy.data(), dx.data(), dk.data(), stream.get());
      CUDA_CHECK(cudaStreamSynchronize(stream.get()));
      CUDA_CHECK(cudaGetLastError());
    }
  } catch (const convlab::NotImplemented&) {
    throw;
  } catch (const convlab::CudaError& e) {
    throw convlab::CudaError(what + " failed on " + s.to_string() + ": " + e.what());
  }
  return dy.download();
}
#endif

json task_elementwise(const Args& a) {
  const bool gpu = a.variant != "cpu";
  json out = {{"variant", a.variant}, {"device", gpu ? "gpu" : "cpu"}, {"seed", *a.seed}};
  out["gpu"] = nullptr;
#ifdef CONVLAB_HAVE_CUDA
  const StudentVariant* v = nullptr;
#endif
  if (gpu) {
    require_gpu(a.variant);
#ifdef CONVLAB_HAVE_CUDA
    v = &find_variant(a.variant);
    out["gpu"] = gpu_json();
#endif
  }
  // A variant with a fused launcher has it checked too, on every shape a 2x2 pool fits; its
  // stub (NotImplemented) is reported, not failed: the fused launcher is optional.
#ifdef CONVLAB_HAVE_CUDA
  convlab::GpuConvTanhPoolFn fused = gpu ? fused_launcher(a.variant) : nullptr;
  if (fused != nullptr) out["fused"] = "ok";
#endif
  json outputs = json::array();
  for (std::size_t i = 0; i < a.shapes.size(); ++i) {
    const ConvShape& s = a.shapes[i];
    const std::vector<float> x =
        grader::elementwise_values(*a.seed, i, grader::ElementwiseTensor::x, s.x_elements());
    const std::vector<float> k =
        grader::elementwise_values(*a.seed, i, grader::ElementwiseTensor::k, s.k_elements());
    json o = {{"shape", shape_json(s)}};
    if (!gpu) {
      o["y"] = grader::encode_floats(elementwise_cpu(s, x, k));
    } else {
#ifdef CONVLAB_HAVE_CUDA
      o["y"] = grader::encode_floats(
          elementwise_gpu("the " + std::string(v->name) + " convolution", s, s.y_elements(), x, k,
                          [&](float* y, const float* dx, const float* dk, cudaStream_t st) {
                            v->launcher(y, dx, dk, s, st);
                          }));
      const bool fits = kFusedPool.size <= s.H_out() && kFusedPool.size <= s.W_out();
      if (fused != nullptr && fits) {
        try {
          o["pooled"] = grader::encode_floats(elementwise_gpu(
              "the fused " + std::string(v->name) + " launcher", s, kFusedPool.pooled_elements(s),
              x, k, [&](float* y, const float* dx, const float* dk, cudaStream_t st) {
                fused(y, dx, dk, s, kFusedPool, st);
              }));
        } catch (const convlab::NotImplemented& e) {
          fused = nullptr;
          out["fused"] = "not_implemented";
          out["fused_message"] = e.what();
        }
      }
#endif
    }
    outputs.push_back(o);
  }
  out["outputs"] = outputs;
  return out;
}

// Writes all of `text` to `fd`, retrying short writes.
bool write_all(int fd, const std::string& text) {
  std::size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<std::size_t>(n);
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  const char* fd_text = std::getenv(grader::kResultFdEnv);
  int fd = -1;
  struct stat st {};
  if (fd_text == nullptr ||
      std::from_chars(fd_text, fd_text + std::strlen(fd_text), fd).ec != std::errc() || fd < 0 ||
      ::fstat(fd, &st) != 0) {
    std::cerr << "convlab-check: $" << grader::kResultFdEnv
              << " must name an open file descriptor for the result. The grader runs this "
                 "program; to run it by hand: "
              << grader::kResultFdEnv << "=3 convlab-check TASK ... 3>result.json" << std::endl;
    return 2;
  }
  // Closed on exec, so nothing the team's code starts inherits the channel.
  ::fcntl(fd, F_SETFD, FD_CLOEXEC);

  const auto start = std::chrono::steady_clock::now();
  json result;
  std::string task = argc > 1 ? argv[1] : "";
  try {
    const Args args = parse_args(argc, argv);
    if (args.task == "info") {
      result = task_info();
    } else if (args.task == "network") {
      result = task_network(args);
    } else {
      result = task_elementwise(args);
    }
    if (!result.contains("status")) result["status"] = "ok";
  } catch (const convlab::NotImplemented& e) {
    result = {{"status", "not_implemented"}, {"message", e.what()}};
#ifdef CONVLAB_HAVE_CUDA
  } catch (const convlab::CudaError& e) {
    result = {{"status", "cuda_error"}, {"message", e.what()}};
#endif
  } catch (const Error& e) {
    result = {{"status", "error"}, {"message", e.what()}};
  } catch (const std::bad_alloc&) {
    result = {{"status", "error"}, {"message", "out of memory"}};
  } catch (const std::exception& e) {
    result = {{"status", "error"}, {"message", std::string("unexpected exception: ") + e.what()}};
  }
  result["schema"] = grader::kCheckSchema;
  result["task"] = task;
  result["wall_s"] =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::cout << std::flush;
  if (!write_all(fd, result.dump())) {
    std::cerr << "convlab-check: cannot write the result: " << std::strerror(errno) << std::endl;
    return 2;
  }
  ::close(fd);
  return result["status"] == "ok" ? 0 : 1;
}
