#include "grader/worker/remote_conv.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
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
// Empty round trips measured at the start; their median is subtracted from every sample.
constexpr int kHandshakes = 31;
// Host copies out of the shared arena go in blocks of this size, in a random order.
constexpr std::int64_t kCopyBlock = 16384;  // floats
// How long a GPU exchange polls for the reply before it sleeps (wire::wait_readable): calls
// longer than this lose a wake-up's fraction of a millisecond at most.
constexpr std::chrono::seconds kSpinForReply{1};
// A timed GPU request repeats the call on fresh inputs until it holds about this much GPU
// work, so that the cost of switching the GPU between processes, which the subtracted round
// trip matches only roughly, is shared by several calls (docs/grader.md, "Op Time").
constexpr double kRepeatTarget_s = 0.02;
constexpr int kMaxRepeats = 16;
std::uint64_t align_up(std::uint64_t n) {
  return (n + kAlign - 1) / kAlign * kAlign;
}

double seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
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

RemoteConv::RemoteConv(int socket, const std::string& variant, bool staged, int partner)
    : impl_(std::make_unique<Impl>()) {
  impl_->socket = socket;
  const Variant& declared = find_variant(variant);
  impl_->gpu = declared.gpu();
  impl_->precision = parse_precision(declared.precision);
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
  // The empty round trip, fence included: what every sample carries besides the call.
  const auto median = [](std::vector<double> v) {
    std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2), v.end());
    return v[v.size() / 2];
  };
  std::vector<double> trips;
  for (int i = 0; i < kHandshakes; ++i) {
    wire::Request nop;
    nop.op = wire::Op::nop;
    const auto t0 = Clock::now();
    Impl::check(impl_->exchange(nop));
#ifdef CONVLAB_HAVE_CUDA
    if (impl_->gpu) {
      queue_fence_and_snapshot(nullptr, nullptr, 0, impl_->after_fence, impl_->fence_stream);
      CUDA_CHECK(cudaEventSynchronize(impl_->after_fence));
    }
#endif
    trips.push_back(seconds(t0, Clock::now()));
  }
  team_handshake_s_ = handshake_s_ = median(trips);
#ifdef CONVLAB_HAVE_CUDA
  // With the partner: a kernel in a process of its own between the two trips, as in a call.
  if (impl_->gpu && partner >= 0) {
    std::vector<double> calls;
    for (int i = 0; i < kHandshakes; ++i) {
      const auto t0 = Clock::now();
      char byte = 'k';
      if (::write(partner, &byte, 1) != 1 || ::read(partner, &byte, 1) != 1) break;
      queue_fence_and_snapshot(nullptr, nullptr, 0, impl_->after_fence, impl_->fence_stream);
      CUDA_CHECK(cudaEventSynchronize(impl_->after_fence));
      calls.push_back(seconds(t0, Clock::now()));
    }
    if (calls.size() == kHandshakes) handshake_s_ = median(calls);
  }
#else
  (void)partner;
#endif
}

int start_gpu_partner() {
#ifdef CONVLAB_HAVE_CUDA
  int ends[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, ends) != 0) return -1;
  const pid_t pid = ::fork();
  if (pid < 0) {
    ::close(ends[0]);
    ::close(ends[1]);
    return -1;
  }
  if (pid == 0) {
    // Nothing of the referee's: not its result channel, not the team's socket.
    for (int fd = 3; fd < 1024; ++fd) {
      if (fd != ends[1]) ::close(fd);
    }
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    cudaStream_t stream = nullptr;
    char byte = 0;
    // Polls as the team's server does, so that the two round trips wake alike.
    for (;;) {
      wire::wait_readable(ends[1], kSpinForReply);
      if (::read(ends[1], &byte, 1) != 1) break;
      if (stream == nullptr && cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) != 0)
        _exit(1);
      try {
        queue_empty_kernel(stream);
      } catch (const Error&) {
        _exit(1);
      }
      if (cudaStreamSynchronize(stream) != cudaSuccess || ::write(ends[1], &byte, 1) != 1) _exit(1);
    }
    _exit(0);
  }
  ::close(ends[1]);
  return ends[0];
