// convlab-check: the trusted referee of one check. It never loads a team's code.
//
// The grader runs it beside the team's process (convlab-team, in the sandbox) and hands both
// ends of one socket. The referee owns everything the verdict rests on: it reads the model and
// the images (the team's process sees neither), runs the network with the framework's layers,
// and for each conv layer asks the team's process to compute the convolution on buffers it
// shares with it (grader/worker/remote_conv.hpp), timing each call with its own clock. It writes
// one JSON document (grader/worker/protocol.hpp) to $CONVLAB_RESULT_FD; the grader judges it.
//
//   convlab-check info
//       the GPU (name, drivers), or status no_gpu
//   convlab-check network --model FILE --images FILE --variant NAME [--runs N]
//                         [--warmup N] [--reference] [--noise-seed S] [--staged] [--timed-only]
//       one pass of the network over the images (gzipped IDX, [N][rows][cols] bytes) with the
//       team's convolution: its predictions, in the file's order (the grader counts them
//       against the labels); --timed-only skips it (the grader counted in a run of its own, beside
//       other checks). Then --warmup untimed and --runs timed passes on fresh inputs:
//       the images rotated and under fresh pixel noise drawn from --noise-seed (a seed the
//       grader draws when the grade starts), so no call sees an input seen before; every
//       timed call's output is compared with the library convolution (CPU) or cuDNN (GPU) on
//       the same input ("verification"), and each conv layer's times are kept (fastest,
//       median, every pass). --reference also times the library convolution on the same
//       inputs, after the team's process is gone: the grader writes a byte to
//       $CONVLAB_TEAM_GONE_FD once every process of the team's run has ended, so nothing of
//       the team's can load the machine while the reference is timed. --staged: the team's
//       process copies into buffers of its own (compute-sanitizer runs; no timing)
//   convlab-check elementwise --variant NAME --seed S --shape B,M,C,H,W,K [--shape ...]
//       draws x and k for each shape from the seed (elementwise_values()), has the team's
//       convolution called twice with y poisoned (NaN) before each call, and returns the
//       second y
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
#include <memory>
#include <new>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "grader/worker/protocol.hpp"
#include "grader/worker/referee_gpu.hpp"
#include "grader/worker/remote_conv.hpp"
#include "reference/conv/variant_table.hpp"
#include "reference/core/error.hpp"
#include "reference/core/stopwatch.hpp"
#include "reference/data/fashion_mnist.hpp"
#include "reference/data/idx.hpp"
#include "reference/model/model.hpp"
#include "reference/network/network.hpp"
#include "reference/network/runner.hpp"

