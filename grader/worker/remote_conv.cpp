#include "grader/worker/remote_conv.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <numeric>
#include <random>
#include <vector>

#include "grader/worker/team_protocol.hpp"
#include "reference/conv/elementwise.hpp"
#include "reference/conv/library_conv.hpp"
#include "reference/conv/precision.hpp"
#include "reference/conv/variant_table.hpp"

#ifdef CONVLAB_HAVE_CUDA
#include "grader/worker/fence.hpp"
#include "grader/worker/repeat_checks.hpp"
#include "reference/conv/cudnn_conv.hpp"
#include "reference/core/cuda_check.hpp"
#include "reference/core/device_buffer.hpp"
#endif

namespace convlab::grader {
namespace {

namespace wire = grader::wire;
using Clock = std::chrono::steady_clock;

constexpr std::uint64_t kAlign = 256;  // of every tensor in the shared buffers
// Host copies out of the shared arena go in blocks of this size, in a random order.
constexpr std::int64_t kCopyBlock = 16384;  // floats
// How long a GPU exchange polls for the reply before it sleeps (wire::wait_readable): calls
// longer than this lose a wake-up's fraction of a millisecond at most.
constexpr std::chrono::seconds kSpinForReply{1};
// A timed GPU request repeats the call on fresh inputs until it holds about this much GPU
// work: the request's round trip (the socket, the switch of the GPU between processes, the
// fence) is counted, never subtracted, so it must be small beside the work it is shared by.
constexpr double kRepeatTarget_s = 0.05;
constexpr int kMaxRepeats = 64;
std::uint64_t align_up(std::uint64_t n) {
  return (n + kAlign - 1) / kAlign * kAlign;
}

double seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

// Throws TeamWroteInput when the shared copy of an input no longer equals the referee's own.
void check_inputs_kept(const float* shared, const float* own, std::int64_t count,
                       const char* name) {
  if (std::memcmp(shared, own, static_cast<std::size_t>(count) * sizeof(float)) == 0) return;
  throw TeamWroteInput(std::string("your code wrote to its input ") + name +
                       ", which it must only read: the inputs are the referee's, and the "
                       "convolution must leave them as they were handed over");
}

void set_shape(wire::Request& rq, const ConvShape& s) {
  const int v[6] = {s.B, s.M, s.C, s.H, s.W, s.K};
  std::copy(v, v + 6, rq.shape);
}

}  // namespace

struct RemoteConv::Impl {
  int socket = -1;
  bool gpu = false;
  // The variant's class: a tf32 or fp16 call is verified within its class's bound as well.
  Precision precision = Precision::fp32;
  bool staged = false;
  std::mt19937_64 nonces{std::random_device{}()};
  std::mt19937_64 order{std::random_device{}()};

  // The host arena: a sealed memfd (the team's process cannot shrink it under us).
  int memfd = -1;
  void* arena = nullptr;
  std::uint64_t arena_bytes = 0;

#ifdef CONVLAB_HAVE_CUDA
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
#endif

  ~Impl() {
    if (arena != nullptr) ::munmap(arena, arena_bytes);
    if (memfd >= 0) ::close(memfd);
#ifdef CONVLAB_HAVE_CUDA
    if (after_fence != nullptr) cudaEventDestroy(after_fence);
    if (fence_stream != nullptr) cudaStreamDestroy(fence_stream);
#endif
  }

  // Sends `rq` and returns its reply. Anything the team's process sent before this request is
  // a protocol violation (a "done" sent ahead of time); so is a reply without the request's
  // nonce, a malformed message and the end of the socket. On the GPU the wait for the reply
  // polls: the clock stops when the reply lands, not when this thread wakes.
  wire::Reply exchange(wire::Request rq, int fd = -1) {
    pollfd p{socket, POLLIN, 0};
    if (::poll(&p, 1, 0) > 0) {
      char probe;
      const bool data =
          (p.revents & POLLIN) != 0 && ::recv(socket, &probe, 1, MSG_PEEK | MSG_DONTWAIT) > 0;
      throw TeamLost(data ? "the team's process wrote to the harness's socket out of turn"
                          : "the team's process ended or closed the harness's socket");
    }
    rq.nonce = nonces();
    if (!wire::send_message(socket, rq, fd)) {
      throw TeamLost("the team's process stopped listening (it ended or closed its socket)");
    }
    wire::Reply reply;
    if (gpu) wire::wait_readable(socket, kSpinForReply);
    if (!wire::receive_message(socket, reply)) {
      throw TeamLost("the team's process ended before it answered");
    }
    if (reply.nonce != rq.nonce) throw TeamLost("the team's process answered another request");
    return reply;
  }

