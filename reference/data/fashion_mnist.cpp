#include "reference/data/fashion_mnist.hpp"

#include <cstdlib>
#include <limits>
#include <string>
#include <system_error>
#include <utility>

#include "reference/core/error.hpp"
#include "reference/data/idx.hpp"

namespace convlab::data {

namespace {

namespace fs = std::filesystem;

std::string how_to_get_data() {
  return "Get the data with `sudo apt-get install dataset-fashion-mnist` (installs into " +
         std::string(kDefaultDataDir) +
         "), or download it with `datasets/fetch-fashion-mnist.sh DIR` and then pass "
         "`--data DIR` or set CONVLAB_DATA=DIR.";
}

[[noreturn]] void fail(const std::string& what) {
  // Keep the sentence's own closing mark ("...?") rather than adding a second one.
  const bool closed = !what.empty() && (what.back() == '.' || what.back() == '?');
  throw Error(what + (closed ? " " : ". ") + how_to_get_data());
}

IdxArray read_file(const fs::path& path) {
  std::error_code ec;
  if (!fs::exists(path, ec)) fail("Fashion-MNIST file " + path.string() + " is missing");
  try {
    return read_idx_gz(path);
  } catch (const Error& e) {
    fail(e.what());
  }
}

void require_images(std::int64_t n, std::int64_t count) {
  if (n < 1 || n > count) {
    throw Error("asked for " + std::to_string(n) + " images, but the data set holds " +
                std::to_string(count) + ": choose a number from 1 to " + std::to_string(count));
  }
}

}  // namespace

fs::path data_dir(const std::optional<fs::path>& flag) {
  if (flag && !flag->empty()) return *flag;
  if (const char* env = std::getenv("CONVLAB_DATA"); env != nullptr && *env != '\0') return env;
  return fs::path(kDefaultDataDir);
}

Tensor Dataset::images(std::int64_t n, float scale) const {
  require_images(n, count);
  const std::int64_t per_image = std::int64_t{rows} * cols;
  Tensor t({n, 1, rows, cols});
  float* out = t.data();
  for (std::int64_t i = 0; i < n * per_image; ++i) {
    out[i] = static_cast<float>(pixels[static_cast<std::size_t>(i)]) * scale;
  }
  return t;
}

void Dataset::write_images(const fs::path& path, std::int64_t n) const {
  require_images(n, count);
  IdxArray a;
  a.dims = {n, rows, cols};
  const auto bytes = static_cast<std::ptrdiff_t>(n * rows * cols);
  a.values.assign(pixels.begin(), pixels.begin() + bytes);
  write_idx_gz(path, a);
}

Dataset load_fashion_mnist(const fs::path& dir, Split split) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec))
    fail("Fashion-MNIST directory " + dir.string() + " does not exist");
  const std::string prefix = split == Split::train ? "train" : "t10k";
  const fs::path image_path = dir / (prefix + "-images-idx3-ubyte.gz");
  const fs::path label_path = dir / (prefix + "-labels-idx1-ubyte.gz");
  IdxArray images = read_file(image_path);
  IdxArray labels = read_file(label_path);

  if (images.dims.size() != 3) {
    fail(image_path.string() + " has " + std::to_string(images.dims.size()) +
         " dimensions; images need 3 (count, rows, cols)");
  }
  if (labels.dims.size() != 1) {
    fail(label_path.string() + " has " + std::to_string(labels.dims.size()) +
         " dimensions; labels need 1 (count)");
  }
  if (images.dims[0] != labels.dims[0]) {
    fail(image_path.string() + " holds " + std::to_string(images.dims[0]) + " images but " +
         label_path.string() + " holds " + std::to_string(labels.dims[0]) + " labels");
  }
  if (images.dims[0] < 1) fail(image_path.string() + " holds no images");
  // Rows and cols are kept as int; an image over 2^31 pixels per side is not Fashion-MNIST.
  constexpr std::int64_t kMaxSide = std::numeric_limits<int>::max();
  if (images.dims[1] < 1 || images.dims[2] < 1 || images.dims[1] > kMaxSide ||
      images.dims[2] > kMaxSide) {
    fail(image_path.string() + " has images of " + std::to_string(images.dims[1]) + "x" +
         std::to_string(images.dims[2]) + " pixels");
  }
  for (std::size_t i = 0; i < labels.values.size(); ++i) {
    if (labels.values[i] > 9) {
      fail(label_path.string() + ": label " + std::to_string(i) + " is " +
           std::to_string(labels.values[i]) + ", but Fashion-MNIST labels are 0..9");
    }
  }

  Dataset d;
  d.count = images.dims[0];
  d.rows = static_cast<int>(images.dims[1]);
  d.cols = static_cast<int>(images.dims[2]);
  d.pixels = std::move(images.values);
  d.labels = std::move(labels.values);
  return d;
}

}  // namespace convlab::data
