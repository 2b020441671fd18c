#include "reference/data/idx.hpp"

#include <zlib.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <limits>
#include <string>
#include <system_error>

#include "reference/core/error.hpp"

namespace convlab::data {

namespace {

namespace fs = std::filesystem;

/// Type code of unsigned bytes, the only element type Fashion-MNIST uses.
constexpr unsigned char kTypeUbyte = 0x08;
/// Decompressed bytes are read in pieces this large, so a header that announces more data
/// than the file holds costs at most one piece of memory beyond what is really there.
constexpr std::size_t kChunk = std::size_t{1} << 20;

[[noreturn]] void fail(const fs::path& path, const std::string& what) {
  throw Error("IDX file " + path.string() + ": " + what);
}

constexpr const char* kRefetch = "; the file is damaged: download or install it again";

/// Closes the gzip handle on every path out of the reader.
class GzFile {
 public:
  GzFile(const fs::path& path, const char* mode) : file_(gzopen(path.c_str(), mode)) {}
  ~GzFile() {
    if (file_ != nullptr) gzclose(file_);
  }
  GzFile(const GzFile&) = delete;
  GzFile& operator=(const GzFile&) = delete;
  gzFile get() const { return file_; }
  /// Closes now and returns zlib's status (Z_OK, or Z_BUF_ERROR for a cut-off stream...).
  int close() {
    const int rc = gzclose(file_);
    file_ = nullptr;
    return rc;
  }

 private:
  gzFile file_;
};

std::string gz_message(gzFile f) {
  int errnum = Z_OK;
  const char* msg = gzerror(f, &errnum);
  return (msg != nullptr && *msg != '\0') ? msg : "unknown zlib error";
}

/// Reads up to `n` bytes; returns how many were read (fewer only at the end of the data).
std::size_t read_some(const fs::path& path, gzFile f, unsigned char* out, std::size_t n) {
  std::size_t total = 0;
  while (total < n) {
    const auto want = static_cast<unsigned>(std::min<std::size_t>(n - total, kChunk));
    const int got = gzread(f, out + total, want);
    if (got < 0) fail(path, "corrupt gzip data (" + gz_message(f) + ")" + kRefetch);
    if (got == 0) break;
    total += static_cast<std::size_t>(got);
  }
  // zlib reports a stream cut off mid-way as a soft error beside a short read.
  int errnum = Z_OK;
  gzerror(f, &errnum);
  if (errnum != Z_OK)
    fail(path, "corrupt or truncated gzip data (" + gz_message(f) + ")" + kRefetch);
  return total;
}

}  // namespace

IdxArray read_idx_gz(const fs::path& path) {
  std::error_code ec;
  if (!fs::exists(path, ec)) fail(path, "file not found");
  if (!fs::is_regular_file(path, ec)) fail(path, "not a regular file");
  GzFile file(path, "rb");
  if (file.get() == nullptr) fail(path, "cannot open it for reading (check its permissions)");
  gzbuffer(file.get(), 256 * 1024);

  std::array<unsigned char, 4> magic{};
  const std::size_t got_magic = read_some(path, file.get(), magic.data(), magic.size());
  // zlib passes non-gzip input through unchanged; the format requires gzip, so refuse it.
  if (gzdirect(file.get()) != 0) {
    fail(path,
         "not gzip-compressed (expected a .gz file as distributed, e.g. "
         "t10k-images-idx3-ubyte.gz; compress it with gzip or fetch it again)");
  }
  if (got_magic < magic.size())
    fail(path, "truncated: shorter than the 4-byte IDX magic number" + std::string(kRefetch));
  if (magic[0] != 0 || magic[1] != 0 || magic[2] != kTypeUbyte || magic[3] < 1 || magic[3] > 4) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%02x %02x %02x %02x", magic[0], magic[1], magic[2], magic[3]);
    fail(path,
         std::string("wrong magic number ") + buf +
             ": expected 00 00 08 0N (unsigned bytes, N = 1..4 dimensions); is this an IDX file?");
  }

