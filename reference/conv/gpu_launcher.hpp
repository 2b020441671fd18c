/// @file
/// @brief A GPU variant's launcher, plain or with a workspace, called one way; and the device
/// memory the framework hands a `workspace` variant.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <functional>
#include <span>

#include "reference/conv/student_api.hpp"

namespace convlab {

/// A GPU convolution as the runners call it: device pointers, one stream.
using GpuConvCall =
    std::function<void(float* y, const float* x, const float* k, const ConvShape&, cudaStream_t)>;

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

  /// Whether it holds a function.
  constexpr explicit operator bool() const {
    return plain_ != nullptr || with_workspace_ != nullptr;
  }
  /// Whether the variant takes a workspace.
  constexpr bool takes_workspace() const { return with_workspace_ != nullptr; }
  /// The bytes the variant needs for `shape` (0 for a plain launcher). Host code, untimed.
  std::size_t workspace_bytes(const ConvShape& shape) const;
  /// Enqueues the convolution on `stream`; `workspace` holds workspace_bytes(shape) bytes.
  void operator()(float* y, const float* x, const float* k, const ConvShape& shape, void* workspace,
                  cudaStream_t stream) const;

 private:
  GpuConvFn plain_ = nullptr;
  GpuConvWorkspaceFn with_workspace_ = nullptr;
  GpuWorkspaceFn bytes_ = nullptr;
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
