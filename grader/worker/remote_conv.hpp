/// @file
/// @brief The referee's side of the team's process: the team's convolution as a function the
/// framework's network runner can call, with every input, output and clock held here.
///
/// A call copies x and k into buffers shared with the team's process (a memfd on the host,
/// CUDA IPC buffers on the device), poisons y with NaN, starts the clock, asks for the call,
/// waits for "done", runs a GPU fence of its own (a read of y: work the team left queued is
/// then either finished or, preempted, visibly incomplete), stops the clock and copies y
/// back. The figure kept is that whole interval: nothing is subtracted, so nothing the team's
/// process does can make it smaller. A timed GPU request repeats the call on fresh inputs so
/// that the round trip's cost is shared by many calls. Every input handed over is the copy of
/// one the referee keeps in memory of its own: after each call the shared inputs are compared
/// with those copies (a team that writes its inputs fails), and with verification on, every
/// call's y is compared with the library convolution (CPU) or cuDNN (GPU) computed from them.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "grader/worker/verify_rule.hpp"
#include "reference/conv/conv_shape.hpp"
#include "reference/conv/precision.hpp"
#include "reference/core/error.hpp"

// The stream type of the GPU calls (cudaStream_t is CUstream_st*), so that this header needs
// no CUDA: remote_conv_gpu.cpp defines those calls, and a build without CUDA has them throw.
struct CUstream_st;

namespace convlab::grader {

/// The team's code said NotImplemented (a stub). A NotImplemented, so the runners' fallbacks
/// (an unimplemented fused launcher) apply.
class TeamNotImplemented : public NotImplemented {
 public:
  using NotImplemented::NotImplemented;
};
/// A CUDA call or kernel of the team's code failed.
class TeamCudaError : public Error {
 public:
  using Error::Error;
};
/// The team's code threw.
class TeamError : public Error {
 public:
  using Error::Error;
};
/// The team's code wrote to an input it was handed (x or k): inputs are read-only.
class TeamWroteInput : public Error {
 public:
  using Error::Error;
};
/// The team's process stopped answering, answered out of turn or with a malformed message.
class TeamLost : public Error {
 public:
  using Error::Error;
};

/// The first wrong output of a verified call.
struct VerifyFailure {
  int call = 0;        ///< which verified call (0-based)
  ConvShape shape;     ///< its sizes
  bool fused = false;  ///< a fused conv + tanh + max-pool call
  std::int64_t mismatches = 0;
  std::int64_t index = 0;  ///< of the worst element
  float got = 0.0f;
  float want = 0.0f;
};

/// Verification of calls against the library (CPU) or cuDNN (GPU) on the same inputs.
struct Verification {
  int calls = 0;   ///< calls verified
  int failed = 0;  ///< calls with at least one output outside the tolerance
  double worst_error = 0.0;
  std::optional<VerifyFailure> first;  ///< the first failing call
};

/// One connection to the team's process (the socket the grader handed both sides).
class RemoteConv {
 public:
  /// Says hello with `variant` ("cpu" for m2). `staged`: on the GPU, the team's process copies
  /// into exactly sized buffers of its own (compute-sanitizer runs); the calls are then not
  /// timed honestly and never verified. Throws Team* errors.
  RemoteConv(int socket, const std::string& variant, bool staged = false);
  ~RemoteConv();
  RemoteConv(const RemoteConv&) = delete;
  RemoteConv& operator=(const RemoteConv&) = delete;

  /// Whether the team's variant offers a fused conv + tanh + max-pool launcher.
  bool has_fused() const { return fused_; }
  /// From now on, compare each call's output with the library convolution / cuDNN.
  void set_verify(bool on) { verify_ = on; }
  const Verification& verification() const { return verification_; }

  /// The team's CPU convolution (host pointers).
  void cpu(float* y, const float* x, const float* k, const ConvShape& shape);
  /// The team's GPU convolution (device pointers of this process; `stream` orders them).
  void gpu(float* y, const float* x, const float* k, const ConvShape& shape, CUstream_st* stream);
  /// The team's fused launcher, y = maxpool(tanh(conv(x, k))) with a `pool` x `pool` window.
  void gpu_fused(float* y, const float* x, const float* k, const ConvShape& shape, int pool,
                 CUstream_st* stream);
  /// Seconds of the last call by the referee's clock: its request's whole round trip, divided
  /// by the calls the request made.
  double last_seconds() const { return last_s_; }

  /// Tells the team's process to exit (also done by the destructor).
  void quit();

  struct Impl;  ///< the socket, the shared buffers, the fence

 private:
  std::unique_ptr<Impl> impl_;
  bool fused_ = false;
  bool verify_ = false;
  double last_s_ = 0.0;
  Verification verification_;
};

/// Compares `got` with `want` element-wise, |got - want| <= atol + rtol * |want| + extra (NaN
/// never passes): `extra` empty adds nothing, one value adds it to every element, `count`
/// values one each (rounding_allowance()). Updates `v` and returns whether every element passed.
bool verify_output(Verification& v, const float* got, const float* want, std::int64_t count,
                   const ConvShape& shape, bool fused, std::span<const double> extra = {});

/// "y[b][m][h][w]" of flat index `i` of an output of `shape` (pooled with `pool` when fused).
std::string output_coordinates(std::int64_t i, const ConvShape& shape, bool fused, int pool = 2);

}  // namespace convlab::grader
