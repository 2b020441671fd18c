#include "grader/worker/remote_conv.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <vector>

#include "grader/worker/remote_conv_impl.hpp"
#include "grader/worker/team_protocol.hpp"
#include "reference/conv/elementwise.hpp"
#include "reference/conv/library_conv.hpp"
#include "reference/conv/precision.hpp"
#include "reference/conv/variant_table.hpp"

namespace convlab::grader {
namespace {

// Host copies out of the shared arena go in blocks of this size, in a random order.
constexpr std::int64_t kCopyBlock = 16384;  // floats
// How long a GPU exchange polls for the reply before it sleeps (wire::wait_readable): calls
// longer than this lose a wake-up's fraction of a millisecond at most.
constexpr std::chrono::seconds kSpinForReply{1};

// Throws TeamWroteInput when the shared copy of an input no longer equals the referee's own.
void check_inputs_kept(const float* shared, const float* own, std::int64_t count,
                       const char* name) {
  if (std::memcmp(shared, own, static_cast<std::size_t>(count) * sizeof(float)) == 0) return;
  throw TeamWroteInput(std::string("your code wrote to its input ") + name +
                       ", which it must only read: the inputs are the referee's, and the "
                       "convolution must leave them as they were handed over");
}

}  // namespace

void set_shape(wire::Request& rq, const ConvShape& s) {
  const int v[6] = {s.B, s.M, s.C, s.H, s.W, s.K};
  std::copy(v, v + 6, rq.shape);
}

RemoteConv::Impl::~Impl() {
  if (arena != nullptr) ::munmap(arena, arena_bytes);
  if (memfd >= 0) ::close(memfd);
}

wire::Reply RemoteConv::Impl::exchange(wire::Request rq, int fd) {
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

void RemoteConv::Impl::check(const wire::Reply& r) {
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

void RemoteConv::Impl::ensure_arena(std::uint64_t bytes) {
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

void RemoteConv::Impl::copy_out(float* dst, const float* src, std::int64_t count) {
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

void RemoteConv::Impl::stage_host(wire::Request& rq, const float* x, std::int64_t nx,
                                  const float* k, std::int64_t nk, std::int64_t ny) {
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
  if (impl_->gpu) start_device(*impl_);
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
