// The referee's side of a connection to the team's process, shared by remote_conv.cpp (the
// host side, every build) and the file of the build's platform: remote_conv_gpu.cpp (CUDA IPC
// buffers, the fence) or remote_conv_cpu_only.cpp (a build without CUDA).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <random>

#include "grader/worker/remote_conv.hpp"
#include "grader/worker/team_protocol.hpp"
#include "reference/conv/precision.hpp"

namespace convlab::grader {

namespace wire = grader::wire;
using Clock = std::chrono::steady_clock;

/// Every tensor in the shared buffers starts at a multiple of this many bytes.
inline constexpr std::uint64_t kAlign = 256;

/// `n` rounded up to a multiple of kAlign.
inline std::uint64_t align_up(std::uint64_t n) {
  return (n + kAlign - 1) / kAlign * kAlign;
}

/// Seconds from `a` to `b`.
inline double seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

/// Writes the sizes of `s` into a request.
void set_shape(wire::Request& rq, const ConvShape& s);

/// The device side of a connection: buffers shared with the team's process, the fence. Defined
/// by the platform's file.
struct DeviceSide;
/// Deletes a DeviceSide (where its type is complete).
struct DeviceSideDelete {
  /// Frees `d`.
  void operator()(DeviceSide* d) const;
};

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

  std::unique_ptr<DeviceSide, DeviceSideDelete> device;  // a GPU variant's

  ~Impl();

  // Sends `rq` and returns its reply. Anything the team's process sent before this request is
  // a protocol violation (a "done" sent ahead of time); so is a reply without the request's
  // nonce, a malformed message and the end of the socket. On the GPU the wait for the reply
  // polls: the clock stops when the reply lands, not when this thread wakes.
  wire::Reply exchange(wire::Request rq, int fd = -1);
  // Throws the Team* error or Error that a reply's status stands for.
  static void check(const wire::Reply& r);
  void ensure_arena(std::uint64_t bytes);
  float* at(std::uint64_t offset) {
    return reinterpret_cast<float*>(static_cast<char*>(arena) + offset);
  }
  // y = the arena's output, copied block by block in a random order: a team thread still
  // writing after its "done" is caught leaving NaN wherever the copy got first.
  void copy_out(float* dst, const float* src, std::int64_t count);
  // Lays x, k and a NaN-poisoned y out in the arena; returns the request's refs.
  void stage_host(wire::Request& rq, const float* x, std::int64_t nx, const float* k,
                  std::int64_t nk, std::int64_t ny);
};

/// Sets up the device side of a GPU variant's connection (the platform's file).
void start_device(RemoteConv::Impl& impl);

}  // namespace convlab::grader
