// The safetensors reader and writer: exact round trips, the byte layout of the published
// format, and refusal of every kind of damaged or hostile file.
#include <doctest/doctest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <fstream>
#include <iterator>
#include <limits>
#include <string>

#include "reference/core/error.hpp"
#include "reference/model/safetensors.hpp"
#include "tests/support/test_support.hpp"

namespace test_safetensors {

using convlab::test::contains;
using convlab::test::read_all;
namespace {

namespace fs = std::filesystem;
using convlab::Error;
using convlab::SafetensorsFile;
using convlab::Tensor;

std::string le64(std::uint64_t v) {
  std::string s;
  for (int i = 0; i < 8; ++i) s.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
  return s;
}

void write_bytes(const fs::path& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

/// A file with the given header text (length prefix computed) and data buffer.
fs::path hostile(const convlab::test::TempDir& dir, const std::string& header,
                 const std::string& data) {
  const fs::path p = dir.path() / "bad.safetensors";
  write_bytes(p, le64(header.size()) + header + data);
  return p;
}

/// The reader's message for `header` + `data`, or "" when it does not throw.
std::string error_for(const std::string& header, const std::string& data) {
  const convlab::test::TempDir dir;
  try {
    convlab::read_safetensors(hostile(dir, header, data));
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

const std::string k8(8, '\0');  // 8 zero bytes: data for a [2] tensor

}  // namespace

TEST_CASE("safetensors: round trip keeps every bit, metadata included") {
  const convlab::test::TempDir dir;
  SafetensorsFile in;
  const float nan_payload = std::bit_cast<float>(0x7fc12345u);
  in.tensors.emplace("z.last",
                     Tensor({2, 3}, {0.0f, -0.0f, 1e-45f, std::numeric_limits<float>::infinity(),
                                     nan_payload, -3.25f}));
  in.tensors.emplace("a.first", Tensor({4}, {1.0f, 2.0f, 3.0f, 4.0f}));
  in.tensors.emplace("empty", Tensor({0, 5}));
  in.tensors.emplace("scalar", Tensor({}, {7.5f}));
  in.metadata["convlab.network"] = R"({"name": "x"})";
  in.metadata["note"] = "unicode \xc3\xa9 and \"quotes\"\n";
  const fs::path p = dir.path() / "m.safetensors";
  convlab::write_safetensors(p, in);

  const SafetensorsFile out = convlab::read_safetensors(p);
  CHECK(out.metadata == in.metadata);
  REQUIRE(out.tensors.size() == in.tensors.size());
  for (const auto& [name, t] : in.tensors) {
    INFO(name);
    REQUIRE(out.tensors.count(name) == 1);
    const Tensor& u = out.tensors.at(name);
    CHECK(u.shape() == t.shape());
    REQUIRE(u.size() == t.size());
    for (std::int64_t i = 0; i < t.size(); ++i) {
      CHECK(std::bit_cast<std::uint32_t>(u.data()[i]) == std::bit_cast<std::uint32_t>(t.data()[i]));
    }
  }

  // Writing what was read gives the same bytes: the writer is deterministic.
  const fs::path p2 = dir.path() / "m2.safetensors";
  convlab::write_safetensors(p2, out);
  CHECK(read_all(p) == read_all(p2));
  // Header padded to a multiple of 8, and no temporary file left behind.
  const std::string bytes = read_all(p);
  std::uint64_t n = 0;
  for (int i = 7; i >= 0; --i)
    n = (n << 8) | static_cast<unsigned char>(bytes[static_cast<std::size_t>(i)]);
  CHECK(n % 8 == 0);
  CHECK(bytes[8 + n - 1] != '\0');
  CHECK_FALSE(fs::exists(dir.path() / "m.safetensors.tmp"));
}

TEST_CASE("safetensors: byte layout matches the published format") {
  const convlab::test::TempDir dir;
  // Built by hand from the specification: u64 LE header length, JSON, then LE float32 data.
  const std::string header =
      R"({"__metadata__":{"k":"v"},"a":{"data_offsets":[0,8],"dtype":"F32","shape":[2]},)"
      R"("b":{"data_offsets":[8,8],"dtype":"F32","shape":[0,3]}})"
      "  ";  // 134 bytes of JSON padded to 136
  REQUIRE(header.size() == 136);
  const std::string data = std::string("\x00\x00\x80\x3f\x00\x00\x20\xc0", 8);  // 1.0f, -2.5f
  const std::string expected = le64(136) + header + data;

  SUBCASE("the reader understands a hand-built file") {
    const fs::path p = dir.path() / "hand.safetensors";
    write_bytes(p, expected);
    const SafetensorsFile f = convlab::read_safetensors(p);
    REQUIRE(f.tensors.count("a") == 1);
    CHECK(f.tensors.at("a").shape() == convlab::Shape{2});
    CHECK(f.tensors.at("a").data()[0] == 1.0f);
    CHECK(f.tensors.at("a").data()[1] == -2.5f);
    CHECK(f.tensors.at("b").shape() == convlab::Shape{0, 3});
    CHECK(f.metadata.at("k") == "v");
  }
  SUBCASE("the writer produces exactly those bytes") {
    SafetensorsFile f;
    f.tensors.emplace("b", Tensor({0, 3}));
    f.tensors.emplace("a", Tensor({2}, {1.0f, -2.5f}));
    f.metadata["k"] = "v";
    const fs::path p = dir.path() / "written.safetensors";
    convlab::write_safetensors(p, f);
    CHECK(read_all(p) == expected);
  }
  SUBCASE("another writer's spacing and key order are accepted") {
    const std::string h =
        R"({ "a" : { "shape" : [2], "dtype" : "F32", "data_offsets" : [0, 8] } })";
    const fs::path p = dir.path() / "other.safetensors";
    write_bytes(p, le64(h.size()) + h + data);
    CHECK(convlab::read_safetensors(p).tensors.at("a").data()[1] == -2.5f);
  }
}

TEST_CASE("safetensors: damaged and hostile files are refused with a clear message") {
  const std::string ok_entry = R"("a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]})";

