#include "datasets/synthetic.hpp"

#include <array>
#include <cstdlib>
#include <random>
#include <string>
#include <system_error>

#include "reference/core/error.hpp"
#include "reference/data/idx.hpp"

namespace convlab::data {

namespace {

namespace fs = std::filesystem;

/// Per class: stripe direction (dx, dy) and period in pixels. Integer arithmetic only, so the
/// images are bit-identical with every compiler and standard library.
struct Stripes {
  int dx;
  int dy;
  int period;
};
constexpr std::array<Stripes, 10> kClasses{{{1, 0, 4},
                                            {0, 1, 4},
                                            {1, 1, 6},
                                            {1, -1, 6},
                                            {1, 0, 9},
                                            {0, 1, 9},
                                            {2, 1, 8},
                                            {1, 2, 8},
                                            {1, 1, 12},
                                            {2, -1, 10}}};

void write_split(const fs::path& dir, const std::string& prefix, const Dataset& d) {
  if (static_cast<std::int64_t>(d.pixels.size()) != d.count * d.rows * d.cols ||
      static_cast<std::int64_t>(d.labels.size()) != d.count) {
    throw Error("cannot write the " + prefix +
                " data set: its pixel or label count does not match " + std::to_string(d.count) +
                " images of " + std::to_string(d.rows) + "x" + std::to_string(d.cols));
  }
  write_idx_gz(dir / (prefix + "-images-idx3-ubyte.gz"), {{d.count, d.rows, d.cols}, d.pixels});
  write_idx_gz(dir / (prefix + "-labels-idx1-ubyte.gz"), {{d.count}, d.labels});
}

}  // namespace

Dataset make_synthetic(std::int64_t count, int rows, int cols, std::uint32_t seed) {
  if (count < 0 || rows < 1 || cols < 1 || count > (std::int64_t{1} << 31) / rows / cols) {
    throw Error("make_synthetic: " + std::to_string(count) + " images of " + std::to_string(rows) +
                "x" + std::to_string(cols) + " is not a usable size");
  }
  // std::mt19937's raw output is fixed by the standard; distributions are not, so values are
  // derived from the raw 32-bit words directly.
  std::mt19937 gen(seed);
  Dataset d;
  d.count = count;
  d.rows = rows;
  d.cols = cols;
  d.pixels.resize(static_cast<std::size_t>(count * rows * cols));
  d.labels.resize(static_cast<std::size_t>(count));
  std::size_t p = 0;
  for (std::int64_t i = 0; i < count; ++i) {
    const auto label = static_cast<int>(gen() % 10u);
    d.labels[static_cast<std::size_t>(i)] = static_cast<std::uint8_t>(label);
    const Stripes s = kClasses[static_cast<std::size_t>(label)];
    const auto phase = static_cast<int>(gen() % static_cast<std::uint32_t>(s.period));
    for (int y = 0; y < rows; ++y) {
      for (int x = 0; x < cols; ++x) {
        // Position along the stripe direction, folded into one period (always non-negative).
        const int t = ((s.dx * x + s.dy * y + phase) % s.period + s.period) % s.period;
        // Triangle wave: a soft ramp rather than hard edges, 28..228.
        const int tri = 28 + 200 * (s.period - std::abs(2 * t - s.period)) / s.period;
        const int noise = static_cast<int>(gen() >> 26) - 32;  // -32..31
        const int v = tri + noise;
        d.pixels[p++] = static_cast<std::uint8_t>(v < 0 ? 0 : (v > 255 ? 255 : v));
      }
    }
  }
  return d;
}

void write_dataset_files(const fs::path& dir, const Dataset& train, const Dataset& test) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw Error("cannot create data directory " + dir.string() + ": " + ec.message());
  write_split(dir, "train", train);
  write_split(dir, "t10k", test);
}

}  // namespace convlab::data
