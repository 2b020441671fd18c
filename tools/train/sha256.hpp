/// @file
/// @brief SHA-256 (FIPS 180-4), to record which data a model was trained on.
#pragma once

#include <cstdint>
#include <span>
#include <string>

namespace convlab::tools {

/// Incremental SHA-256.
class Sha256 {
 public:
  Sha256();
  /// Adds bytes to the message.
  void update(std::span<const std::uint8_t> bytes);
  /// Finishes the message and returns the digest as 64 lowercase hex digits.
  std::string hex_digest();

 private:
  void block(const std::uint8_t* p);
  std::uint32_t h_[8];
  std::uint8_t buffer_[64];
  std::uint64_t length_ = 0;  ///< bytes seen
  std::size_t fill_ = 0;      ///< bytes waiting in buffer_
};

/// SHA-256 of `bytes` as 64 lowercase hex digits.
std::string sha256_hex(std::span<const std::uint8_t> bytes);

}  // namespace convlab::tools
