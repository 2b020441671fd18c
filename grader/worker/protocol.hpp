/// @file
/// @brief What the grader and the check harness (`convlab-check`) share: the result document's
/// schema, base64 for binary arrays, the `--shape` syntax and the generator of the element-wise
/// inputs. Header-only, so the harness needs no library beyond the framework's.
///
/// The harness writes one JSON document to the file descriptor in `$CONVLAB_RESULT_FD` when it
/// ends, never to stdout (a team's code may print anything there). Every document has
/// `"schema": "convlab-check/1"`, `"task"` and `"status"` (ok, not_implemented, cuda_error,
/// no_gpu, error; anything but ok carries `"message"`). Arrays of floats travel as base64 of
/// their little-endian float32 bytes.
#pragma once

#include <array>
#include <bit>
#include <charconv>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "reference/conv/conv_shape.hpp"
#include "reference/conv/elementwise.hpp"

namespace convlab::grader {

/// The `schema` field of every result document the harness writes.
inline constexpr std::string_view kCheckSchema = "convlab-check/1";

/// Name of the environment variable that holds the result channel's file descriptor.
inline constexpr const char* kResultFdEnv = "CONVLAB_RESULT_FD";
/// Name of the variable that holds the descriptor on which the grader writes one byte once
/// every process of the team's run has ended (the referee times its reference only then).
inline constexpr const char* kTeamGoneFdEnv = "CONVLAB_TEAM_GONE_FD";

static_assert(std::endian::native == std::endian::little,
              "the result channel carries little-endian float32 arrays");

/// Standard base64 (RFC 4648, with padding) of `size` bytes at `data`.
inline std::string base64_encode(const void* data, std::size_t size) {
  static constexpr char kDigits[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  const auto* p = static_cast<const unsigned char*>(data);
  std::string out;
  out.reserve((size + 2) / 3 * 4);
  std::size_t i = 0;
  for (; i + 3 <= size; i += 3) {
    const std::uint32_t v = (std::uint32_t{p[i]} << 16) | (std::uint32_t{p[i + 1]} << 8) | p[i + 2];
    out += kDigits[v >> 18];
    out += kDigits[(v >> 12) & 63];
    out += kDigits[(v >> 6) & 63];
    out += kDigits[v & 63];
  }
  if (i < size) {
    std::uint32_t v = std::uint32_t{p[i]} << 16;
    if (i + 1 < size) v |= std::uint32_t{p[i + 1]} << 8;
    out += kDigits[v >> 18];
    out += kDigits[(v >> 12) & 63];
    out += i + 1 < size ? kDigits[(v >> 6) & 63] : '=';
    out += '=';
  }
  return out;
}

/// Decodes standard base64 with padding; nullopt on any character, length or padding error.
inline std::optional<std::vector<unsigned char>> base64_decode(std::string_view text) {
  if (text.size() % 4 != 0) return std::nullopt;
  const auto digit = [](char c) -> int {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+') return 62;
    if (c == '/') return 63;
    return -1;
  };
  std::vector<unsigned char> out;
  out.reserve(text.size() / 4 * 3);
  for (std::size_t i = 0; i < text.size(); i += 4) {
    const bool last = i + 4 == text.size();
    const int pad = last ? (text[i + 3] == '=') + (text[i + 2] == '=') : 0;
    if (pad == 1 && text[i + 2] == '=') return std::nullopt;  // "x=y=" is not padding
    std::uint32_t v = 0;
    for (int j = 0; j < 4; ++j) {
      const int d = j >= 4 - pad ? 0 : digit(text[i + static_cast<std::size_t>(j)]);
      if (d < 0) return std::nullopt;
      v = (v << 6) | static_cast<std::uint32_t>(d);
    }
    out.push_back(static_cast<unsigned char>(v >> 16));
    if (pad < 2) out.push_back(static_cast<unsigned char>((v >> 8) & 255));
    if (pad < 1) out.push_back(static_cast<unsigned char>(v & 255));
  }
  return out;
}

/// base64 of a float32 array.
inline std::string encode_floats(const std::vector<float>& values) {
  return base64_encode(values.data(), values.size() * sizeof(float));
}

/// The float32 array a base64 text holds; nullopt when the text is not base64 or its length is
/// not a whole number of floats.
inline std::optional<std::vector<float>> decode_floats(std::string_view text) {
  auto bytes = base64_decode(text);
  if (!bytes || bytes->size() % sizeof(float) != 0) return std::nullopt;
  std::vector<float> values(bytes->size() / sizeof(float));
  std::memcpy(values.data(), bytes->data(), bytes->size());
  return values;
}

/// "B,M,C,H,W,K", the `--shape` argument of the element-wise task.
inline std::string shape_argument(const ConvShape& s) {
  return std::to_string(s.B) + "," + std::to_string(s.M) + "," + std::to_string(s.C) + "," +
         std::to_string(s.H) + "," + std::to_string(s.W) + "," + std::to_string(s.K);
}

/// Parses "B,M,C,H,W,K" (six positive integers); nullopt otherwise. The caller validates the
/// shape itself (ConvShape::validate()).
inline std::optional<ConvShape> parse_shape_argument(std::string_view text) {
  std::array<int, 6> v{};
  std::size_t pos = 0;
  for (std::size_t i = 0; i < v.size(); ++i) {
    const std::size_t end = i + 1 < v.size() ? text.find(',', pos) : text.size();
    if (end == std::string_view::npos || end == pos) return std::nullopt;
    const auto [ptr, ec] = std::from_chars(text.data() + pos, text.data() + end, v[i]);
    if (ec != std::errc() || ptr != text.data() + end || v[i] < 1) return std::nullopt;
    pos = end + 1;
  }
  return ConvShape{v[0], v[1], v[2], v[3], v[4], v[5]};
}

// The element-wise inputs come from the framework's generator, shared with `convlab check`.
using convlab::elementwise_values;
using convlab::ElementwiseTensor;

}  // namespace convlab::grader
