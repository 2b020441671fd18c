#include "reference/model/safetensors.hpp"

#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <limits>
#include <string>
#include <system_error>
#include <tuple>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "reference/core/error.hpp"

namespace convlab {

namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

/// Headers past this size are not model files; refusing them bounds what a hostile file costs.
constexpr std::uint64_t kMaxHeaderBytes = 100ull * 1000 * 1000;
/// Model headers are two levels deep; anything far deeper is hostile.
constexpr int kMaxJsonDepth = 32;
constexpr const char* kMetadataKey = "__metadata__";

[[noreturn]] void fail(const fs::path& path, const std::string& what) {
  throw Error("safetensors file " + path.string() + ": " + what +
              " (the file is damaged or not a safetensors file; re-create it with the trainer)");
}

std::uint64_t read_u64_le(const unsigned char* p) {
  std::uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

void write_u64_le(std::string& out, std::uint64_t v) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xffu));
}

// True and *out set when `v` is a non-negative JSON integer.
bool as_count(const json& v, std::uint64_t* out) {
  if (v.is_number_unsigned()) {
    *out = v.get<std::uint64_t>();
    return true;
  }
  if (v.is_number_integer() && v.get<std::int64_t>() >= 0) {
    *out = static_cast<std::uint64_t>(v.get<std::int64_t>());
    return true;
  }
  return false;
}

/// Whole file in one read, bounded by its size on disk.
std::vector<unsigned char> read_whole_file(const fs::path& path) {
  std::error_code ec;
  if (!fs::exists(path, ec)) {
    throw Error("safetensors file " + path.string() +
                ": file not found (check the path or model name)");
  }
  if (!fs::is_regular_file(path, ec)) {
    throw Error("safetensors file " + path.string() +
                ": not a regular file (give the path of a .safetensors file)");
  }
  const std::uintmax_t size = fs::file_size(path, ec);
  if (ec) fail(path, "cannot read its size: " + ec.message());
  if (size > kMaxHeaderBytes * 20)
    fail(path, "file is " + std::to_string(size) + " bytes, too large for a model");
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(path, "cannot open it for reading");
  std::vector<unsigned char> bytes(static_cast<std::size_t>(size));
  in.read(reinterpret_cast<char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  if (static_cast<std::uintmax_t>(in.gcount()) != size)
    fail(path, "read fewer bytes than its size");
  return bytes;
}

struct Entry {
  std::string name;
  Shape shape;
  std::uint64_t begin = 0;
  std::uint64_t end = 0;
};

Entry parse_entry(const fs::path& path, const std::string& name, const json& info) {
  const std::string where = "tensor '" + name + "'";
  if (!info.is_object()) fail(path, where + " is not a JSON object");
  for (const char* key : {"dtype", "shape", "data_offsets"}) {
    if (!info.contains(key)) fail(path, where + " has no \"" + key + "\"");
  }
  const json& dtype = info["dtype"];
  if (!dtype.is_string()) fail(path, where + ": \"dtype\" is not a string");
  if (dtype.get<std::string>() != "F32") {
    throw Error("safetensors file " + path.string() + ": " + where + " has dtype " +
                dtype.get<std::string>() +
                "; only F32 (float32) tensors are supported: save the weights as float32");
  }
  Entry e;
  e.name = name;
  const json& shape = info["shape"];
  if (!shape.is_array()) fail(path, where + ": \"shape\" is not an array");
  for (const json& d : shape) {
    std::uint64_t n = 0;
    if (!as_count(d, &n) ||
        n > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
      fail(path, where + ": \"shape\" holds " + d.dump() + ", not a non-negative integer");
    }
    e.shape.push_back(static_cast<std::int64_t>(n));
  }
  const json& offsets = info["data_offsets"];
  if (!offsets.is_array() || offsets.size() != 2 || !as_count(offsets[0], &e.begin) ||
      !as_count(offsets[1], &e.end)) {
    fail(path, where + ": \"data_offsets\" must be [begin, end] with non-negative integers");
  }
  if (e.end < e.begin) fail(path, where + ": data_offsets end before they begin");
  std::int64_t elements = 0;
  try {
    elements = shape_elements(e.shape);
  } catch (const Error&) {
    fail(path, where + ": shape " + shape_string(e.shape) + " is too large");
  }
  if (static_cast<std::uint64_t>(elements) > std::numeric_limits<std::uint64_t>::max() / 4) {
    fail(path, where + ": shape " + shape_string(e.shape) + " is too large");
  }
  if (e.end - e.begin != static_cast<std::uint64_t>(elements) * 4) {
    fail(path, where + ": shape " + shape_string(e.shape) + " needs " +
                   std::to_string(static_cast<std::uint64_t>(elements) * 4) +
                   " bytes but data_offsets [" + std::to_string(e.begin) + ", " +
                   std::to_string(e.end) + "] span " + std::to_string(e.end - e.begin));
  }
  return e;
}

}  // namespace

