// Data in: the gzipped IDX reader and writer, Fashion-MNIST loading, the synthetic generator,
// and the fetch script's checksum verification.
#include <doctest/doctest.h>
#include <zlib.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <set>
#include <string>
#include <vector>

#include "datasets/synthetic.hpp"
#include "reference/core/error.hpp"
#include "reference/data/fashion_mnist.hpp"
#include "reference/data/idx.hpp"
#include "tests/support/test_support.hpp"

namespace test_idx {

using convlab::test::contains;
using convlab::test::read_all;
namespace {

namespace fs = std::filesystem;
using convlab::Error;
using convlab::data::IdxArray;

using Bytes = std::vector<std::uint8_t>;

/// Writes `content` gzip-compressed, so tests can build IDX files the writer would refuse.
void write_gz(const fs::path& path, const Bytes& content) {
  gzFile f = gzopen(path.c_str(), "wb");
  REQUIRE(f != nullptr);
  if (!content.empty()) {
    REQUIRE(gzwrite(f, content.data(), static_cast<unsigned>(content.size())) ==
            static_cast<int>(content.size()));
  }
  REQUIRE(gzclose(f) == Z_OK);
}

void write_bytes(const fs::path& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

/// The reader's message for a gzip file holding `content`, or "" when it reads.
std::string idx_error(const Bytes& content) {
  const convlab::test::TempDir dir;
  const fs::path p = dir.path() / "x-idx.gz";
  write_gz(p, content);
  try {
    convlab::data::read_idx_gz(p);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

/// FNV-1a over pixels then labels: pins the generator's output across platforms.
std::uint64_t fingerprint(const convlab::data::Dataset& d) {
  std::uint64_t h = 1469598103934665603ull;
  for (const auto* v : {&d.pixels, &d.labels}) {
    for (const std::uint8_t b : *v) h = (h ^ b) * 1099511628211ull;
  }
  return h;
}

/// Sets or clears an environment variable for one scope.
class EnvVar {
 public:
  EnvVar(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    if (value != nullptr) {
      setenv(name, value, 1);
    } else {
      unsetenv(name);
    }
  }
  ~EnvVar() {
    if (old_) {
      setenv(name_, old_->c_str(), 1);
    } else {
      unsetenv(name_);
    }
  }
  EnvVar(const EnvVar&) = delete;
  EnvVar& operator=(const EnvVar&) = delete;

 private:
  const char* name_;
  std::optional<std::string> old_;
};

std::string fetch_script() {
  return (convlab::test::source_dir() / "datasets" / "fetch-fashion-mnist.sh").string();
}

const char* const kFiles[] = {"train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz",
                              "t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz"};

}  // namespace

TEST_CASE("idx: write then read gives the same array, for 1 to 4 dimensions") {
  const convlab::test::TempDir dir;
  const std::vector<std::vector<std::int64_t>> shapes{
      {7}, {3, 5}, {2, 3, 4}, {2, 1, 3, 2}, {0, 28, 28}};
  for (const auto& dims : shapes) {
    IdxArray a;
    a.dims = dims;
    std::int64_t n = 1;
    for (const auto d : dims) n *= d;
    for (std::int64_t i = 0; i < n; ++i) a.values.push_back(static_cast<std::uint8_t>(i * 37 + 11));
    const fs::path p = dir.path() / "a.gz";
    convlab::data::write_idx_gz(p, a);
    // The file is real gzip and real IDX: magic 1f 8b, then 00 00 08 ndims once inflated.
    CHECK(read_all(p).substr(0, 2) == "\x1f\x8b");
    const IdxArray b = convlab::data::read_idx_gz(p);
    CHECK(b.dims == a.dims);
    CHECK(b.values == a.values);
  }
}

TEST_CASE("idx: a hand-built IDX file reads as the format says") {
  // 00 00 08 02, dims 2 and 3 big-endian, then 6 bytes.
  const convlab::test::TempDir dir;
  const fs::path p = dir.path() / "hand.gz";
  write_gz(p, {0, 0, 8, 2, 0, 0, 0, 2, 0, 0, 0, 3, 1, 2, 3, 4, 5, 250});
  const IdxArray a = convlab::data::read_idx_gz(p);
  CHECK(a.dims == std::vector<std::int64_t>{2, 3});
  CHECK(a.values == Bytes{1, 2, 3, 4, 5, 250});
}

TEST_CASE("idx: bad files are refused with a message naming the file and the problem") {
  const convlab::test::TempDir dir;
  SUBCASE("missing file") {
    CHECK_THROWS_WITH_AS(convlab::data::read_idx_gz(dir.path() / "nope.gz"),
                         doctest::Contains("nope.gz: file not found"), Error);
  }
  SUBCASE("a directory") {
    CHECK_THROWS_WITH_AS(convlab::data::read_idx_gz(dir.path()),
                         doctest::Contains("not a regular file"), Error);
  }
  SUBCASE("not gzip") {
    const fs::path p = dir.path() / "plain.gz";
    write_bytes(p, std::string("\0\0\x08\x01\0\0\0\x02\x05\x06", 10));
    CHECK_THROWS_WITH_AS(convlab::data::read_idx_gz(p), doctest::Contains("plain.gz: not gzip"),
                         Error);
  }
  SUBCASE("corrupt deflate stream") {
    const fs::path good = dir.path() / "good.gz";
    IdxArray a{{4000}, Bytes(4000)};
    for (std::size_t i = 0; i < a.values.size(); ++i)
      a.values[i] = static_cast<std::uint8_t>((i * i) >> 3);
    convlab::data::write_idx_gz(good, a);
    std::string bytes = read_all(good);
    REQUIRE(bytes.size() > 60);
    for (std::size_t i = 20; i < 40; ++i) bytes[i] = static_cast<char>(~bytes[i]);
    const fs::path bad = dir.path() / "bad.gz";
    write_bytes(bad, bytes);
    CHECK_THROWS_WITH_AS(convlab::data::read_idx_gz(bad), doctest::Contains("bad.gz: corrupt"),
                         Error);

    // Damage only the gzip trailer's CRC: the data inflates, the check catches it.
    std::string crc = read_all(good);
    crc[crc.size() - 6] = static_cast<char>(crc[crc.size() - 6] ^ 1);
    write_bytes(bad, crc);
    CHECK_THROWS_WITH_AS(convlab::data::read_idx_gz(bad), doctest::Contains("corrupt"), Error);
  }
  SUBCASE("gzip stream cut short") {
    const fs::path good = dir.path() / "good.gz";
    IdxArray a{{3000}, Bytes(3000)};
    for (std::size_t i = 0; i < a.values.size(); ++i)
      a.values[i] = static_cast<std::uint8_t>(i * 7919 >> 5);
    convlab::data::write_idx_gz(good, a);
    const std::string bytes = read_all(good);
    const fs::path cut = dir.path() / "cut.gz";
    write_bytes(cut, bytes.substr(0, bytes.size() / 2));
    CHECK_THROWS_WITH_AS(convlab::data::read_idx_gz(cut), doctest::Contains("truncated"), Error);
  }
  SUBCASE("fewer data bytes than the header announces") {
    CHECK(contains(idx_error({0, 0, 8, 1, 0, 0, 0, 10, 1, 2, 3}),
                   "announces 10 data bytes but the file holds only 3"));
    CHECK(contains(idx_error({0, 0, 8, 3, 0, 0, 0, 10}), "truncated"));
    CHECK(contains(idx_error({0, 0, 8}), "truncated"));
    CHECK(contains(idx_error({}), "truncated"));
    // A header that announces 4 GB in a tiny file fails fast instead of allocating it.
    CHECK(contains(idx_error({0, 0, 8, 1, 0xff, 0xff, 0xff, 0xff, 1, 2}), "truncated"));
  }
  SUBCASE("more bytes than the header announces") {
    CHECK(contains(idx_error({0, 0, 8, 1, 0, 0, 0, 2, 1, 2, 3}),
                   "more bytes than its header announces"));
  }
  SUBCASE("wrong magic number") {
    CHECK(contains(idx_error({1, 0, 8, 1, 0, 0, 0, 1, 5}), "wrong magic number 01 00 08 01"));
    CHECK(contains(idx_error({0, 1, 8, 1, 0, 0, 0, 1, 5}), "wrong magic"));
    CHECK(contains(idx_error({0, 0, 0x0d, 1, 0, 0, 0, 1, 5, 5, 5, 5}),
                   "wrong magic number 00 00 0d 01"));
    CHECK(contains(idx_error({0, 0, 8, 0, 5}), "wrong magic"));
    CHECK(contains(
        idx_error({0, 0, 8, 5, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 1, 9}),
        "wrong magic"));
  }
  SUBCASE("dimensions that overflow") {
    CHECK(contains(idx_error({0,    0,    8,    4,    0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
                              0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 1}),
                   "overflow"));
  }
  SUBCASE("the writer refuses inconsistent arrays") {
    CHECK_THROWS_AS(convlab::data::write_idx_gz(dir.path() / "w.gz", {{2, 2}, Bytes(3)}), Error);
    CHECK_THROWS_AS(convlab::data::write_idx_gz(dir.path() / "w.gz", {{}, Bytes(1)}), Error);
    CHECK_THROWS_AS(convlab::data::write_idx_gz(dir.path() / "w.gz", {{1, 1, 1, 1, 1}, Bytes(1)}),
                    Error);
    CHECK_THROWS_AS(convlab::data::write_idx_gz(dir.path() / "w.gz", {{-1}, Bytes{}}), Error);
    CHECK_THROWS_AS(convlab::data::write_idx_gz(dir.path() / "no" / "w.gz", {{1}, Bytes(1)}),
                    Error);
  }
}

TEST_CASE("synthetic: deterministic, labels in range, every class present") {
  const auto a = convlab::data::make_synthetic(1000, 28, 28, 42);
  const auto b = convlab::data::make_synthetic(1000, 28, 28, 42);
  const auto c = convlab::data::make_synthetic(1000, 28, 28, 43);
  CHECK(a.count == 1000);
  CHECK(a.rows == 28);
  CHECK(a.cols == 28);
  CHECK(a.pixels.size() == 1000u * 28 * 28);
  CHECK(a.labels.size() == 1000u);
  CHECK(a.pixels == b.pixels);
  CHECK(a.labels == b.labels);
  CHECK(a.pixels != c.pixels);
  CHECK(a.labels != c.labels);
  CHECK(std::all_of(a.labels.begin(), a.labels.end(), [](std::uint8_t l) { return l <= 9; }));
  CHECK(std::set<std::uint8_t>(a.labels.begin(), a.labels.end()).size() == 10);
  // Pixels span a real range (not constant), so a network has something to learn.
  const auto [lo, hi] = std::minmax_element(a.pixels.begin(), a.pixels.end());
  CHECK(*lo < 40);
  CHECK(*hi > 200);
  // Integer-only generation: the same bytes on every platform. A change here changes test data.
  CHECK(fingerprint(convlab::data::make_synthetic(50, 12, 9, 7)) == 10538420057054079339ull);
  CHECK(convlab::data::make_synthetic(0, 28, 28, 1).pixels.empty());
  CHECK_THROWS_AS(convlab::data::make_synthetic(10, 0, 28, 1), Error);
  CHECK_THROWS_AS(convlab::data::make_synthetic(-1, 28, 28, 1), Error);
}

TEST_CASE("fashion-mnist: data_dir picks flag, then CONVLAB_DATA, then the Debian path") {
  {
    const EnvVar env("CONVLAB_DATA", "/from/env");
    CHECK(convlab::data::data_dir(fs::path("/from/flag")) == fs::path("/from/flag"));
    CHECK(convlab::data::data_dir(std::nullopt) == fs::path("/from/env"));
  }
  const EnvVar env("CONVLAB_DATA", nullptr);
  CHECK(convlab::data::data_dir(std::nullopt) == fs::path("/usr/share/datasets/fashion-mnist"));
}

TEST_CASE("fashion-mnist: loads generated files, and refuses bad ones saying how to get data") {
  const convlab::test::TempDir dir;
  const auto train = convlab::data::make_synthetic(30, 28, 28, 1);
  const auto test = convlab::data::make_synthetic(20, 28, 28, 2);
  convlab::data::write_dataset_files(dir.path(), train, test);
  for (const char* name : kFiles) CHECK(fs::exists(dir.path() / name));

  const auto d = convlab::data::load_fashion_mnist(dir.path(), convlab::data::Split::test);
  CHECK(d.count == 20);
  CHECK(d.rows == 28);
  CHECK(d.cols == 28);
  CHECK(d.pixels == test.pixels);
  CHECK(d.labels == test.labels);
  CHECK(convlab::data::load_fashion_mnist(dir.path(), convlab::data::Split::train).labels ==
        train.labels);

  SUBCASE("images() scales and shapes the first n") {
    const convlab::Tensor t = d.images(3, 0.5f);
    CHECK(t.shape() == convlab::Shape{3, 1, 28, 28});
    CHECK(t.data()[0] == static_cast<float>(test.pixels[0]) * 0.5f);
    CHECK(t.data()[3 * 784 - 1] == static_cast<float>(test.pixels[3 * 784 - 1]) * 0.5f);
    CHECK(d.images(20, 1.0f).size() == 20 * 784);
    CHECK_THROWS_WITH_AS(d.images(0, 1.0f), doctest::Contains("from 1 to 20"), Error);
    CHECK_THROWS_WITH_AS(d.images(21, 1.0f), doctest::Contains("from 1 to 20"), Error);
  }
  SUBCASE("write_images() writes the first n as an IDX file of [n][rows][cols] bytes") {
    const fs::path head = dir.path() / "head.idx.gz";
    d.write_images(head, 3);
    const convlab::data::IdxArray a = convlab::data::read_idx_gz(head);
    CHECK(a.dims == std::vector<std::int64_t>{3, 28, 28});
    CHECK(a.values ==
          std::vector<std::uint8_t>(test.pixels.begin(), test.pixels.begin() + 3 * 784));
    CHECK_THROWS_WITH_AS(d.write_images(head, 0), doctest::Contains("from 1 to 20"), Error);
    CHECK_THROWS_WITH_AS(d.write_images(head, 21), doctest::Contains("from 1 to 20"), Error);
  }
  SUBCASE("missing directory") {
    const std::string where = (dir.path() / "absent").string();
    try {
      convlab::data::load_fashion_mnist(where, convlab::data::Split::test);
      FAIL("no error for a missing directory");
    } catch (const Error& e) {
      CHECK(contains(e.what(), where + " does not exist"));
    }
    try {
      convlab::data::load_fashion_mnist(where, convlab::data::Split::test);
    } catch (const Error& e) {
      const std::string msg = e.what();
      CHECK(contains(msg, "apt-get install dataset-fashion-mnist"));
      CHECK(contains(msg, "datasets/fetch-fashion-mnist.sh DIR"));
      CHECK(contains(msg, "--data DIR"));
      CHECK(contains(msg, "CONVLAB_DATA=DIR"));
    }
  }
  SUBCASE("missing file") {
    fs::remove(dir.path() / "t10k-labels-idx1-ubyte.gz");
    CHECK_THROWS_WITH_AS(convlab::data::load_fashion_mnist(dir.path(), convlab::data::Split::test),
                         doctest::Contains("t10k-labels-idx1-ubyte.gz is missing"), Error);
  }
  SUBCASE("damaged file") {
    write_bytes(dir.path() / "t10k-images-idx3-ubyte.gz", "garbage");
    CHECK_THROWS_WITH_AS(convlab::data::load_fashion_mnist(dir.path(), convlab::data::Split::test),
                         doctest::Contains("not gzip"), Error);
  }
  SUBCASE("counts that differ") {
    convlab::data::write_idx_gz(dir.path() / "t10k-labels-idx1-ubyte.gz", {{19}, Bytes(19)});
    CHECK_THROWS_WITH_AS(convlab::data::load_fashion_mnist(dir.path(), convlab::data::Split::test),
                         doctest::Contains("holds 20 images but"), Error);
  }
  SUBCASE("a label over 9") {
    Bytes labels(20, 3);
    labels[7] = 10;
    convlab::data::write_idx_gz(dir.path() / "t10k-labels-idx1-ubyte.gz", {{20}, labels});
    CHECK_THROWS_WITH_AS(convlab::data::load_fashion_mnist(dir.path(), convlab::data::Split::test),
                         doctest::Contains("label 7 is 10"), Error);
  }
  SUBCASE("wrong ranks") {
    convlab::data::write_idx_gz(dir.path() / "t10k-images-idx3-ubyte.gz",
                                {{20, 784}, Bytes(20 * 784)});
    CHECK_THROWS_WITH_AS(convlab::data::load_fashion_mnist(dir.path(), convlab::data::Split::test),
                         doctest::Contains("images need 3"), Error);
    convlab::data::write_idx_gz(dir.path() / "t10k-images-idx3-ubyte.gz",
                                {{20, 28, 28}, test.pixels});
    convlab::data::write_idx_gz(dir.path() / "t10k-labels-idx1-ubyte.gz", {{20, 1}, Bytes(20)});
    CHECK_THROWS_WITH_AS(convlab::data::load_fashion_mnist(dir.path(), convlab::data::Split::test),
                         doctest::Contains("labels need 1"), Error);
  }
}

TEST_CASE("fashion-mnist: the real test set, where installed") {
  std::string why;
  const auto real = convlab::test::real_data_dir(&why);
  if (!real) {
    MESSAGE("not checked: " << why);
    return;
  }
  const auto d = convlab::data::load_fashion_mnist(*real, convlab::data::Split::test);
  CHECK(d.count == 10000);
  CHECK(d.rows == 28);
  CHECK(d.cols == 28);
  CHECK(d.labels[0] == 9);  // the first test image is an ankle boot
  std::vector<int> per_class(10);
  for (const auto l : d.labels) ++per_class[l];
  CHECK(std::all_of(per_class.begin(), per_class.end(), [](int n) { return n == 1000; }));
}

TEST_CASE("fetch script: verifies SHA-256, refuses files that differ") {
  const std::string script = fetch_script();
  REQUIRE(fs::exists(script));
  std::string out;

  SUBCASE("usage") {
    CHECK(convlab::test::run_command("bash " + script, &out) != 0);
    CHECK(contains(out, "usage:"));
    CHECK(convlab::test::run_command("bash " + script + " --bogus x", &out) != 0);
  }
  SUBCASE("files that are not the official ones are refused and deleted") {
    const convlab::test::TempDir src, dest;
    convlab::data::write_dataset_files(src.path(), convlab::data::make_synthetic(5, 28, 28, 1),
                                       convlab::data::make_synthetic(5, 28, 28, 2));
    const int rc = convlab::test::run_command(
        "bash " + script + " --from " + src.path().string() + " " + dest.path().string(), &out);
    INFO(out);
    CHECK(rc == 1);
    CHECK(contains(out, "train-images-idx3-ubyte.gz: SHA-256 mismatch"));
    CHECK_FALSE(fs::exists(dest.path() / "train-images-idx3-ubyte.gz"));
    CHECK_FALSE(fs::exists(dest.path() / "train-images-idx3-ubyte.gz.part"));
  }
  SUBCASE("the official files are accepted; one changed byte is refused") {
    std::string why;
    const auto real = convlab::test::real_data_dir(&why);
    if (!real || !fs::exists(*real / "train-images-idx3-ubyte.gz")) {
      MESSAGE("accept path not checked: " << why);
      return;
    }
    const convlab::test::TempDir dest;
    int rc = convlab::test::run_command(
        "bash " + script + " --from " + real->string() + " " + dest.path().string(), &out);
    INFO(out);
    CHECK(rc == 0);
    CHECK(contains(out, "CONVLAB_DATA=" + dest.path().string()));
    CHECK(contains(out, "--data " + dest.path().string()));
    for (const char* name : kFiles)
      CHECK(fs::file_size(dest.path() / name) == fs::file_size(*real / name));

    // A copy with one byte flipped, served as a file:// URL through the environment variable.
    const convlab::test::TempDir bad, dest2;
    for (const char* name : kFiles) fs::copy_file(*real / name, bad.path() / name);
    std::string labels = read_all(bad.path() / "t10k-labels-idx1-ubyte.gz");
    labels[100] = static_cast<char>(labels[100] ^ 0x40);
    write_bytes(bad.path() / "t10k-labels-idx1-ubyte.gz", labels);
    rc = convlab::test::run_command("CONVLAB_FETCH_FROM=file://" + bad.path().string() + " bash " +
                                        script + " " + dest2.path().string(),
                                    &out);
    CHECK(rc == 1);
    CHECK(contains(out, "t10k-labels-idx1-ubyte.gz: SHA-256 mismatch"));
    CHECK(fs::exists(dest2.path() / "t10k-images-idx3-ubyte.gz"));
    CHECK_FALSE(fs::exists(dest2.path() / "t10k-labels-idx1-ubyte.gz"));
  }
}

}  // namespace test_idx