  static void check(const wire::Reply& r) {
    const std::string text = wire::get_text(r.message);
    switch (r.status) {
      case wire::Status::ok:
        return;
      case wire::Status::not_implemented:
        throw TeamNotImplemented(text);
      case wire::Status::cuda_error:
        throw TeamCudaError(text);
      case wire::Status::error:
        throw TeamError(text);
      case wire::Status::no_gpu:
        throw Error("the team's process cannot use the GPU: " + text);
      case wire::Status::bad_request:
        throw Error("the harness refused a request: " + text);
    }
    throw TeamLost("the team's process answered with an unknown status");
  }

  void ensure_arena(std::uint64_t bytes) {
    if (bytes <= arena_bytes) return;
    bytes = std::max<std::uint64_t>(bytes, 2 * arena_bytes);
    if (arena != nullptr) ::munmap(arena, arena_bytes);
    if (memfd >= 0) ::close(memfd);
    arena = nullptr;
    arena_bytes = 0;
    memfd = ::memfd_create("convlab-shared", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (memfd < 0 || ::ftruncate(memfd, static_cast<off_t>(bytes)) != 0 ||
        ::fcntl(memfd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0) {
      throw Error("cannot create the shared buffers: " + std::string(std::strerror(errno)));
    }
    void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, memfd, 0);
    if (p == MAP_FAILED) throw Error("cannot map the shared buffers");
    arena = p;
    arena_bytes = bytes;
    wire::Request rq;
    rq.op = wire::Op::map_host;
    rq.bytes = bytes;
    check(exchange(rq, memfd));
  }

  float* at(std::uint64_t offset) {
    return reinterpret_cast<float*>(static_cast<char*>(arena) + offset);
  }

  // y = the arena's output, copied block by block in a random order: a team thread still
  // writing after its "done" is caught leaving NaN wherever the copy got first.
  void copy_out(float* dst, const float* src, std::int64_t count) {
    const std::int64_t blocks = (count + kCopyBlock - 1) / kCopyBlock;
    std::vector<std::int64_t> idx(static_cast<std::size_t>(blocks));
    std::iota(idx.begin(), idx.end(), 0);
    std::shuffle(idx.begin(), idx.end(), order);
    for (std::int64_t b : idx) {
      const std::int64_t first = b * kCopyBlock;
      const std::int64_t n = std::min(kCopyBlock, count - first);
      std::memcpy(dst + first, src + first, static_cast<std::size_t>(n) * sizeof(float));
    }
  }

  // Lays x, k and a NaN-poisoned y out in the arena; returns the request's refs.
  void stage_host(wire::Request& rq, const float* x, std::int64_t nx, const float* k,
                  std::int64_t nk, std::int64_t ny) {
    const std::uint64_t ox = 0;
    const std::uint64_t ok = align_up(static_cast<std::uint64_t>(nx) * sizeof(float));
    const std::uint64_t oy = ok + align_up(static_cast<std::uint64_t>(nk) * sizeof(float));
    ensure_arena(oy + align_up(static_cast<std::uint64_t>(ny) * sizeof(float)));
    std::memcpy(at(ox), x, static_cast<std::size_t>(nx) * sizeof(float));
    std::memcpy(at(ok), k, static_cast<std::size_t>(nk) * sizeof(float));
    std::memset(at(oy), 0xff, static_cast<std::size_t>(ny) * sizeof(float));
    rq.x = {0, 0, ox};
    rq.k = {0, 0, ok};
    rq.y = {0, 0, oy};
  }

#ifdef CONVLAB_HAVE_CUDA
  void ensure_device(Shared& s, std::int64_t count) {
    if (s.buffer.size() >= count) return;
    s.buffer = DeviceBuffer(std::max<std::int64_t>(count, 2 * s.buffer.size()));
    s.id = next_id++;
    wire::Request rq;
    rq.op = wire::Op::map_device;
    rq.buffer = s.id;
    rq.bytes = static_cast<std::uint64_t>(s.buffer.size()) * sizeof(float);
    cudaIpcMemHandle_t handle;
    CUDA_CHECK(cudaIpcGetMemHandle(&handle, s.buffer.data()));
    static_assert(sizeof handle == sizeof rq.ipc_handle);
    std::memcpy(rq.ipc_handle, &handle, sizeof handle);
    check(exchange(rq));
  }
#endif
};

RemoteConv::RemoteConv(int socket, const std::string& variant, bool staged)
    : impl_(std::make_unique<Impl>()) {
  impl_->socket = socket;
  const Variant& declared = find_variant(variant);
  impl_->gpu = declared.gpu();
  impl_->precision = declared.precision;
  impl_->staged = staged;
  wire::Request hello;
  hello.op = wire::Op::hello;
  wire::set_text(hello.variant, variant);
  const wire::Reply r = impl_->exchange(hello);
  Impl::check(r);
  fused_ = r.fused != 0;
#ifdef CONVLAB_HAVE_CUDA
  if (impl_->gpu) {
    CUDA_CHECK(cudaStreamCreateWithFlags(&impl_->fence_stream, cudaStreamNonBlocking));
    CUDA_CHECK(cudaEventCreateWithFlags(&impl_->after_fence, cudaEventDisableTiming));
  }
#endif
}

RemoteConv::~RemoteConv() {
  quit();
}

void RemoteConv::quit() {
  if (impl_->socket < 0) return;
  wire::Request rq;
  rq.op = wire::Op::quit;
  wire::send_message(impl_->socket, rq);
  impl_->socket = -1;
}

void RemoteConv::cpu(float* y, const float* x, const float* k, const ConvShape& s) {
  wire::Request rq;
  rq.op = wire::Op::conv;
  set_shape(rq, s);
  impl_->stage_host(rq, x, s.x_elements(), k, s.k_elements(), s.y_elements());
  const auto t0 = Clock::now();
  const wire::Reply r = impl_->exchange(rq);
  const auto t1 = Clock::now();
  Impl::check(r);
  impl_->copy_out(y, impl_->at(rq.y.offset), s.y_elements());
  check_inputs_kept(impl_->at(rq.x.offset), x, s.x_elements(), "x");
  check_inputs_kept(impl_->at(rq.k.offset), k, s.k_elements(), "k");
  last_s_ = seconds(t0, t1);
  if (verify_) {
    std::vector<float> want(static_cast<std::size_t>(s.y_elements()));
    conv_forward_reference(want.data(), x, k, s);
    // Every sum of |x||k| is at most C*K*K max|x| max|k|: one allowance for all, no second
    // convolution on the CPU.
    const float max_x = max_magnitude({x, static_cast<std::size_t>(s.x_elements())});
    const float max_k = max_magnitude({k, static_cast<std::size_t>(s.k_elements())});
    const double terms = static_cast<double>(s.C) * s.K * s.K;
    const double extra[] = {
        rounding_allowance(impl_->precision, s, terms * max_x * max_k, max_x, max_k)};
    verify_output(verification_, y, want.data(), s.y_elements(), s, false, extra);
  }
}

#ifdef CONVLAB_HAVE_CUDA
namespace {

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
  const auto it = impl.call_s.find(key);
  if (it == impl.call_s.end()) return 1;
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
                             static_cast<std::size_t>(g.ny) * sizeof(float),
                             cudaMemcpyHostToDevice, stream));
  CUDA_CHECK(cudaStreamSynchronize(stream));
}