namespace {

using convlab::ConvShape;
using convlab::Error;
using nlohmann::json;
namespace grader = convlab::grader;

// Whether `variant` runs on the GPU; throws Error naming the declared variants otherwise.
bool runs_on_gpu(const std::string& variant) {
  return convlab::find_variant(variant).gpu();
}

// Pixel noise of the timed passes: each pixel moves by up to this many grey levels.
constexpr int kNoiseLevels = 16;

struct Args {
  std::string task;
  std::string model, images, variant;
  int runs = 0;
  int warmup = -1;  // -1: one on the GPU, none on the CPU (as `convlab run`)
  bool reference = false;
  bool staged = false;
  bool timed_only = false;
  std::optional<std::uint64_t> seed, noise_seed;
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
  constexpr auto kMax64 = std::numeric_limits<std::uint64_t>::max();
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
      a.runs = parse_number(flag, value(), 0, 1000);
    } else if (flag == "--warmup") {
      a.warmup = parse_number(flag, value(), 0, 100);
    } else if (flag == "--reference") {
      a.reference = true;
    } else if (flag == "--staged") {
      a.staged = true;
    } else if (flag == "--timed-only") {
      a.timed_only = true;
    } else if (flag == "--seed") {
      a.seed = parse_number<std::uint64_t>(flag, value(), 0, kMax64);
    } else if (flag == "--noise-seed") {
      a.noise_seed = parse_number<std::uint64_t>(flag, value(), 0, kMax64);
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
    need(a.runs == 0 || a.noise_seed.has_value(), "--noise-seed for timed runs");
    need(!a.timed_only || (a.runs > 0 && !a.staged), "--runs and no --staged with --timed-only");
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

// The socket to the team's process, handed over by the grader.
int team_socket() {
  const char* text = std::getenv("CONVLAB_PASS_FD");
  int fd = -1;
  if (text == nullptr || std::from_chars(text, text + std::strlen(text), fd).ec != std::errc() ||
      fd < 0) {
    throw Error("no socket to the team's process ($CONVLAB_PASS_FD): the grader runs this task");
  }
  return fd;
}

// Blocks until the grader says that every process of the team's run has ended (one byte on
// $CONVLAB_TEAM_GONE_FD). Nothing is timed on the referee's side before then; without the
// descriptor the reference cannot be timed honestly, and the task stops.
void wait_for_team_gone() {
  const char* text = std::getenv(grader::kTeamGoneFdEnv);
  int fd = -1;
  if (text == nullptr || std::from_chars(text, text + std::strlen(text), fd).ec != std::errc() ||
      fd < 0) {
    throw Error(std::string("--reference needs $") + grader::kTeamGoneFdEnv +
                ": the grader runs this task and says when the team's run has ended");
  }
  char byte = 0;
  ssize_t n;
  do {
    n = ::read(fd, &byte, 1);
  } while (n < 0 && errno == EINTR);
  if (n != 1) throw Error("the grader did not say that the team's run had ended");
}

// The input of timed pass `pass`: the images rotated by pass * 7919 (so no call gets the batch
// of the call before it), every pixel moved by a fresh amount in [-kNoiseLevels, kNoiseLevels]
// grey levels (clamped to 0..255) drawn from `seed` and the pass: inputs no call has seen,
// with the statistics of real images, so a kernel that exploits the data is timed as on them.
convlab::Tensor noisy_pass_input(const convlab::data::Dataset& images, float scale,
                                 std::uint64_t seed, int pass) {
  const std::int64_t n = images.count;
  const std::int64_t per = static_cast<std::int64_t>(images.rows) * images.cols;
  const std::int64_t offset = static_cast<std::int64_t>(pass) * 7919 % n;
  const std::vector<float> u = grader::elementwise_values(
      seed, 1000003 + static_cast<std::size_t>(pass), grader::ElementwiseTensor::x, n * per);
  convlab::Tensor out({n, 1, images.rows, images.cols});
  float* dst = out.data();
  for (std::int64_t i = 0; i < n; ++i) {
    const std::uint8_t* src = images.pixels.data() + ((i + offset) % n) * per;
    for (std::int64_t j = 0; j < per; ++j) {
      const int delta = static_cast<int>(std::lround(u[static_cast<std::size_t>(i * per + j)] * kNoiseLevels));
      const int v = std::clamp(static_cast<int>(src[j]) + delta, 0, 255);
      dst[i * per + j] = static_cast<float>(v) * scale;
    }
  }
  return out;
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

json verification_json(const grader::Verification& v) {
  json j = {{"calls", v.calls}, {"failed", v.failed}, {"worst_error", v.worst_error},
            {"atol", grader::kVerifyAtol}, {"rtol", grader::kVerifyRtol}};
  if (v.first) {
    const grader::VerifyFailure& f = *v.first;
    j["first_failure"] = {{"call", f.call},
                          {"shape", shape_json(f.shape)},
                          {"fused", f.fused},
                          {"mismatches", f.mismatches},
                          {"at", grader::output_coordinates(f.index, f.shape, f.fused)},
                          {"got", std::isfinite(f.got) ? json(f.got) : json(std::to_string(f.got))},
                          {"want", f.want}};
  }
  return j;
}

// One call per pass, timed by the referee's own measurement of the remote call.
convlab::TimingOptions referee_clock(const grader::RemoteConv& team) {
  return convlab::TimingOptions(0, 1, [&team](const std::function<void()>& call) {
    call();
    return team.last_seconds();
  });
}

// The images of a network task: gzipped IDX, [count][rows][cols] bytes, no labels.
convlab::data::Dataset read_images(const std::string& path) {
  convlab::data::IdxArray idx = convlab::data::read_idx_gz(path);
  if (idx.dims.size() != 3 || idx.dims[0] < 1) {
    throw Error(path + " must hold images as [count][rows][cols] bytes");
  }
  convlab::data::Dataset images;
  images.count = idx.dims[0];
  images.rows = static_cast<int>(idx.dims[1]);
  images.cols = static_cast<int>(idx.dims[2]);
  images.pixels = std::move(idx.values);
  return images;
}

// Warm-up and timed passes on fresh inputs, every timed call verified; then, with
// --reference, the same inputs through the library once the team's run is over (cuDNN fused
// exactly when the team's run was, as `convlab run` does).
void timed_passes(const Args& a, const convlab::Model& model, const convlab::data::Dataset& images,
                  int warmup, grader::RemoteConv& team, const convlab::NetworkRunner& team_runner,
                  convlab::Device device, json& out) {
  // Only the conv layers' times are read from these passes: the layers after the last conv
  // (the largest tanh, the fully-connected layers) would cost as much as the team's call.
  convlab::TimingOptions own_clock{0, 1};
  own_clock.through_last_conv = true;
  convlab::TimingOptions team_clock = referee_clock(team);
  team_clock.through_last_conv = true;
  std::vector<convlab::Tensor> inputs;
  for (int pass = 0; pass < warmup + a.runs; ++pass) {
    inputs.push_back(noisy_pass_input(images, model.input_scale, *a.noise_seed, pass));
  }
  std::vector<convlab::NetworkRun> team_runs, library_runs;
  bool fused = false;
  for (int pass = 0; pass < warmup + a.runs; ++pass) {
    team.set_verify(pass >= warmup);
    convlab::NetworkRun r = team_runner(inputs[static_cast<std::size_t>(pass)], team_clock);
    if (pass == 0) fused = convlab::any_fused(r);
    if (pass >= warmup) team_runs.push_back(std::move(r));
  }
  team.set_verify(false);
  if (a.reference) {
    team.quit();
    wait_for_team_gone();
    const convlab::NetworkRunner library =
        convlab::library_runner(model, device, convlab::Precision::fp32, fused);
    for (int pass = 0; pass < warmup + a.runs; ++pass) {
      convlab::NetworkRun ref = library(inputs[static_cast<std::size_t>(pass)], own_clock);
      if (pass >= warmup) library_runs.push_back(std::move(ref));
    }
  }
  out["warmup_passes"] = warmup;
  out["timed_passes"] = a.runs;
  out["noise_seed"] = *a.noise_seed;
  out["timing"] = timing_json(merged(team_runs));
  out["verification"] = verification_json(team.verification());
  if (a.reference) out["reference"] = timing_json(merged(library_runs));
}

// The team's convolution in the network runner that `convlab run` uses.
convlab::NetworkRunner team_runner(const convlab::Model& model, grader::RemoteConv& team,
                                   const std::string& variant, bool gpu) {
  if (gpu) return grader::referee::team_gpu_runner(model, team, variant);
  return convlab::cpu_runner(
      model,
      [&team](float* y, const float* x, const float* k, const ConvShape& s) {
        team.cpu(y, x, k, s);
      },
      variant);
}

json task_network(const Args& a) {
  const convlab::Model model = convlab::load_model(a.model);
  const convlab::data::Dataset images = read_images(a.images);

  const convlab::Device device = convlab::find_variant(a.variant).device;
  const bool gpu = device == convlab::Device::gpu;
  if (gpu) grader::referee::require_gpu(a.variant);
  grader::RemoteConv team(team_socket(), a.variant, a.staged);
  // Warm-up passes: as many as `convlab run` makes warm-up calls, unless --warmup says.
  const int warmup = a.warmup >= 0 ? a.warmup : convlab::warmup_calls(device);
  json out = {{"variant", a.variant}, {"device", gpu ? "gpu" : "cpu"}, {"images", images.count}};
  out["gpu"] = gpu ? grader::referee::gpu_json() : json(nullptr);
  const convlab::NetworkRunner runner = team_runner(model, team, a.variant, gpu);

  // The count: one pass on the real images, in the file's order.
  json passes = json::array();
  if (!a.timed_only) {
    const convlab::NetworkRun count =
        runner(images.images(images.count, model.input_scale), referee_clock(team));
    passes.push_back({{"offset", 0}, {"predictions", convlab::predictions(count.output)}});
  }
  out["passes"] = passes;
  out["warmup_passes"] = 0;
  out["timing"] = nullptr;
  out["reference"] = nullptr;
  out["verification"] = nullptr;
  if (a.runs == 0 || a.staged) return out;

  timed_passes(a, model, images, warmup, team, runner, device, out);
  if (a.reference) out["reference"]["name"] = gpu ? "cudnn" : "cpu_reference";
  return out;
}

json task_elementwise(const Args& a) {
  const bool gpu = runs_on_gpu(a.variant);
  json out = {{"variant", a.variant}, {"device", gpu ? "gpu" : "cpu"}, {"seed", *a.seed}};
  out["gpu"] = nullptr;
  if (gpu) grader::referee::require_gpu(a.variant);
  grader::RemoteConv team(team_socket(), a.variant, false);
  if (gpu) {
    out["gpu"] = grader::referee::gpu_json();
    json outputs = grader::referee::gpu_elementwise(team, *a.seed, a.shapes, out);
    for (std::size_t i = 0; i < a.shapes.size(); ++i) outputs[i]["shape"] = shape_json(a.shapes[i]);
    out["outputs"] = outputs;
    return out;
  }
  json outputs = json::array();
  for (std::size_t i = 0; i < a.shapes.size(); ++i) {
    const ConvShape& s = a.shapes[i];
    const std::vector<float> x =
        grader::elementwise_values(*a.seed, i, grader::ElementwiseTensor::x, s.x_elements());
    const std::vector<float> k =
        grader::elementwise_values(*a.seed, i, grader::ElementwiseTensor::k, s.k_elements());
    // Two calls each: y is poisoned before every call, so both must write every output.
    std::vector<float> y(static_cast<std::size_t>(s.y_elements()));
    for (int call = 0; call < 2; ++call) team.cpu(y.data(), x.data(), k.data(), s);
    outputs.push_back({{"shape", shape_json(s)}, {"y", grader::encode_floats(y)}});
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
                 "program beside the team's process."
              << std::endl;
    return 2;
  }
  ::fcntl(fd, F_SETFD, FD_CLOEXEC);

  const auto start = std::chrono::steady_clock::now();
  json result;
  std::string task = argc > 1 ? argv[1] : "";
  // Statuses of the team's doing (not_implemented, cuda_error, error, team_lost) come from the
  // team's process; anything else that fails here is the referee's own problem.
  try {
    const Args args = parse_args(argc, argv);
    if (args.task == "info") {
      result = grader::referee::task_info();
    } else if (args.task == "network") {
      result = task_network(args);
    } else {
      result = task_elementwise(args);
    }
    if (!result.contains("status")) result["status"] = "ok";
  } catch (const grader::TeamNotImplemented& e) {
    result = {{"status", "not_implemented"}, {"message", e.what()}};
  } catch (const grader::TeamCudaError& e) {
    result = {{"status", "cuda_error"}, {"message", e.what()}};
  } catch (const grader::TeamError& e) {
    result = {{"status", "error"}, {"message", e.what()}};
  } catch (const grader::TeamLost& e) {
    result = {{"status", "team_lost"}, {"message", e.what()}};
  } catch (const grader::TeamWroteInput& e) {
    result = {{"status", "input_written"}, {"message", e.what()}};
  } catch (const std::bad_alloc&) {
    result = {{"status", "referee_error"}, {"message", "out of memory"}};
  } catch (const std::exception& e) {
    result = grader::referee::gpu_failure(e).value_or(
        json{{"status", "referee_error"}, {"message", e.what()}});
  }
  result["schema"] = grader::kCheckSchema;
  result["task"] = task;
  result["wall_s"] = convlab::seconds_since(start);
  if (!write_all(fd, result.dump())) {
    std::cerr << "convlab-check: cannot write the result: " << std::strerror(errno) << std::endl;
    return 2;
  }
  ::close(fd);
  return result["status"] == "ok" ? 0 : 1;
}
