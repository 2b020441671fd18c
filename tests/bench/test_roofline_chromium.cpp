// The roofline plot as a browser shows it: headless Chromium parses the SVG file (an XML error
// would replace it with an error page), its DOM holds every point and line, and the screenshot,
// left in the build tree (roofline.png) for a person to look at, shows the drawing in its
// colours.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "reference/bench/bench_report.hpp"
#include "reference/bench/roofline_svg.hpp"
#include "tests/bench/sample_report.hpp"
#include "tests/support/browser.hpp"
#include "tests/support/test_support.hpp"

namespace test_roofline_chromium {

using namespace convlab;
namespace fs = std::filesystem;

TEST_CASE("the roofline plot renders in headless Chromium") {
  test::require_chromium();
  // The folder it runs in (ctest: tests/bench of the build tree), for a person to look at.
  const fs::path out = fs::current_path();
  const fs::path file = out / "roofline.svg", dom = out / "roofline.dom.xml",
                 png = out / "roofline.png", log = out / "chromium.log";
  fs::remove(dom);
  fs::remove(png);
  const std::string svg =
      roofline_svg(roofline_chart({{"sample", bench_report_json(test::sample_report(), "0.1.0")}}));
  std::ofstream(file, std::ios::binary) << svg;

  const std::string url = "file://" + file.string();
  const std::string d = test::dump_dom(url, dom, log);
  CAPTURE(d.substr(0, 400));
  // Parsed as SVG: the root element is there and no parser error took its place.
  CHECK(d.find("<svg") != std::string::npos);
  CHECK(d.find("parsererror") == std::string::npos);
  CHECK(d.find("This page contains the following errors") == std::string::npos);
  CHECK(test::occurrences(d, "<g class=\"point ours\">") == 3);
  CHECK(test::occurrences(d, "<g class=\"point cudnn\">") == 2);
  CHECK(test::occurrences(d, "<line class=\"roof ") == 5);
  CHECK(d.find("two-conv conv2, tensor (tf32)") != std::string::npos);

  test::screenshot(url, png, 920, 600);
  const test::Image shot = test::read_png(png);
  CHECK(shot.width == 920);
  CHECK(shot.height == 600);
  // Not blank: text, grid, lines and markers cover a good part of the white page ...
  CHECK(shot.count_unlike_background(16) > 8000);
  // ... in their colours: the fp32 class (ceiling, circles), tf32 (ceiling, circles), the
  // slope's dark ink.
  CHECK(shot.count(0x0072B2, 40) > 300);
  CHECK(shot.count(0x009E73, 40) > 300);
  CHECK(shot.count(0x1F2328, 40) > 300);
  MESSAGE("screenshot: " << png.string());
}

}  // namespace test_roofline_chromium
