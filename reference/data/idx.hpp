/// @file
/// @brief Reading and writing gzipped IDX files, the format of (Fashion-)MNIST.
#pragma once

#include <cstdint>
#include <filesystem>
#include <vector>

namespace convlab::data {

/// An IDX array of unsigned bytes (type code 0x08): its dimensions and its values, row-major.
struct IdxArray {
  /// Dimensions, outermost first.
  std::vector<std::int64_t> dims;
  /// All values, row-major.
  std::vector<std::uint8_t> values;
};

/// Reads a gzip-compressed IDX file of unsigned bytes.
/// Throws convlab::Error naming the file when it is missing or unreadable, not gzip, corrupt
/// or truncated, has a wrong magic number or type code, or holds fewer or more bytes than
/// its header announces.
IdxArray read_idx_gz(const std::filesystem::path& path);

/// Writes `array` as a gzip-compressed IDX file (used by the synthetic data generator and tests).
void write_idx_gz(const std::filesystem::path& path, const IdxArray& array);

}  // namespace convlab::data