#else
  return -1;
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
  last_s_ = std::max(0.0, seconds(t0, t1) - handshake_s_);
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
// rounding_allowance() of each output's sum of |x||k| (cuDNN on |x| and |k|), the largest
// over its window for a pooled output (tanh and max-pool do not enlarge an error).
std::vector<double> class_allowance(Precision p, const float* x, const float* k, const ConvShape& s,
                                    int pool, cudaStream_t stream) {
  std::vector<float> ax(static_cast<std::size_t>(s.x_elements()));
  std::vector<float> ak(static_cast<std::size_t>(s.k_elements()));
  CUDA_CHECK(cudaMemcpy(ax.data(), x, ax.size() * sizeof(float), cudaMemcpyDeviceToHost));
  CUDA_CHECK(cudaMemcpy(ak.data(), k, ak.size() * sizeof(float), cudaMemcpyDeviceToHost));
  const float max_x = to_magnitudes(ax), max_k = to_magnitudes(ak);
  DeviceBuffer dax(s.x_elements()), dak(s.k_elements()), sums(s.y_elements());
  dax.upload(ax);
  dak.upload(ak);
  conv_forward_cudnn_direct(sums.data(), dax.data(), dak.data(), s, stream);
  CUDA_CHECK(cudaStreamSynchronize(stream));
  const std::vector<float> abs_sum = sums.download();
  std::vector<double> allowed(abs_sum.size());
  for (std::size_t i = 0; i < abs_sum.size(); ++i) {
    allowed[i] = rounding_allowance(p, s, abs_sum[i], max_x, max_k);
  }
  if (pool == 0) return allowed;
  return pooled_allowance(allowed, s, PoolShape{pool, pool});
}

