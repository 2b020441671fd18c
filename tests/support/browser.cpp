#include "tests/support/browser.hpp"

#include <doctest/doctest.h>
#include <zlib.h>

#include <cstdlib>
#include <fstream>
#include <iterator>
#include <stdexcept>

#include "tests/support/test_support.hpp"

namespace convlab::test {

namespace fs = std::filesystem;

void require_chromium() {
  if (!fs::exists(kChromium)) {
    skip(kChromium.string() + " not found: apt-get install chromium to render the pages and plots");
  }
}

std::string chromium_command(const fs::path& profile) {
  return "timeout 120 " + kChromium.string() +
         " --headless --no-sandbox --disable-gpu --disable-dev-shm-usage --no-first-run"
         " --hide-scrollbars --user-data-dir=" +
         profile.string();
}

std::string dump_dom(const std::string& url, const fs::path& dom, const fs::path& log) {
  TempDir profile;
  // Grouped, so that the DOM and the messages go to their files and nothing to the pipe.
  const int rc = run_command("{ " + chromium_command(profile.path()) + " --dump-dom '" + url +
                                 "' > '" + dom.string() + "' 2> '" + log.string() + "'; }",
                             nullptr);
  INFO("chromium log: " << read_all(log));
  REQUIRE(rc == 0);
  return read_all(dom);
}

void screenshot(const std::string& url, const fs::path& png, int width, int height) {
  TempDir profile;
  std::string output;
  const int rc = run_command(chromium_command(profile.path()) + " --screenshot='" + png.string() +
                                 "' --window-size=" + std::to_string(width) + "," +
                                 std::to_string(height) + " '" + url + "'",
                             &output);
  INFO("chromium: " << output);
  REQUIRE(rc == 0);
}

namespace {

int channel(const Image& im, std::size_t pixel, int c) {
  return im.rgba[pixel * 4 + static_cast<std::size_t>(c)];
}

bool near(const Image& im, std::size_t pixel, std::uint32_t rgb, int tolerance) {
  for (int c = 0; c < 3; ++c) {
    const int want = static_cast<int>((rgb >> (16 - 8 * c)) & 0xff);
    if (std::abs(channel(im, pixel, c) - want) > tolerance) return false;
  }
  return true;
}

std::uint32_t big_endian(const std::string& s, std::size_t at) {
  std::uint32_t v = 0;
  for (std::size_t i = 0; i < 4; ++i) v = v << 8 | static_cast<unsigned char>(s.at(at + i));
  return v;
}

// The PNG filters of one row (PNG spec, section 9), undone in place; `prev` is the row above
// (zeros for the first), `bpp` the bytes per pixel.
void unfilter(int type, std::uint8_t* row, const std::uint8_t* prev, std::size_t n,
              std::size_t bpp) {
  for (std::size_t i = 0; i < n; ++i) {
    const int a = i >= bpp ? row[i - bpp] : 0, b = prev[i], c = i >= bpp ? prev[i - bpp] : 0;
    int add = 0;
    if (type == 1) add = a;
    if (type == 2) add = b;
    if (type == 3) add = (a + b) / 2;
    if (type == 4) {
      const int p = a + b - c, pa = std::abs(p - a), pb = std::abs(p - b), pc = std::abs(p - c);
      add = pa <= pb && pa <= pc ? a : pb <= pc ? b : c;
    }
    if (type < 0 || type > 4) throw std::runtime_error("PNG: unknown filter type");
    row[i] = static_cast<std::uint8_t>(row[i] + add);
  }
}

}  // namespace

std::size_t Image::count(std::uint32_t rgb, int tolerance) const {
  std::size_t n = 0;
  for (std::size_t p = 0; p < rgba.size() / 4; ++p) n += near(*this, p, rgb, tolerance) ? 1 : 0;
  return n;
}

std::size_t Image::count_unlike_background(int tolerance) const {
  const std::uint32_t bg = static_cast<std::uint32_t>(channel(*this, 0, 0)) << 16 |
                           static_cast<std::uint32_t>(channel(*this, 0, 1)) << 8 |
                           static_cast<std::uint32_t>(channel(*this, 0, 2));
  return rgba.size() / 4 - count(bg, tolerance);
}

namespace {

// What a PNG's chunks say: its size and colour type (IHDR) and its compressed rows (IDAT).
struct PngChunks {
  int width = 0, height = 0, colour = -1;
  std::string idat;
};

PngChunks read_chunks(const std::string& s) {
  PngChunks png;
  for (std::size_t at = 8; at + 8 <= s.size();) {
    const std::uint32_t len = big_endian(s, at);
    const std::string type = s.substr(at + 4, 4);
    if (type == "IHDR") {
      png.width = static_cast<int>(big_endian(s, at + 8));
      png.height = static_cast<int>(big_endian(s, at + 12));
      png.colour = s.at(at + 17);
      if (s.at(at + 16) != 8 || (png.colour != 2 && png.colour != 6) || s.at(at + 20) != 0) {
        throw std::runtime_error("PNG: only 8-bit RGB or RGBA, not interlaced, is read here");
      }
    }
    if (type == "IDAT") png.idat += s.substr(at + 8, len);
    if (type == "IEND") break;
    at += 12 + std::size_t{len};
  }
  if (png.colour < 0) throw std::runtime_error("PNG: no IHDR chunk");
  return png;
}

}  // namespace

Image read_png(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  const std::string s((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (s.rfind("\x89PNG\r\n\x1a\n", 0) != 0) throw std::runtime_error("not a PNG: " + file.string());
  const PngChunks png = read_chunks(s);
  const std::size_t bpp = png.colour == 6 ? 4 : 3;
  const std::size_t stride = bpp * static_cast<std::size_t>(png.width);
  std::vector<std::uint8_t> raw((stride + 1) * static_cast<std::size_t>(png.height));
  uLongf raw_len = raw.size();
  if (uncompress(raw.data(), &raw_len, reinterpret_cast<const Bytef*>(png.idat.data()),
                 png.idat.size()) != Z_OK ||
      raw_len != raw.size()) {
    throw std::runtime_error("PNG: damaged image data in " + file.string());
  }
  Image im{png.width, png.height, {}};
  im.rgba.reserve(static_cast<std::size_t>(png.width) * png.height * 4);
  const std::vector<std::uint8_t> zeros(stride, 0);
  for (int y = 0; y < png.height; ++y) {
    std::uint8_t* row = raw.data() + static_cast<std::size_t>(y) * (stride + 1);
    unfilter(row[0], row + 1, y == 0 ? zeros.data() : row - stride, stride, bpp);
    for (std::size_t i = 0; i < stride; i += bpp) {
      im.rgba.insert(im.rgba.end(), {row[1 + i], row[2 + i], row[3 + i],
                                     static_cast<std::uint8_t>(bpp == 4 ? row[4 + i] : 255)});
    }
  }
  return im;
}

}  // namespace convlab::test