  SUBCASE("the well-formed baseline loads") {
    CHECK(error_for("{" + ok_entry + "}", k8).empty());
  }
  SUBCASE("missing file") {
    const convlab::test::TempDir dir;
    const fs::path p = dir.path() / "absent.safetensors";
    CHECK_THROWS_WITH_AS(convlab::read_safetensors(p),
                         doctest::Contains("absent.safetensors: file not found"), Error);
  }
  SUBCASE("shorter than the length prefix") {
    const convlab::test::TempDir dir;
    const fs::path p = dir.path() / "short.safetensors";
    write_bytes(p, "abc");
    CHECK_THROWS_WITH_AS(convlab::read_safetensors(p), doctest::Contains("shorter than the 8-byte"),
                         Error);
  }
  SUBCASE("header length past the end of the file") {
    const convlab::test::TempDir dir;
    const fs::path p = dir.path() / "cut.safetensors";
    write_bytes(p, le64(1000) + "{}");
    CHECK_THROWS_WITH_AS(convlab::read_safetensors(p), doctest::Contains("runs past the end"),
                         Error);
  }
  SUBCASE("absurd header length") {
    const convlab::test::TempDir dir;
    const fs::path p = dir.path() / "huge.safetensors";
    write_bytes(p, le64(std::uint64_t{1} << 63) + "{}");
    CHECK_THROWS_WITH_AS(convlab::read_safetensors(p), doctest::Contains("is absurd"), Error);
  }
  SUBCASE("invalid JSON") {
    CHECK(contains(error_for("{\"a\": ", ""), "not valid JSON"));
    CHECK(contains(error_for(std::string("{\"a\"\0:1}", 8), ""), "not valid JSON"));
  }
  SUBCASE("JSON that is not an object") {
    CHECK(contains(error_for("[1, 2]", ""), "not an object"));
  }
  SUBCASE("deeply nested JSON") {
    CHECK(contains(error_for(std::string(100000, '[') + std::string(100000, ']'), ""),
                   "nested too deeply"));
  }
  SUBCASE("missing keys") {
    CHECK(
        contains(error_for(R"({"a":{"shape":[2],"data_offsets":[0,8]}})", k8), "has no \"dtype\""));
    CHECK(contains(error_for(R"({"a":{"dtype":"F32","data_offsets":[0,8]}})", k8),
                   "has no \"shape\""));
    CHECK(
        contains(error_for(R"({"a":{"dtype":"F32","shape":[2]}})", k8), "has no \"data_offsets\""));
    CHECK(contains(error_for(R"({"a":5})", k8), "not a JSON object"));
  }
  SUBCASE("wrong types") {
    CHECK(contains(error_for(R"({"a":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", k8),
                   "not a non-negative integer"));
    CHECK(contains(error_for(R"({"a":{"dtype":"F32","shape":[2.5],"data_offsets":[0,8]}})", k8),
                   "not a non-negative integer"));
    CHECK(contains(error_for(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0]}})", k8),
                   "data_offsets"));
    CHECK(contains(error_for(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[8,0]}})", k8),
                   "end before they begin"));
    CHECK(contains(error_for(R"({"a":{"dtype":7,"shape":[2],"data_offsets":[0,8]}})", k8),
                   "\"dtype\" is not a string"));
  }
  SUBCASE("a dtype other than F32 is named") {
    const std::string msg =
        error_for(R"({"a":{"dtype":"F16","shape":[4],"data_offsets":[0,8]}})", k8);
    CHECK(contains(msg, "dtype F16"));
    CHECK(contains(msg, "only F32"));
    CHECK(contains(msg, "bad.safetensors"));
  }
  SUBCASE("offsets that disagree with the shape") {
    CHECK(contains(error_for(R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", k8),
                   "needs 12 bytes"));
  }
  SUBCASE("a shape whose size overflows") {
    CHECK(contains(
        error_for(R"({"a":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,8]}})",
                  k8),
        "too large"));
    CHECK(contains(
        error_for(R"({"a":{"dtype":"F32","shape":[4611686018427387904],"data_offsets":[0,8]}})",
                  k8),
        "too large"));
  }
  SUBCASE("offsets past the buffer") {
    CHECK(contains(error_for(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}})", k8),
                   "past the 8-byte data buffer"));
    CHECK(contains(
        error_for(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[18446744073709551608,0]}})",
                  k8),
        "end before"));
  }
  SUBCASE("overlapping tensors") {
    CHECK(contains(error_for(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                             R"("b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
                             k8),
                   "overlaps"));
  }
  SUBCASE("a gap between tensors") {
    CHECK(contains(error_for(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", k8),
                   "belong to no tensor"));
  }
  SUBCASE("bytes after the last tensor") {
    CHECK(contains(error_for("{" + ok_entry + "}", k8 + "xxxx"), "4 bytes after the last tensor"));
  }
  SUBCASE("metadata") {
    CHECK(contains(error_for(R"({"__metadata__":{"k":1},)" + ok_entry + "}", k8),
                   "metadata value of \"k\" is not a string"));
    CHECK(contains(error_for(R"({"__metadata__":[],)" + ok_entry + "}", k8),
                   "\"__metadata__\" is not a JSON object"));
  }
}

TEST_CASE("safetensors: the writer refuses a reserved name") {
  const convlab::test::TempDir dir;
  SafetensorsFile f;
  f.tensors.emplace("__metadata__", Tensor({1}));
  CHECK_THROWS_AS(convlab::write_safetensors(dir.path() / "x.safetensors", f), Error);
  CHECK_THROWS_AS(
      convlab::write_safetensors(dir.path() / "no-such-dir" / "x.safetensors", SafetensorsFile{}),
      Error);
}

}  // namespace test_safetensors