// How many calls a timed request makes: enough for about kRepeatTarget_s of GPU work by the
// last measured time of one call (one when there is none), at most kMaxRepeats, and no more
// than a quarter of the free device memory holds (inputs, outputs, their snapshot).
int repeats(const RemoteConv::Impl& impl, const std::array<int, 7>& key, std::int64_t nx,
            std::int64_t ny) {
  const auto it = impl.call_s.find(key);
  if (it == impl.call_s.end()) return 1;
  const double per_call = std::max(it->second, 1e-6);
  int n = static_cast<int>(
      std::clamp(std::ceil(kRepeatTarget_s / per_call), 1.0, static_cast<double>(kMaxRepeats)));
  std::size_t free = 0, total = 0;
  CUDA_CHECK(cudaMemGetInfo(&free, &total));
  const double bytes = static_cast<double>(nx + 2 * ny) * sizeof(float);
  n = std::min(n, std::max(1, static_cast<int>(static_cast<double>(free) / 4 / bytes)));
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

void gpu_call(RemoteConv::Impl& impl, bool fused, int pool, float* y, const float* x,
              const float* k, const ConvShape& s, cudaStream_t stream, double handshake,
              double& last, bool verify, Verification& v) {
  const std::int64_t ny = fused ? PoolShape{pool, pool}.pooled_elements(s) : s.y_elements();
  wire::Request rq;
  rq.op = fused ? wire::Op::conv_tanh_pool : wire::Op::conv;
  rq.pool = pool;
  set_shape(rq, s);
  if (impl.staged) {
    // compute-sanitizer runs: through host memory into the team's own exactly sized buffers.
    std::vector<float> hx(static_cast<std::size_t>(s.x_elements()));
    std::vector<float> hk(static_cast<std::size_t>(s.k_elements()));
    CUDA_CHECK(
        cudaMemcpyAsync(hx.data(), x, hx.size() * sizeof(float), cudaMemcpyDeviceToHost, stream));
    CUDA_CHECK(
        cudaMemcpyAsync(hk.data(), k, hk.size() * sizeof(float), cudaMemcpyDeviceToHost, stream));
    CUDA_CHECK(cudaStreamSynchronize(stream));
    impl.stage_host(rq, hx.data(), s.x_elements(), hk.data(), s.k_elements(), ny);
    rq.staged = 1;
    const auto t0 = Clock::now();
    const wire::Reply r = impl.exchange(rq);
    last = std::max(0.0, seconds(t0, Clock::now()) - handshake);
    RemoteConv::Impl::check(r);
    CUDA_CHECK(cudaMemcpyAsync(y, impl.at(rq.y.offset),
                               static_cast<std::size_t>(ny) * sizeof(float), cudaMemcpyHostToDevice,
                               stream));
    CUDA_CHECK(cudaStreamSynchronize(stream));
    return;
  }
  // Timed passes (verified) repeat the call; the count and warm-up passes make one call, and
  // tell how long one takes.
  const std::array<int, 7> key{s.B, s.M, s.C, s.H, s.W, s.K, fused ? pool : 0};
  const int repeat = verify ? repeats(impl, key, s.x_elements(), ny) : 1;
  // Call i's tensors start i slots in: each slot holds one tensor, rounded up to kAlign bytes.
  const auto slot = [](std::int64_t floats) {
    return static_cast<std::int64_t>(align_up(floats * sizeof(float)) / sizeof(float));
  };
  const std::int64_t x_slot = slot(s.x_elements()), y_slot = slot(ny);
  impl.ensure_device(impl.dx, x_slot * repeat);
  impl.ensure_device(impl.dk, s.k_elements());
  impl.ensure_device(impl.dy, y_slot * repeat);
  if (impl.snapshot.size() < y_slot * repeat) impl.snapshot = DeviceBuffer(y_slot * repeat);
  float* dx = impl.dx.buffer.data();
  CUDA_CHECK(
      cudaMemcpyAsync(dx, x, s.x_elements() * sizeof(float), cudaMemcpyDeviceToDevice, stream));
  const double noise = repeat_noise(s);
  for (int i = 1; i < repeat; ++i) {
    perturb_input(dx + i * x_slot, x, s.x_elements(), impl.nonces(), static_cast<float>(noise),
                  stream);
  }
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
  last = std::max(0.0, seconds(t0, t1) - handshake) / repeat;
  RemoteConv::Impl::check(r);
  impl.call_s[key] = last;
  CUDA_CHECK(cudaMemcpyAsync(y, impl.snapshot.data(), ny * sizeof(float), cudaMemcpyDeviceToDevice,
                             stream));
  CUDA_CHECK(cudaStreamSynchronize(stream));
  if (!verify) return;
  DeviceBuffer want(ny);
  const auto reference = [&](const float* in) {
    if (fused) {
      conv_tanh_maxpool_cudnn_direct(want.data(), in, k, s, PoolShape{pool, pool}, stream);
    } else {
      conv_forward_cudnn_direct(want.data(), in, k, s, stream);
    }
  };
  reference(x);
  CUDA_CHECK(cudaStreamSynchronize(stream));
  std::vector<float> got(static_cast<std::size_t>(ny));
  CUDA_CHECK(cudaMemcpy(got.data(), y, got.size() * sizeof(float), cudaMemcpyDeviceToHost));
  const std::vector<float> ref = want.download();
  const std::vector<double> extra = class_allowance(impl.precision, x, k, s, pool, stream);
  verify_output(v, got.data(), ref.data(), ny, s, fused, extra);
  // The repeated calls, on the device: their inputs are at most 1 + repeat_noise() times the
  // first's, and so is the rounding allowance.
  const double extra_max = (1.0 + noise) * *std::max_element(extra.begin(), extra.end());
  for (int i = 1; i < repeat; ++i) {
    reference(dx + i * x_slot);
    const float* out = impl.snapshot.data() + i * y_slot;
    const DeviceComparison c =
        compare_on_device(out, want.data(), ny, kVerifyAtol, kVerifyRtol, extra_max, stream);
    record_comparison(v, c, out, want.data(), s, fused);
  }
}

}  // namespace

void RemoteConv::gpu(float* y, const float* x, const float* k, const ConvShape& s,
                     cudaStream_t stream) {
  gpu_call(*impl_, false, 0, y, x, k, s, stream, handshake_s_, last_s_, verify_, verification_);
}

void RemoteConv::gpu_fused(float* y, const float* x, const float* k, const ConvShape& s, int pool,
                           cudaStream_t stream) {
  if (!fused_) throw TeamNotImplemented("this variant has no fused launcher");
  gpu_call(*impl_, true, pool, y, x, k, s, stream, handshake_s_, last_s_, verify_, verification_);
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
