/// @file
/// @brief Reading and writing the safetensors format (float32 tensors plus string metadata).
///
/// Layout: an 8-byte little-endian header length, a JSON header mapping each tensor name to
/// {dtype, shape, data_offsets} plus an optional "__metadata__" object of strings, then the
/// raw little-endian tensor bytes.
#pragma once

#include <filesystem>
#include <map>
#include <string>

#include "reference/core/tensor.hpp"

namespace convlab {

/// The contents of one safetensors file. Only dtype F32 is supported.
struct SafetensorsFile {
  /// Tensors by name.
  std::map<std::string, Tensor> tensors;
  /// The "__metadata__" entries (string to string).
  std::map<std::string, std::string> metadata;
};

/// Reads a safetensors file. Throws Error naming the file on: missing file, header length
/// past the end, JSON that does not parse, a dtype other than F32, offsets that overlap, leave
/// gaps, run past the end or disagree with the shape.
SafetensorsFile read_safetensors(const std::filesystem::path& path);

/// Writes `file`, tensors in name order, header padded with spaces to a multiple of 8 bytes.
void write_safetensors(const std::filesystem::path& path, const SafetensorsFile& file);

}  // namespace convlab