SafetensorsFile read_safetensors(const fs::path& path) {
  const std::vector<unsigned char> bytes = read_whole_file(path);
  if (bytes.size() < 8) fail(path, "shorter than the 8-byte header length");
  const std::uint64_t header_len = read_u64_le(bytes.data());
  if (header_len > kMaxHeaderBytes) {
    fail(path, "header length " + std::to_string(header_len) + " is absurd (limit " +
                   std::to_string(kMaxHeaderBytes) + ")");
  }
  if (header_len > bytes.size() - 8) {
    fail(path, "header length " + std::to_string(header_len) + " runs past the end of the " +
                   std::to_string(bytes.size()) + "-byte file (truncated?)");
  }
  const auto* header_begin = bytes.data() + 8;
  const auto* header_end = header_begin + header_len;

  // The callback bounds nesting so a hostile header cannot make later processing deep.
  const json::parser_callback_t limit_depth = [&path](int depth, json::parse_event_t, json&) {
    if (depth > kMaxJsonDepth) fail(path, "header JSON is nested too deeply");
    return true;
  };
  json header;
  try {
    header = json::parse(header_begin, header_end, limit_depth);
  } catch (const json::exception& e) {
    fail(path, std::string("header is not valid JSON: ") + e.what());
  }
  if (!header.is_object()) fail(path, "header JSON is not an object");

  SafetensorsFile file;
  std::vector<Entry> entries;
  for (const auto& [name, info] : header.items()) {
    if (name == kMetadataKey) {
      if (!info.is_object()) fail(path, "\"__metadata__\" is not a JSON object");
      for (const auto& [key, value] : info.items()) {
        if (!value.is_string()) {
          fail(path, "metadata value of \"" + key + "\" is not a string");
        }
        file.metadata.emplace(key, value.get<std::string>());
      }
      continue;
    }
    entries.push_back(parse_entry(path, name, info));
  }

  // Tensors must tile the byte buffer exactly: no overlap, no gap, nothing left over.
  const std::uint64_t buffer_size = bytes.size() - 8 - header_len;
  std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
    return std::tie(a.begin, a.end) < std::tie(b.begin, b.end);
  });
  std::uint64_t covered = 0;
  for (const Entry& e : entries) {
    if (e.end > buffer_size) {
      fail(path, "tensor '" + e.name + "' data_offsets end at " + std::to_string(e.end) +
                     ", past the " + std::to_string(buffer_size) + "-byte data buffer");
    }
    if (e.begin < covered) fail(path, "tensor '" + e.name + "' overlaps another tensor's bytes");
    if (e.begin > covered) {
      fail(path, "bytes " + std::to_string(covered) + ".." + std::to_string(e.begin) +
                     " of the data buffer belong to no tensor (gap before '" + e.name + "')");
    }
    covered = e.end;
  }
  if (covered != buffer_size) {
    fail(path, "the data buffer has " + std::to_string(buffer_size - covered) +
                   " bytes after the last tensor");
  }

  const unsigned char* data = header_end;
  for (Entry& e : entries) {
    std::vector<float> values(static_cast<std::size_t>((e.end - e.begin) / 4));
    const unsigned char* p = data + e.begin;
    for (float& v : values) {
      const std::uint32_t u = std::uint32_t{p[0]} | (std::uint32_t{p[1]} << 8) |
                              (std::uint32_t{p[2]} << 16) | (std::uint32_t{p[3]} << 24);
      v = std::bit_cast<float>(u);
      p += 4;
    }
    file.tensors.emplace(std::move(e.name), Tensor(std::move(e.shape), std::move(values)));
  }
  return file;
}

void write_safetensors(const fs::path& path, const SafetensorsFile& file) {
  json header = json::object();
  std::uint64_t offset = 0;
  for (const auto& [name, tensor] : file.tensors) {  // std::map: name order
    if (name == kMetadataKey) {
      throw Error("cannot write " + path.string() +
                  ": \"__metadata__\" is reserved, rename the tensor");
    }
    const std::uint64_t n = static_cast<std::uint64_t>(tensor.size()) * 4;
    header[name] = {
        {"dtype", "F32"}, {"shape", tensor.shape()}, {"data_offsets", {offset, offset + n}}};
    offset += n;
  }
  if (!file.metadata.empty()) header[kMetadataKey] = file.metadata;

  std::string text;
  try {
    text = header.dump();
  } catch (const json::exception& e) {
    throw Error("cannot write " + path.string() +
                ": a tensor name or metadata value is not valid UTF-8 (" + e.what() + ")");
  }
  text.append((8 - text.size() % 8) % 8, ' ');

  std::string out;
  out.reserve(8 + text.size() + offset);
  write_u64_le(out, text.size());
  out += text;
  for (const auto& [name, tensor] : file.tensors) {
    for (const float v : tensor.values()) {
      const auto u = std::bit_cast<std::uint32_t>(v);
      for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((u >> (8 * i)) & 0xffu));
    }
  }

  // Write beside the target and rename, so a reader never sees a half-written model.
  fs::path tmp = path;
  tmp += ".tmp";
  {
    std::ofstream os(tmp, std::ios::binary | std::ios::trunc);
    if (!os)
      throw Error("cannot write " + path.string() + ": cannot create " + tmp.string() +
                  " (check the directory exists and is writable)");
    os.write(out.data(), static_cast<std::streamsize>(out.size()));
    os.close();
    if (!os) {
      std::error_code ec;
      fs::remove(tmp, ec);
      throw Error("cannot write " + path.string() + ": writing failed (disk full?)");
    }
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec) {
    const std::string why = ec.message();
    fs::remove(tmp, ec);
    throw Error("cannot write " + path.string() + ": " + why);
  }
}

}  // namespace convlab
