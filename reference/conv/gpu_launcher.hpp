/// @file
/// @brief A GPU variant's launcher, plain or with a workspace, called one way; and the device
/// memory the framework hands a `workspace` variant.
#pragma once

#include <cuda_runtime_api.h>

#include <concepts>
#include <cstddef>
#include <functional>
#include <span>
#include <utility>

#include "reference/conv/student_api.hpp"

namespace convlab {

/// A GPU convolution as the runners call it: device pointers, one stream. For a variant
/// declared `host` it also holds the variant's own host-memory entry point, which the network
/// runner times as the layer (Layer Time); its device-pointer call stages through host memory.
struct GpuConvCall {
  /// The device-pointer signature every caller uses.
  using Device =
      std::function<void(float* y, const float* x, const float* k, const ConvShape&, cudaStream_t)>;
  Device device;                 ///< the call on device pointers
  GpuConvHostFn host = nullptr;  ///< a `host` variant's entry point, else nullptr

  GpuConvCall() = default;
  /// The empty call, as std::function has it.
  GpuConvCall(std::nullptr_t) {}  // NOLINT(google-explicit-constructor)
  /// Any callable of the device signature (implicit, as std::function is).
  template <typename F>
    requires std::invocable<F&, float*, const float*, const float*, const ConvShape&,
                            cudaStream_t>
  GpuConvCall(F f) : device(std::move(f)) {}  // NOLINT(google-explicit-constructor)

  /// Runs the device-pointer call.
  void operator()(float* y, const float* x, const float* k, const ConvShape& s,
                  cudaStream_t stream) const {
    device(y, x, k, s, stream);
  }
  /// Whether it holds a call.
  explicit operator bool() const { return static_cast<bool>(device); }
  /// Whether it is empty.
  friend bool operator==(const GpuConvCall& c, std::nullptr_t) { return !c.device; }
};

/// One GPU variant's launcher, whichever interface it declares (variants.def, `interface`).
/// A plain launcher ignores the workspace; a workspace launcher gets the buffer the caller
/// reserved for workspace_bytes(shape).
class GpuLauncher {
 public:
  constexpr GpuLauncher() = default;
  /// A plain launcher (GpuConvFn); implicit, so every plain function is a launcher.
  constexpr GpuLauncher(GpuConvFn plain) : plain_(plain) {}  // NOLINT(google-explicit-constructor)
  /// A workspace launcher and its size function.
  constexpr GpuLauncher(GpuConvWorkspaceFn launch, GpuWorkspaceFn bytes)
      : with_workspace_(launch), bytes_(bytes) {}
  /// A `host` variant's entry point (host memory in and out).
  static constexpr GpuLauncher on_host(GpuConvHostFn fn) {
    GpuLauncher l;
    l.host_ = fn;
    return l;
  }

  /// Whether it holds a function.
  constexpr explicit operator bool() const {
    return plain_ != nullptr || with_workspace_ != nullptr || host_ != nullptr;
  }
  /// Whether the variant takes a workspace.
  constexpr bool takes_workspace() const { return with_workspace_ != nullptr; }
  /// A `host` variant's entry point, or nullptr.
  constexpr GpuConvHostFn host() const { return host_; }
  /// The bytes the variant needs for `shape` (0 for a plain launcher). Host code, untimed.
  std::size_t workspace_bytes(const ConvShape& shape) const;
  /// Enqueues the convolution on `stream`; `workspace` holds workspace_bytes(shape) bytes. A
  /// `host` variant is called on page-locked copies of x and k, and y is copied back: this
  /// call then waits for the stream and is not a measure of the variant's speed.
  void operator()(float* y, const float* x, const float* k, const ConvShape& shape, void* workspace,
                  cudaStream_t stream) const;

 private:
  GpuConvFn plain_ = nullptr;
  GpuConvWorkspaceFn with_workspace_ = nullptr;
  GpuWorkspaceFn bytes_ = nullptr;
  GpuConvHostFn host_ = nullptr;
};

/// Page-locked host memory of `count` floats (cudaMallocHost), freed with the object.
class PinnedBuffer {
 public:
  /// Allocates `count` floats (at least one); throws CudaError when the host is out of it.
  explicit PinnedBuffer(std::int64_t count);
  /// Frees the memory.
  ~PinnedBuffer();
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;
  /// The memory.
  float* data() const { return data_; }
  /// Its length in floats.
  std::int64_t size() const { return count_; }
  /// Copies size() floats from device memory `src` into it, on `stream`, and waits.
  void download(const float* src, cudaStream_t stream = nullptr);
  /// Copies its size() floats to device memory `dst`, on `stream`, and waits.
  void upload(float* dst, cudaStream_t stream = nullptr) const;

 private:
  float* data_ = nullptr;
  std::int64_t count_ = 0;
};

/// Device memory for a variant's workspace: grows on reserve(), which callers make before a
/// timed call, never inside one. Move-only.
class Workspace {
 public:
  Workspace() = default;
  ~Workspace();
  /// Takes `other`'s buffer, leaving it empty.
  Workspace(Workspace&& other) noexcept;
  /// Frees this buffer and takes `other`'s, leaving it empty.
  Workspace& operator=(Workspace&& other) noexcept;
  Workspace(const Workspace&) = delete;
  Workspace& operator=(const Workspace&) = delete;

  /// Makes the buffer at least `bytes` long (a new cudaMalloc, after a device synchronisation,
  /// when it is shorter) and returns it; nullptr while nothing was ever needed.
  void* reserve(std::size_t bytes);
  /// The buffer (nullptr when empty).
  void* data() const { return data_; }
  /// Its length in bytes.
  std::size_t bytes() const { return bytes_; }

 private:
  void* data_ = nullptr;
  std::size_t bytes_ = 0;
};

/// `launcher` as a GpuConvCall: its workspace is reserved here for every shape of `shapes`
/// (the conv layers a run will call it on), so no allocation falls inside a timed call; a call
/// on a shape that needs more still works (the workspace grows, untimed only by accident).
GpuConvCall bind_workspace(GpuLauncher launcher, std::span<const ConvShape> shapes);

}  // namespace convlab
