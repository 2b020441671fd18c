/// @file
/// @brief The referee's side of the team's process: the team's convolution as a function the
/// framework's network runner can call, with every input, output and clock held here.
///
/// A call copies x and k into buffers shared with the team's process (a memfd on the host,
/// CUDA IPC buffers on the device), poisons y with NaN, starts the clock, asks for the call,
/// waits for "done", runs a GPU fence of its own (a read of y: work the team left queued is
/// then either finished or, preempted, visibly incomplete), stops the clock and copies y
/// back. The figure kept is that interval minus the median of the same round trip with an empty
/// request. With verification on, every call's y is compared with the library convolution
/// (CPU) or cuDNN (GPU) computed here on the same inputs.
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

#ifdef CONVLAB_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

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
  /// Says hello with `variant` ("cpu" for m2) and measures the empty round trip. `staged`: on
  /// the GPU, the team's process copies into exactly sized buffers of its own (compute-sanitizer
  /// runs); the calls are then not timed honestly and never verified. Throws Team* errors.
  /// `partner`: the socket of a trusted calibration partner (start_gpu_partner()), or -1. On the
  /// GPU the subtracted round trip is then measured with it: the same socket trip, a kernel in
  /// another process and the fence, so the GPU's switches between processes are not counted
  /// as the team's time, and the team's process cannot inflate what is subtracted.
  RemoteConv(int socket, const std::string& variant, bool staged = false, int partner = -1);
  ~RemoteConv();
  RemoteConv(const RemoteConv&) = delete;
  RemoteConv& operator=(const RemoteConv&) = delete;

  /// Whether the team's variant offers a fused conv + tanh + max-pool launcher.
  bool has_fused() const { return fused_; }
  /// The median empty round trip subtracted from every sample, in seconds.
  double handshake_s() const { return handshake_s_; }
  /// The median empty round trip with the team's process (nothing launched), in seconds.
  double team_handshake_s() const { return team_handshake_s_; }

  /// From now on, compare each call's output with the library convolution / cuDNN.
  void set_verify(bool on) { verify_ = on; }
  const Verification& verification() const { return verification_; }

  /// The team's CPU convolution (host pointers).
  void cpu(float* y, const float* x, const float* k, const ConvShape& shape);
#ifdef CONVLAB_HAVE_CUDA
  /// The team's GPU convolution (device pointers of this process; `stream` orders them).
  void gpu(float* y, const float* x, const float* k, const ConvShape& shape, cudaStream_t stream);
  /// The team's fused launcher, y = maxpool(tanh(conv(x, k))) with a `pool` x `pool` window.
  void gpu_fused(float* y, const float* x, const float* k, const ConvShape& shape, int pool,
                 cudaStream_t stream);
#endif
  /// Seconds of the last call by the referee's clock, less the empty round trip (never < 0).
  double last_seconds() const {
    return last_s_;
  }

  /// Tells the team's process to exit (also done by the destructor).
  void quit();

  struct Impl;  ///< the socket, the shared buffers, the fence

 private:
  std::unique_ptr<Impl> impl_;
  bool fused_ = false;
  bool verify_ = false;
  double handshake_s_ = 0.0;
  double team_handshake_s_ = 0.0;
  double last_s_ = 0.0;
  Verification verification_;
};

/// Forks the calibration partner: a child of the referee (trusted code, never the team's) that
/// answers each byte on the returned socket by running an empty kernel on the GPU in its own
/// process and writing a byte back. Call before this process touches CUDA (a process that has
/// cannot fork a CUDA user). -1 when it cannot fork.
int start_gpu_partner();

/// Compares `got` with `want` element-wise, |got - want| <= atol + rtol * |want| + extra (NaN
/// never passes): `extra` empty adds nothing, one value adds it to every element, `count`
/// values one each (rounding_allowance()). Updates `v` and returns whether every element passed.
bool verify_output(Verification& v, const float* got, const float* want, std::int64_t count,
                   const ConvShape& shape, bool fused, std::span<const double> extra = {});

/// "y[b][m][h][w]" of flat index `i` of an output of `shape` (pooled with `pool` when fused).
std::string output_coordinates(std::int64_t i, const ConvShape& shape, bool fused, int pool = 2);

}  // namespace convlab::grader
