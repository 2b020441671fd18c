// The GPU side of RemoteConv: device buffers shared with the team's process through CUDA IPC,
// the fence that stops the clock, repeated timed calls, verification against cuDNN.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <map>
#include <vector>

#include "grader/worker/fence.hpp"
#include "grader/worker/remote_conv_impl.hpp"
#include "grader/worker/repeat_checks.hpp"
#include "reference/conv/cudnn_conv.hpp"
#include "reference/conv/elementwise.hpp"
#include "reference/core/cuda_check.hpp"
#include "reference/core/device_buffer.hpp"

namespace convlab::grader {

struct DeviceSide {
  struct Shared {
    DeviceBuffer buffer;
    std::uint32_t id = 0;
  };
  Shared dx, dk, dy;
  DeviceBuffer snapshot;  // every call's y, copied in the fence's turn (the referee's own)
  DeviceBuffer own_x;     // the referee's copy of every call's x, laid out as in dx
  std::uint32_t next_id = 1;
  // The last time per call of each (shape, pool): how many calls a timed request repeats.
  std::map<std::array<int, 7>, double> call_s;
  cudaStream_t fence_stream = nullptr;
  cudaEvent_t after_fence = nullptr;

  ~DeviceSide() {
    if (after_fence != nullptr) cudaEventDestroy(after_fence);
    if (fence_stream != nullptr) cudaStreamDestroy(fence_stream);
  }
};

void DeviceSideDelete::operator()(DeviceSide* d) const {
  delete d;
}

void start_device(RemoteConv::Impl& impl) {
  impl.device.reset(new DeviceSide);
  CUDA_CHECK(cudaStreamCreateWithFlags(&impl.device->fence_stream, cudaStreamNonBlocking));
  CUDA_CHECK(cudaEventCreateWithFlags(&impl.device->after_fence, cudaEventDisableTiming));
}

namespace {

// A timed GPU request repeats the call on fresh inputs until it holds about this much GPU
// work: the request's round trip (the socket, the switch of the GPU between processes, the
// fence) is counted, never subtracted, so it must be small beside the work it is shared by.
constexpr double kRepeatTarget_s = 0.05;
constexpr int kMaxRepeats = 64;

// Makes `s` hold at least `count` floats, mapped in the team's process under a fresh id.
void ensure_device(RemoteConv::Impl& impl, DeviceSide::Shared& s, std::int64_t count) {
  if (s.buffer.size() >= count) return;
  s.buffer = DeviceBuffer(std::max<std::int64_t>(count, 2 * s.buffer.size()));
  s.id = impl.device->next_id++;
  wire::Request rq;
  rq.op = wire::Op::map_device;
  rq.buffer = s.id;
  rq.bytes = static_cast<std::uint64_t>(s.buffer.size()) * sizeof(float);
  cudaIpcMemHandle_t handle;
  CUDA_CHECK(cudaIpcGetMemHandle(&handle, s.buffer.data()));
  static_assert(sizeof handle == sizeof rq.ipc_handle);
  std::memcpy(rq.ipc_handle, &handle, sizeof handle);
  RemoteConv::Impl::check(impl.exchange(rq));
}

// What a call may differ from the float32 reference by beyond atol and rtol, per output:
// rounding_allowance() of the output's sum of |x||k| (cuDNN on |x| and |k|, kept in `sums`),
// the largest over its window for a pooled output (tanh and max-pool do not enlarge an error).
// rounding_allowance() is affine in that sum, so the device applies it.
DeviceAllowance class_allowance(Precision p, const float* x, const float* k, const ConvShape& s,
                                int pool, DeviceBuffer& sums, cudaStream_t stream) {
  std::vector<float> ax(static_cast<std::size_t>(s.x_elements()));
  std::vector<float> ak(static_cast<std::size_t>(s.k_elements()));
  CUDA_CHECK(cudaMemcpy(ax.data(), x, ax.size() * sizeof(float), cudaMemcpyDeviceToHost));
  CUDA_CHECK(cudaMemcpy(ak.data(), k, ak.size() * sizeof(float), cudaMemcpyDeviceToHost));
  const float max_x = to_magnitudes(ax), max_k = to_magnitudes(ak);
  DeviceBuffer dax(s.x_elements()), dak(s.k_elements());
  dax.upload(ax);
  dak.upload(ak);
  conv_forward_cudnn_direct(sums.data(), dax.data(), dak.data(), s, stream);
  CUDA_CHECK(cudaStreamSynchronize(stream));
  DeviceAllowance a;
  a.abs_sums = sums.data();
  a.intercept = rounding_allowance(p, s, 0.0, max_x, max_k);
  a.slope = rounding_allowance(p, s, 1.0, max_x, max_k) - a.intercept;
  a.pool = pool;
  a.height = s.H_out();
  a.width = s.W_out();
  return a;
}

// How many calls a timed request makes: enough for about kRepeatTarget_s of GPU work by the
// last measured time of one call (one when there is none), at most kMaxRepeats, and no more
// than half the free device memory holds (the shared inputs and outputs, the referee's copy of
// the inputs, the snapshot of the outputs).
int repeats(const RemoteConv::Impl& impl, const std::array<int, 7>& key, std::int64_t nx,
            std::int64_t ny) {
  const DeviceSide& d = *impl.device;
  const auto it = d.call_s.find(key);
  if (it == d.call_s.end()) return 1;
  const double per_call = std::max(it->second, 1e-6);
  int n = static_cast<int>(
      std::clamp(std::ceil(kRepeatTarget_s / per_call), 1.0, static_cast<double>(kMaxRepeats)));
  std::size_t free = 0, total = 0;
  CUDA_CHECK(cudaMemGetInfo(&free, &total));
  const double bytes = static_cast<double>(2 * nx + 2 * ny) * sizeof(float);
  n = std::min(n, std::max(1, static_cast<int>(static_cast<double>(free) / 2 / bytes)));
  return n;
}

// Adds a repeated call's device comparison to `v`, with the values of its first mismatch.
void record_comparison(Verification& v, const DeviceComparison& c, const float* got,
                       const float* want, const ConvShape& s, bool fused) {
  v.worst_error = std::max(v.worst_error, c.worst_error);
  const int call = v.calls++;
  if (c.mismatches == 0) return;
  ++v.failed;
  if (v.first) return;
  float g = 0.0f, w = 0.0f;
  CUDA_CHECK(cudaMemcpy(&g, got + c.first, sizeof g, cudaMemcpyDeviceToHost));
  CUDA_CHECK(cudaMemcpy(&w, want + c.first, sizeof w, cudaMemcpyDeviceToHost));
  v.first = VerifyFailure{call, s, fused, c.mismatches, c.first, g, w};
}

// Throws TeamWroteInput when `shared` (n floats, device) differs from the referee's `own`.
void check_device_inputs_kept(const float* shared, const float* own, std::int64_t n,
                              const char* name, cudaStream_t stream) {
  const DeviceComparison c = compare_on_device(shared, own, n, 0.0, 0.0, 0.0, stream);
  if (c.mismatches == 0) return;
  throw TeamWroteInput("your code wrote to its input " + std::string(name) + " (" +
                       std::to_string(c.mismatches) +
                       " values changed): the inputs are the referee's, and the convolution "
                       "must leave them as they were handed over");
}

struct GpuCall {
  bool fused = false;
  int pool = 0;
  std::int64_t ny = 0;  // outputs of one call
};

// compute-sanitizer runs: through host memory into the team's own exactly sized buffers; not
// timed honestly, never verified.
void staged_gpu_call(RemoteConv::Impl& impl, const GpuCall& g, wire::Request& rq, float* y,
                     const float* x, const float* k, const ConvShape& s, cudaStream_t stream,
                     double& last) {
  std::vector<float> hx(static_cast<std::size_t>(s.x_elements()));
  std::vector<float> hk(static_cast<std::size_t>(s.k_elements()));
  CUDA_CHECK(
      cudaMemcpyAsync(hx.data(), x, hx.size() * sizeof(float), cudaMemcpyDeviceToHost, stream));
  CUDA_CHECK(
      cudaMemcpyAsync(hk.data(), k, hk.size() * sizeof(float), cudaMemcpyDeviceToHost, stream));
  CUDA_CHECK(cudaStreamSynchronize(stream));
  impl.stage_host(rq, hx.data(), s.x_elements(), hk.data(), s.k_elements(), g.ny);
  rq.staged = 1;
  const auto t0 = Clock::now();
  const wire::Reply r = impl.exchange(rq);
  last = seconds(t0, Clock::now());
  RemoteConv::Impl::check(r);
  CUDA_CHECK(cudaMemcpyAsync(y, impl.at(rq.y.offset),
                             static_cast<std::size_t>(g.ny) * sizeof(float), cudaMemcpyHostToDevice,
                             stream));
  CUDA_CHECK(cudaStreamSynchronize(stream));
}

// One request of `repeat` calls. Call i reads x slot i of the shared buffer and writes y slot
// i; the referee keeps its own copy of every x slot (own_x) and of k (the caller's), from which
// the inputs are checked unmodified and every reference is computed. Returns the seconds of
// one call: the request's whole round trip, fence included, over `repeat`.
void gpu_call(RemoteConv::Impl& impl, const GpuCall& g, float* y, const float* x, const float* k,
              const ConvShape& s, cudaStream_t stream, double& last, bool verify, Verification& v) {
  DeviceSide& d = *impl.device;
  wire::Request rq;
  rq.op = g.fused ? wire::Op::conv_tanh_pool : wire::Op::conv;
  rq.pool = g.pool;
  set_shape(rq, s);
  if (impl.staged) {
    staged_gpu_call(impl, g, rq, y, x, k, s, stream, last);
    return;
  }
  // Timed passes (verified) repeat the call; the count and warm-up passes make one call, and
  // tell how long one takes.
  const std::array<int, 7> key{s.B, s.M, s.C, s.H, s.W, s.K, g.fused ? g.pool : 0};
  const int repeat = verify ? repeats(impl, key, s.x_elements(), g.ny) : 1;
  // Call i's tensors start i slots in: each slot holds one tensor, rounded up to kAlign bytes.
  const auto slot = [](std::int64_t floats) {
    return static_cast<std::int64_t>(align_up(floats * sizeof(float)) / sizeof(float));
  };
  const std::int64_t x_slot = slot(s.x_elements()), y_slot = slot(g.ny);
  ensure_device(impl, d.dx, x_slot * repeat);
  ensure_device(impl, d.dk, s.k_elements());
  ensure_device(impl, d.dy, y_slot * repeat);
  if (d.snapshot.size() < y_slot * repeat) d.snapshot = DeviceBuffer(y_slot * repeat);
  if (d.own_x.size() < x_slot * repeat) d.own_x = DeviceBuffer(x_slot * repeat);
  // The referee's inputs first, in its own memory (padding zeroed so the slots compare whole).
  float* own = d.own_x.data();
  CUDA_CHECK(cudaMemsetAsync(own, 0, x_slot * repeat * sizeof(float), stream));
  CUDA_CHECK(
      cudaMemcpyAsync(own, x, s.x_elements() * sizeof(float), cudaMemcpyDeviceToDevice, stream));
  const double noise = repeat_noise(s);
  for (int i = 1; i < repeat; ++i) {
    perturb_input(own + i * x_slot, x, s.x_elements(), impl.nonces(), static_cast<float>(noise),
                  stream);
  }
  // Then the team's copies.
  CUDA_CHECK(cudaMemcpyAsync(d.dx.buffer.data(), own, x_slot * repeat * sizeof(float),
                             cudaMemcpyDeviceToDevice, stream));
  CUDA_CHECK(cudaMemcpyAsync(d.dk.buffer.data(), k, s.k_elements() * sizeof(float),
                             cudaMemcpyDeviceToDevice, stream));
  CUDA_CHECK(cudaMemsetAsync(d.dy.buffer.data(), 0xff, y_slot * repeat * sizeof(float), stream));
  CUDA_CHECK(cudaStreamSynchronize(stream));
  rq.x = {d.dx.id, 0, 0};
  rq.k = {d.dk.id, 0, 0};
  rq.y = {d.dy.id, 0, 0};
  rq.repeat = static_cast<std::uint32_t>(repeat);
  rq.x_step = static_cast<std::uint64_t>(x_slot) * sizeof(float);
  rq.y_step = static_cast<std::uint64_t>(y_slot) * sizeof(float);
  const auto t0 = Clock::now();
  const wire::Reply r = impl.exchange(rq);
  // The clock stops at the fence; the snapshot of every call's y follows it in the same turn.
  const bool ok = r.status == wire::Status::ok;
  queue_fence_and_snapshot(d.snapshot.data(), d.dy.buffer.data(), ok ? y_slot * repeat : 0,
                           d.after_fence, d.fence_stream);
  CUDA_CHECK(cudaEventSynchronize(d.after_fence));
  const auto t1 = Clock::now();
  CUDA_CHECK(cudaStreamSynchronize(d.fence_stream));
  last = seconds(t0, t1) / repeat;
  RemoteConv::Impl::check(r);
  d.call_s[key] = last;
  check_device_inputs_kept(d.dx.buffer.data(), own, x_slot * repeat, "x", stream);
  check_device_inputs_kept(d.dk.buffer.data(), k, s.k_elements(), "k", stream);
  CUDA_CHECK(cudaMemcpyAsync(y, d.snapshot.data(), g.ny * sizeof(float), cudaMemcpyDeviceToDevice,
                             stream));
  CUDA_CHECK(cudaStreamSynchronize(stream));
  if (!verify) return;
  DeviceBuffer want(g.ny);
  const auto reference = [&](const float* in) {
    if (g.fused) {
      conv_tanh_maxpool_cudnn_direct(want.data(), in, k, s, PoolShape{g.pool, g.pool}, stream);
    } else {
      conv_forward_cudnn_direct(want.data(), in, k, s, stream);
    }
  };
  reference(x);
  DeviceBuffer sums(s.y_elements());
  const DeviceAllowance extra = class_allowance(impl.precision, x, k, s, g.pool, sums, stream);
  const DeviceComparison first =
      compare_with_allowance(y, want.data(), g.ny, kVerifyAtol, kVerifyRtol, extra, stream);
  record_comparison(v, first, y, want.data(), s, g.fused);
  // The repeated calls, from the referee's own copies of their inputs: those are at most
  // 1 + repeat_noise() times the first's, and so is the rounding allowance.
  const double extra_max = (1.0 + noise) * first.largest_allowance;
  for (int i = 1; i < repeat; ++i) {
    reference(own + i * x_slot);
    const float* out = d.snapshot.data() + i * y_slot;
    const DeviceComparison c =
        compare_on_device(out, want.data(), g.ny, kVerifyAtol, kVerifyRtol, extra_max, stream);
    record_comparison(v, c, out, want.data(), s, g.fused);
  }
}

}  // namespace

void RemoteConv::gpu(float* y, const float* x, const float* k, const ConvShape& s,
                     cudaStream_t stream) {
  gpu_call(*impl_, GpuCall{false, 0, s.y_elements()}, y, x, k, s, stream, last_s_, verify_,
           verification_);
}

void RemoteConv::gpu_fused(float* y, const float* x, const float* k, const ConvShape& s, int pool,
                           cudaStream_t stream) {
  if (!fused_) throw TeamNotImplemented("this variant has no fused launcher");
  gpu_call(*impl_, GpuCall{true, pool, PoolShape{pool, pool}.pooled_elements(s)}, y, x, k, s,
           stream, last_s_, verify_, verification_);
}

}  // namespace convlab::grader