// One request of `repeat` calls. Call i reads x slot i of the shared buffer and writes y slot
// i; the referee keeps its own copy of every x slot (own_x) and of k (the caller's), from which
// the inputs are checked unmodified and every reference is computed. Returns the seconds of
// one call: the request's whole round trip, fence included, over `repeat`.
void gpu_call(RemoteConv::Impl& impl, const GpuCall& g, float* y, const float* x, const float* k,
              const ConvShape& s, cudaStream_t stream, double& last, bool verify,
              Verification& v) {
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
  impl.ensure_device(impl.dx, x_slot * repeat);
  impl.ensure_device(impl.dk, s.k_elements());
  impl.ensure_device(impl.dy, y_slot * repeat);
  if (impl.snapshot.size() < y_slot * repeat) impl.snapshot = DeviceBuffer(y_slot * repeat);
  if (impl.own_x.size() < x_slot * repeat) impl.own_x = DeviceBuffer(x_slot * repeat);
  // The referee's inputs first, in its own memory (padding zeroed so the slots compare whole).
  float* own = impl.own_x.data();
  CUDA_CHECK(cudaMemsetAsync(own, 0, x_slot * repeat * sizeof(float), stream));
  CUDA_CHECK(
      cudaMemcpyAsync(own, x, s.x_elements() * sizeof(float), cudaMemcpyDeviceToDevice, stream));
  const double noise = repeat_noise(s);
  for (int i = 1; i < repeat; ++i) {
    perturb_input(own + i * x_slot, x, s.x_elements(), impl.nonces(), static_cast<float>(noise),
                  stream);
  }
  // Then the team's copies.
  CUDA_CHECK(cudaMemcpyAsync(impl.dx.buffer.data(), own, x_slot * repeat * sizeof(float),
                             cudaMemcpyDeviceToDevice, stream));
  CUDA_CHECK(cudaMemcpyAsync(impl.dk.buffer.data(), k, s.k_elements() * sizeof(float),
                             cudaMemcpyDeviceToDevice, stream));
  CUDA_CHECK(cudaMemsetAsync(impl.dy.buffer.data(), 0xff, y_slot * repeat * sizeof(float), stream));
  CUDA_CHECK(cudaStreamSynchronize(stream));
  rq.x = {impl.dx.id, 0, 0};
  rq.k = {impl.dk.id, 0, 0};
  rq.y = {impl.dy.id, 0, 0};
  rq.repeat = static_cast<std::uint32_t>(repeat);
  rq.x_step = static_cast<std::uint64_t>(x_slot) * sizeof(float);
  rq.y_step = static_cast<std::uint64_t>(y_slot) * sizeof(float);
  const auto t0 = Clock::now();
  const wire::Reply r = impl.exchange(rq);
  // The clock stops at the fence; the snapshot of every call's y follows it in the same turn.
  const bool ok = r.status == wire::Status::ok;
  queue_fence_and_snapshot(impl.snapshot.data(), impl.dy.buffer.data(), ok ? y_slot * repeat : 0,
                           impl.after_fence, impl.fence_stream);
  CUDA_CHECK(cudaEventSynchronize(impl.after_fence));
  const auto t1 = Clock::now();
  CUDA_CHECK(cudaStreamSynchronize(impl.fence_stream));
  last = seconds(t0, t1) / repeat;
  RemoteConv::Impl::check(r);
  impl.call_s[key] = last;
  check_device_inputs_kept(impl.dx.buffer.data(), own, x_slot * repeat, "x", stream);
  check_device_inputs_kept(impl.dk.buffer.data(), k, s.k_elements(), "k", stream);
  CUDA_CHECK(cudaMemcpyAsync(y, impl.snapshot.data(), g.ny * sizeof(float),
                             cudaMemcpyDeviceToDevice, stream));
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
    const float* out = impl.snapshot.data() + i * y_slot;
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
#endif

bool verify_output(Verification& v, const float* got, const float* want, std::int64_t count,
                   const ConvShape& shape, bool fused, std::span<const double> extra) {
  if (extra.size() > 1 && static_cast<std::int64_t>(extra.size()) != count) {
    throw Error("verify_output: " + std::to_string(extra.size()) + " allowances for " +
                std::to_string(count) + " outputs");
  }
  std::int64_t mismatches = 0, worst_i = -1;
  double worst = -1.0;
  for (std::int64_t i = 0; i < count; ++i) {
    const double g = got[i], w = want[i];
    const double err = std::isfinite(g) ? std::abs(g - w) : std::numeric_limits<double>::infinity();
    const double more = extra.empty() ? 0.0 : extra[extra.size() == 1 ? 0 : i];
    const double allowed = kVerifyAtol + kVerifyRtol * std::abs(w) + more;
    if (!(err <= allowed)) {
      ++mismatches;
      if (err > worst) {
        worst = err;
        worst_i = i;
      }
    }
    if (std::isfinite(err)) v.worst_error = std::max(v.worst_error, err);
  }
  const int call = v.calls++;
  if (mismatches == 0) return true;
  ++v.failed;
  if (!v.first) {
    v.first = VerifyFailure{call, shape, fused, mismatches, worst_i, got[worst_i], want[worst_i]};
  }
  return false;
}

std::string output_coordinates(std::int64_t i, const ConvShape& s, bool fused, int pool) {
  const PoolShape p{pool, pool};
  const std::int64_t w = fused ? p.out(s.W_out()) : s.W_out();
  const std::int64_t h = fused ? p.out(s.H_out()) : s.H_out();
  const std::int64_t m = s.M;
  return "y[" + std::to_string(i / (w * h * m)) + "][" + std::to_string(i / (w * h) % m) + "][" +
         std::to_string(i / w % h) + "][" + std::to_string(i % w) + "]";
}

}  // namespace convlab::grader
