// `convlab bench` on the GPU. For each layer: random x and k on the device, cuDNN's
// IMPLICIT_GEMM output as the oracle, cudnnFind's fastest FMA algorithm timed, then every
// variant asked for checked and timed the same way. The method is described in bench.hpp.
#include "reference/bench/bench_gpu.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <functional>
#include <iostream>
#include <string>
#include <utility>

#include "reference/bench/cudnn_find.hpp"
#include "reference/device/device_tools.hpp"
#include "reference/device/peak.hpp"
#include "reference/core/cuda_check.hpp"
#include "reference/core/device_buffer.hpp"
#include "reference/network/network_gpu.hpp"

namespace convlab {

namespace {

// The staff solution of a student file mirrors its path: student/X -> reference/solutions/X.
std::string code_file(const GpuVariant& v, Impl impl) {
  std::string_view file = v.student_file;
  if (impl == Impl::student) return std::string(file);
  constexpr std::string_view prefix = "student/";
  if (file.starts_with(prefix)) file.remove_prefix(prefix.size());
  return "reference/solutions/" + std::string(file);
}

std::string gib_text(double bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f GiB", bytes / (1024.0 * 1024 * 1024));
  return buf;
}

// x, k, the oracle's y and the y under test of one layer, on the device.
struct LayerBuffers {
  DeviceBuffer x, k, y_ref, y;
  explicit LayerBuffers(const ConvShape& s)
      : x(s.x_elements()), k(s.k_elements()), y_ref(s.y_elements()), y(s.y_elements()) {}
};

LayerBuffers allocate(const NetLayer& layer, const ConvShape& s) {
  try {
    return LayerBuffers(s);
  } catch (const CudaError& e) {
    cudaGetLastError();  // an allocation failure is not sticky: clear it
    const double bytes =
        static_cast<double>(s.x_elements() + s.k_elements() + 2 * s.y_elements()) * sizeof(float);
    throw Error("layer " + layer.name + " (" + s.to_string() + ") needs " + gib_text(bytes) +
                " of device memory for x, k and two outputs, more than is free: use a smaller "
                "--batch (" +
                e.what() + ")");
  }
}

// The largest workspace up to `wanted` bytes that can be allocated now, leaving some memory
// free for cuDNN's own needs. Returns its size (possibly 0).
std::size_t allocate_workspace(DeviceBuffer& ws, std::size_t wanted) {
  constexpr std::size_t kReserve = std::size_t{256} << 20;
  std::size_t free = 0, total = 0;
  CUDA_CHECK(cudaMemGetInfo(&free, &total));
  std::size_t bytes = std::min(wanted, free > kReserve ? free - kReserve : 0);
  while (bytes > 0) {
    try {
      ws = DeviceBuffer(static_cast<std::int64_t>((bytes + sizeof(float) - 1) / sizeof(float)));
      return bytes;
    } catch (const CudaError&) {
      cudaGetLastError();
      bytes /= 2;  // fragmentation: try smaller
      if (bytes < (std::size_t{1} << 20)) bytes = 0;
    }
  }
  return 0;
}

std::vector<float> download(const DeviceBuffer& b, const BenchStream& stream) {
  stream.sync();
  CUDA_CHECK(cudaDeviceSynchronize());  // also any work a launcher put on another stream
  return b.download();
}

int device_attribute(cudaDeviceAttr attribute, int device) {
  int value = 0;
  CUDA_CHECK(cudaDeviceGetAttribute(&value, attribute, device));
  return value;
}

// What the roofline's physical ceilings are computed from (clocks are reported in kHz).
DeviceSpec device_spec(const GpuInfo& info, int device) {
  DeviceSpec d;
  d.compute_capability = info.compute_capability;
  d.sm_count = info.sm_count;
  d.clock_hz = 1e3 * device_attribute(cudaDevAttrClockRate, device);
  d.memory_clock_hz = 1e3 * device_attribute(cudaDevAttrMemoryClockRate, device);
  d.memory_bus_bits = device_attribute(cudaDevAttrGlobalMemoryBusWidth, device);
  return d;
}

// The machine, the peaks and the bandwidths, for the report's header.
BenchMachine describe_machine() {
  const GpuInfo info = gpu_info();
  BenchMachine m;
  m.gpu = info.name;
  m.driver = info.driver;
  m.cuda_driver = info.cuda_driver;
  int device = 0, runtime = 0;
  CUDA_CHECK(cudaGetDevice(&device));
  CUDA_CHECK(cudaRuntimeGetVersion(&runtime));
  m.device = device_spec(info, device);
  m.l2_bytes = device_attribute(cudaDevAttrL2CacheSize, device);
  m.cuda_runtime = std::to_string(runtime / 1000) + "." + std::to_string(runtime % 1000 / 10);
  m.cudnn = cudnn_version_text();
  const Fp32Peak& peak = measured_fp32_peak();
  m.fp32_peak = peak.flops_per_s;
  m.fp32_peak_method = peak.method;
  const MemoryBandwidth& bw = measured_memory_bandwidth();
  m.hbm_bandwidth = bw.bytes_per_s;
  m.hbm_method = bw.method;
  const MemoryBandwidth& write = measured_write_bandwidth();
  m.write_bandwidth = write.bytes_per_s;
  m.write_method = write.method;
  return m;
}

// Everything one layer needs to check and time an implementation.
struct LayerRun {
  const ConvShape& shape;
  LayerBuffers& buf;
  const std::vector<float>& ref;
  const BenchStream& stream;
  const L2Flusher& flusher;
  const BenchOptions& opt;

