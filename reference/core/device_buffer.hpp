/// @file
/// @brief An owning device allocation of floats.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace convlab {

/// A cudaMalloc'ed array of floats, freed on destruction. Move-only.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  /// Allocates `count` floats on the current device (uninitialised); throws CudaError on failure.
  explicit DeviceBuffer(std::int64_t count);
  ~DeviceBuffer();
  /// Takes over the allocation of `other`, which becomes empty.
  DeviceBuffer(DeviceBuffer&& other) noexcept;
  /// Frees this allocation and takes over the one of `other`, which becomes empty.
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  /// Device pointer to the first float (nullptr when empty).
  float* data() const { return data_; }
  /// Number of floats.
  std::int64_t size() const { return count_; }
  /// Copies host values in (count must match). Complete on return, for work on any stream.
  void upload(std::span<const float> host);
  /// Copies the contents out to a new host vector. Synchronise the stream that wrote the
  /// buffer first: a non-blocking stream is not ordered with this copy.
  std::vector<float> download() const;
  /// Sets every byte to `byte` (0xff gives NaN floats: a poison that unwritten outputs keep).
  /// Complete on return, for work on any stream.
  void fill_bytes(int byte);

 private:
  float* data_ = nullptr;
  std::int64_t count_ = 0;
};

}  // namespace convlab
