/// @file
/// @brief The wire between the trusted referee (`convlab-check`) and the team's process
/// (`convlab-team`): fixed-size messages on a SOCK_SEQPACKET socket, descriptors passed with
/// SCM_RIGHTS. Header-only and free of the framework, so the team's binary needs nothing else.
///
/// The referee owns every buffer, input, clock and verdict; the team's process only answers
/// "call your convolution on these buffers" with "done" (or why not). Nothing it sends is
/// believed except that it finished: the referee times from its own request to the reply (plus
/// a GPU fence of its own) and checks the output itself.
#pragma once

#include <poll.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

namespace convlab::grader::wire {

inline constexpr std::uint32_t kMagic = 0x434c5431;  // "CLT1"

/// What the referee asks.
enum class Op : std::uint32_t {
  hello = 1,           ///< which variant; the reply says whether it has a fused launcher
  map_host = 2,        ///< a memfd arena (SCM_RIGHTS) of `bytes`: host buffers (CPU, staged)
  map_device = 3,      ///< a CUDA IPC handle of one device buffer (`buffer` names it)
  conv = 4,            ///< y = conv(x, k)
  conv_tanh_pool = 5,  ///< y = maxpool(tanh(conv(x, k))), the fused launcher
  nop = 6,             ///< reply at once (a request that asks for nothing)
  quit = 7,            ///< exit 0
};

/// How the team's side answered.
enum class Status : std::uint32_t {
  ok = 0,
  not_implemented = 1,  ///< the stub's NotImplemented, with its message
  cuda_error = 2,       ///< a CUDA call or kernel of the team's code failed
  error = 3,            ///< the team's code threw
  bad_request = 4,      ///< the request made no sense to the harness (a referee bug)
  no_gpu = 5,           ///< the team's process cannot use the GPU
};

/// Where a tensor lies: in the host arena at `offset`, or in device buffer `buffer` at `offset`.
struct Ref {
  std::uint32_t buffer = 0;  ///< 0: the host arena; n >= 1: device buffer n (map_device)
  std::uint32_t pad = 0;
  std::uint64_t offset = 0;  ///< bytes
};

/// One request. Fixed size: the referee writes every field.
struct Request {
  std::uint32_t magic = kMagic;
  Op op = Op::nop;
  /// Drawn afresh for every request and echoed by its reply: a reply sent ahead of its request
  /// cannot carry it.
  std::uint64_t nonce = 0;
  std::int32_t shape[6] = {};  ///< B, M, C, H, W, K
  std::int32_t pool = 0;       ///< conv_tanh_pool: pool size and stride
  std::uint32_t buffer = 0;    ///< map_device: the number it gets (>= 1)
  std::uint64_t bytes = 0;     ///< map_host, map_device: size
  Ref y, x, k;                 ///< conv, conv_tanh_pool
  /// map_device: the exporting process's cudaIpcMemHandle_t (64 bytes).
  unsigned char ipc_handle[64] = {};
  /// hello: the variant ("cpu" for m2's CPU convolution), NUL-terminated.
  char variant[64] = {};
  /// conv on the GPU with host buffers: copy to exactly sized device buffers of its own, call,
  /// copy back (for compute-sanitizer, which then sees each tensor's true bounds).
  std::uint32_t staged = 0;
  /// conv, conv_tanh_pool on device buffers: make this many calls, one after the other, call i
  /// on x and y `x_step` and `y_step` bytes times i further on (k is shared), then answer once.
  std::uint32_t repeat = 1;
  std::uint64_t x_step = 0;
  std::uint64_t y_step = 0;
};

/// One reply. The message is the team's text: shown to the team, never believed.
struct Reply {
  std::uint32_t magic = kMagic;
  Status status = Status::ok;
  std::uint64_t nonce = 0;  ///< the request's
  std::uint32_t fused = 0;  ///< hello: 1 when the variant has a fused launcher
  std::uint32_t pad = 0;
  char message[2000] = {};
};

/// Copies `text` into a fixed field, always NUL-terminated.
template <std::size_t N>
void set_text(char (&field)[N], std::string_view text) {
  const std::size_t n = text.size() < N - 1 ? text.size() : N - 1;
  std::memcpy(field, text.data(), n);
  field[n] = '\0';
}

/// The text of a fixed field, up to its first NUL (never past its end).
template <std::size_t N>
std::string get_text(const char (&field)[N]) {
  return std::string(field, strnlen(field, N));
}

/// Returns once `socket` has something to read or has hung up, polling without sleeping for up
/// to `spin` first (then the receive that follows blocks). A thread asleep in recvmsg is woken
/// some time after its message lands, the later the longer it slept: up to a few hundred
/// microseconds on an idle machine, which a timed exchange would count as the convolution's.
inline void wait_readable(int socket, std::chrono::nanoseconds spin) {
  // clock_gettime, not a C++ clock: the team's binary has no clock of the framework's.
  const auto now_ns = [] {
    timespec t{};
    ::clock_gettime(CLOCK_MONOTONIC, &t);
    return std::int64_t{t.tv_sec} * 1'000'000'000 + t.tv_nsec;
  };
  const std::int64_t end = now_ns() + static_cast<std::int64_t>(spin.count());
  pollfd p{socket, POLLIN, 0};
  do {
    if (::poll(&p, 1, 0) != 0) return;
  } while (now_ns() < end);
}

/// Sends one message, and `fd` with it where fd >= 0. false on any error.
template <typename Message>
bool send_message(int socket, const Message& m, int fd = -1) {
  iovec iov{const_cast<Message*>(&m), sizeof m};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  if (fd >= 0) {
    msg.msg_control = control;
    msg.msg_controllen = sizeof control;
    cmsghdr* c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    std::memcpy(CMSG_DATA(c), &fd, sizeof fd);
  }
  for (;;) {
    const ssize_t n = ::sendmsg(socket, &msg, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    return n == static_cast<ssize_t>(sizeof m);
  }
}

/// Receives one whole message of exactly sizeof(Message) bytes with the right magic; a passed
/// descriptor lands in *fd (else -1). false on end of stream, a short or long message, or an
/// error.
template <typename Message>
bool receive_message(int socket, Message& m, int* fd = nullptr) {
  if (fd != nullptr) *fd = -1;
  iovec iov{&m, sizeof m};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  msg.msg_control = control;
  msg.msg_controllen = sizeof control;
  ssize_t n;
  do {
    n = ::recvmsg(socket, &msg, MSG_CMSG_CLOEXEC);
  } while (n < 0 && errno == EINTR);
  for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
      int got = -1;
      std::memcpy(&got, CMSG_DATA(c), sizeof got);
      if (fd != nullptr) {
        *fd = got;
      } else {
        ::close(got);
      }
    }
  }
  return n == static_cast<ssize_t>(sizeof m) && (msg.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) == 0 &&
         m.magic == kMagic;
}

}  // namespace convlab::grader::wire
