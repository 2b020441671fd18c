/// @file
/// @brief Looking at a page or a picture as a person would: headless Chromium (Debian's
/// `chromium` package) dumps the DOM and takes screenshots, and a small PNG reader lets a test
/// check that the screenshot shows what was drawn. For the leaderboard page and the roofline plot.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace convlab::test {

/// Where Debian installs Chromium.
inline const std::filesystem::path kChromium = "/usr/bin/chromium";

/// Skips the test binary (exit 77, reason printed) when Chromium is not installed.
void require_chromium();

/// The start of a headless Chromium command line with its own profile in `profile`: no sandbox
/// (tests may run as root in a container), no GPU (none is needed to draw), a 120 s limit.
std::string chromium_command(const std::filesystem::path& profile);

/// The DOM that headless Chromium builds for `url` (--dump-dom), in a fresh profile; kept in
/// the file `dom`, Chromium's messages in `log`. The test fails when Chromium does.
std::string dump_dom(const std::string& url, const std::filesystem::path& dom,
                     const std::filesystem::path& log);

/// A `width` x `height` screenshot of `url` into `png`, in a fresh profile. The test fails when
/// Chromium does.
void screenshot(const std::string& url, const std::filesystem::path& png, int width, int height);

/// A decoded picture, 8 bits per channel, RGBA, row by row.
struct Image {
  int width = 0;
  int height = 0;
  std::vector<std::uint8_t> rgba;  ///< width * height * 4 bytes

  /// The pixels within `tolerance` of the colour `rgb` (0xRRGGBB) in every channel.
  std::size_t count(std::uint32_t rgb, int tolerance) const;
  /// The pixels that differ from the top-left one (the background) by more than `tolerance`.
  std::size_t count_unlike_background(int tolerance) const;
};

/// Reads an 8-bit RGB or RGBA, non-interlaced PNG (what Chromium's screenshots are); throws
/// std::runtime_error for anything else or a damaged file.
Image read_png(const std::filesystem::path& file);

}  // namespace convlab::test