  void poison() const {
    CUDA_CHECK(cudaMemsetAsync(
        buf.y.data(), 0xff, static_cast<std::size_t>(buf.y.size()) * sizeof(float), stream.get()));
  }

  // Checked call, warm-up, timed runs, check of the last run. Fills time and check, and
  // returns whether both checks passed (a failed first check wins: it is the clearer report).
  bool measure(const std::function<void()>& call, Precision precision, TimingStats& time,
               OutputCheck& check, std::string& message) const {
    const Tolerance tol = tolerance_for(shape, precision);
    poison();
    call();
    check = check_output(download(buf.y, stream), ref, shape, tol);
    for (int i = 0; i < kBenchWarmup; ++i) call();
    time = summarize(time_calls([this] { poison(); }, call, opt.runs, stream.get(),
                                opt.flush_l2 ? &flusher : nullptr));
    const OutputCheck last = check_output(download(buf.y, stream), ref, shape, tol);
    if (check.ok && !last.ok) {
      check = last;
      message =
          "The first call was right but the last timed run was not: every call must compute "
          "every output (the bench poisons y before each one).";
    }
    return check.ok;
  }
};

// cuDNN's fastest eligible algorithm in class `precision` (fp32: FMA math; tf32: TF32 tensor
// cores allowed), checked and timed like a variant.
CudnnResult run_cudnn(CudnnFinder& cudnn, const LayerRun& run, Precision precision) {
  CudnnResult r;
  r.precision = precision;
  cudnn.prepare(run.shape, run.stream.get(), precision);
  DeviceBuffer ws;
  r.workspace_limit = allocate_workspace(ws, cudnn.largest_workspace());
  r.candidates = cudnn.find(run.buf.x.data(), run.buf.k.data(), run.buf.y.data(), ws.data(),
                            r.workspace_limit);
  const auto best = std::find_if(r.candidates.begin(), r.candidates.end(),
                                 [](const CudnnCandidate& c) { return c.eligible; });
  if (best == r.candidates.end()) {
    std::string seen;
    for (const CudnnCandidate& c : r.candidates) {
      seen += "\n  " + c.algorithm + ": " + c.status + ", math " + c.math;
    }
    throw CudaError("cuDNN found no " + std::string(precision_name(precision)) +
                    " forward algorithm for " + run.shape.to_string() + "; it reported:" + seen);
  }
  r.algo_id = best->algo_id;
  r.algorithm = best->algorithm;
  r.workspace_bytes = best->workspace_bytes;
  r.math = best->math;
  r.find_time_s = best->time_s;
  std::string unused;
  run.measure(
      [&] {
        cudnn.forward(r.algo_id, run.buf.y.data(), run.buf.x.data(), run.buf.k.data(), ws.data(),
                      r.workspace_bytes);
      },
      precision, r.time, r.check, unused);
  cudnn.prepare(run.shape, run.stream.get());  // back to fp32 math for the next caller
  return r;
}

// cuDNN of the fp16 class, as `convlab run` times it (CudnnConv(Precision::fp16)): x and k
// rounded to half on the device, the half convolution with float accumulation on tensor cores
// (the heuristics' first algorithm that runs), y converted back; the conversions are in the
// timed call, as they are in an fp16 variant's.
CudnnResult run_cudnn_fp16(const LayerRun& run) {
  CudnnResult r;
  r.precision = Precision::fp16;
  CudnnConv conv(Precision::fp16);
  std::string unused;
  run.measure(
      [&] {
        conv.forward(run.buf.y.data(), run.buf.x.data(), run.buf.k.data(), run.shape,
                     run.stream.get());
      },
      Precision::fp16, r.time, r.check, unused);
  r.algorithm = conv.algorithm();
  r.workspace_bytes = conv.workspace_bytes();
  r.math = "TENSOR_OP (half data, float accumulation)";
  return r;
}

// cuDNN in precision class `precision`: the one place that picks the library call by class.
// fp32 and tf32 run on the layer's float buffers (cudnnFind picks the algorithm); fp16 on half
// copies of them.
CudnnResult run_cudnn_of_class(CudnnFinder& cudnn, const LayerRun& run, Precision precision) {
  if (precision == Precision::fp16) return run_cudnn_fp16(run);
  return run_cudnn(cudnn, run, precision);
}

VariantResult run_variant(const BenchCandidate& v, const LayerRun& run) {
  VariantResult r;
  r.variant = v.name;
  const GpuLauncher fn = v.launcher;
  try {
    Workspace workspace;  // reserved before the timed runs
    workspace.reserve(fn.workspace_bytes(run.shape));
    const bool ok = run.measure(
        [&] {
          fn(run.buf.y.data(), run.buf.x.data(), run.buf.k.data(), run.shape, workspace.data(),
             run.stream.get());
        },
        v.precision, r.time, r.check, r.message);
    r.status = ok ? BenchStatus::ok : BenchStatus::wrong;
  } catch (const NotImplemented& e) {
    r.status = BenchStatus::not_implemented;
    r.message = e.what();
  } catch (const CudaError& e) {
    // A launch error leaves the device usable; a fault inside a kernel does not, and then
    // nothing after it can be measured.
    cudaGetLastError();
    if (const cudaError_t sticky = cudaDeviceSynchronize(); sticky != cudaSuccess) {
      throw CudaError("variant " + r.variant + " broke the GPU context on " +
                      run.shape.to_string() + " (" + cudaGetErrorString(sticky) + "): " + e.what() +
                      "\nRun it under compute-sanitizer to find the faulty access, or bench the "
                      "other variants one at a time with --variant NAME.");
    }
    r.status = BenchStatus::error;
    r.message = e.what();
  } catch (const Error& e) {
    r.status = BenchStatus::error;
    r.message = e.what();
  }
  return r;
}

}  // namespace

std::vector<BenchCandidate> bench_candidates(const BenchOptions& opt) {
  std::vector<const GpuVariant*> chosen;
  if (opt.variant == "all") {
    // A `host` variant has no kernel time on device data: its time is a Layer Time.
    for (const GpuVariant& v : gpu_variants()) {
      if (!find_variant(v.name).host()) chosen.push_back(&v);
    }
  } else {
    chosen.push_back(&find_gpu_variant(opt.variant));
    if (find_variant(opt.variant).host()) {
      throw Error("variant " + opt.variant +
                  " takes host memory and does its own copies: the bench times kernels on "
                  "device data. Its time is a Layer Time: convlab run final MODEL --variant " +
                  opt.variant);
    }
  }
  std::vector<BenchCandidate> out;
  for (const GpuVariant* v : chosen) {
    out.push_back({std::string(v->name), code_file(*v, opt.impl), v->launcher(opt.impl),
                   find_variant(v->name).precision});
  }
  return out;
}

BenchReport measure_bench(const NetDescription& net, const std::vector<ConvShape>& shapes,
                          const std::vector<BenchCandidate>& candidates, const BenchOptions& opt,
                          std::ostream& progress) {
  std::string why;
  if (!cuda_device_available(&why)) {
    throw Error("convlab bench needs a CUDA GPU: " + why);
  }
  const bool tty = &progress == &std::cerr && isatty(STDERR_FILENO) != 0;

  BenchReport report;
  report.net = net.name;
  report.net_file = net.file.string();
  report.batch = shapes.front().B;
  report.impl = std::string(impl_name(opt.impl));
  report.warmup = kBenchWarmup;
  report.runs = opt.runs;
  report.l2_flush = opt.flush_l2;
  report.seed = kBenchSeed;
  std::vector<Precision> used;
  for (const BenchCandidate& c : candidates) {
    report.variants.push_back({c.name, c.file, c.precision});
    used.push_back(c.precision);
  }
  const std::vector<Precision> classes = classes_in_use(used);
  if (tty) progress << "measuring the fp32 peak and the memory bandwidth..." << std::endl;
  report.machine = describe_machine();

  BenchStream stream;
  const L2Flusher flusher(opt.flush_l2);
  report.flush_bytes = flusher.bytes();
  CudnnFinder cudnn;
  for (std::size_t i = 0; i < shapes.size(); ++i) {
    const NetLayer& layer = net.layers[i];
    const ConvShape& s = shapes[i];
    if (tty) progress << "layer " << layer.name << " (" << s.to_string() << ")..." << std::endl;
    LayerResult result;
    result.name = layer.name;
    result.shape = s;

    LayerBuffers buf = allocate(layer, s);
    // Different data for every layer and tensor, the same on every run of the bench.
    fill_uniform(buf.x.data(), s.x_elements(), kBenchSeed * 1000 + 2 * i, stream.get());
    fill_uniform(buf.k.data(), s.k_elements(), kBenchSeed * 1000 + 2 * i + 1, stream.get());
    cudnn.prepare(s, stream.get());
    DeviceBuffer oracle_ws;
    const std::size_t oracle_bytes = cudnn.workspace_for(kOracleAlgorithm);
    if (oracle_bytes > 0) oracle_ws = DeviceBuffer(static_cast<std::int64_t>(oracle_bytes / 4 + 1));
    cudnn.forward(kOracleAlgorithm, buf.y_ref.data(), buf.x.data(), buf.k.data(), oracle_ws.data(),
                  oracle_bytes);
    const std::vector<float> ref = download(buf.y_ref, stream);
    oracle_ws = DeviceBuffer();

    const LayerRun run{s, buf, ref, stream, flusher, opt};
    for (Precision c : classes) {
      result.cudnn.push_back(run_cudnn_of_class(cudnn, run, c));
    }
    for (const BenchCandidate& c : candidates) result.variants.push_back(run_variant(c, run));
    report.layers.push_back(std::move(result));
  }
  return report;
}

}  // namespace convlab