  IdxArray array;
  const int ndims = magic[3];
  std::array<unsigned char, 16> dim_bytes{};
  const auto dims_len = static_cast<std::size_t>(4 * ndims);
  if (read_some(path, file.get(), dim_bytes.data(), dims_len) < dims_len) {
    fail(path, "truncated: the header announces " + std::to_string(ndims) +
                   " dimensions but ends before them" + kRefetch);
  }
  std::uint64_t total = 1;
  for (int d = 0; d < ndims; ++d) {
    const unsigned char* p = dim_bytes.data() + 4 * d;
    const std::uint64_t n = (std::uint64_t{p[0]} << 24) | (std::uint64_t{p[1]} << 16) |
                            (std::uint64_t{p[2]} << 8) | std::uint64_t{p[3]};
    array.dims.push_back(static_cast<std::int64_t>(n));
    // Each n < 2^32, so the check below keeps total within 2^62 and the product cannot wrap.
    if (n != 0 && total > (std::uint64_t{1} << 62) / n) {
      fail(path, "dimensions overflow: their product is too large; the header is corrupt" +
                     std::string(kRefetch));
    }
    total *= n;
  }
  if (total > std::numeric_limits<std::size_t>::max() / 2) fail(path, "dimensions overflow");

  // Grow as data arrives rather than trusting the header with one large allocation.
  array.values.reserve(static_cast<std::size_t>(std::min<std::uint64_t>(total, 64 * kChunk)));
  std::uint64_t have = 0;
  while (have < total) {
    const auto piece = static_cast<std::size_t>(std::min<std::uint64_t>(total - have, kChunk));
    array.values.resize(static_cast<std::size_t>(have) + piece);
    const std::size_t got = read_some(path, file.get(), array.values.data() + have, piece);
    have += got;
    if (got < piece) {
      fail(path, "truncated: the header announces " + std::to_string(total) +
                     " data bytes but the file holds only " + std::to_string(have) + kRefetch);
    }
  }
  unsigned char extra = 0;
  if (read_some(path, file.get(), &extra, 1) != 0) {
    fail(path, "holds more bytes than its header announces (" + std::to_string(total) +
                   "); the file is not a valid IDX file");
  }
  const int rc = file.close();
  if (rc != Z_OK) {
    fail(path, "gzip stream did not end cleanly (zlib code " + std::to_string(rc) + ")" + kRefetch);
  }
  return array;
}

void write_idx_gz(const fs::path& path, const IdxArray& array) {
  const auto ndims = array.dims.size();
  if (ndims < 1 || ndims > 4) {
    throw Error("cannot write IDX file " + path.string() + ": it needs 1 to 4 dimensions, got " +
                std::to_string(ndims));
  }
  std::uint64_t total = 1;
  std::array<unsigned char, 20> header{0, 0, kTypeUbyte, static_cast<unsigned char>(ndims)};
  for (std::size_t d = 0; d < ndims; ++d) {
    const std::int64_t n = array.dims[d];
    if (n < 0 || n > std::numeric_limits<std::uint32_t>::max()) {
      throw Error("cannot write IDX file " + path.string() + ": dimension " + std::to_string(n) +
                  " does not fit 32 bits");
    }
    total *= static_cast<std::uint64_t>(n);  // at most 4 factors below 2^32 in a valid array
    for (int b = 0; b < 4; ++b)
      header[4 + 4 * d + b] = static_cast<unsigned char>(n >> (24 - 8 * b));
  }
  if (total != array.values.size()) {
    throw Error("cannot write IDX file " + path.string() + ": dimensions hold " +
                std::to_string(total) + " values but the array has " +
                std::to_string(array.values.size()));
  }
  GzFile file(path, "wb6");
  if (file.get() == nullptr) {
    throw Error("cannot write IDX file " + path.string() +
                ": cannot create it (check the directory)");
  }
  const auto write = [&](const unsigned char* p, std::size_t n) {
    while (n > 0) {
      const auto piece = static_cast<unsigned>(std::min(n, kChunk));
      if (gzwrite(file.get(), p, piece) != static_cast<int>(piece)) {
        throw Error("cannot write IDX file " + path.string() + ": " + gz_message(file.get()));
      }
      p += piece;
      n -= piece;
    }
  };
  write(header.data(), 4 + 4 * ndims);
  write(array.values.data(), array.values.size());
  if (file.close() != Z_OK)
    throw Error("cannot write IDX file " + path.string() + ": closing failed (disk full?)");
}

}  // namespace convlab::data
