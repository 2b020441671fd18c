// The roofline plot from bench JSON, without a browser: a point per correct run in the marker
// of its kind, the ceilings and the slope as lines, every point titled and inside the frame,
// names escaped, and one clear error for reports it cannot draw.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>
#include <regex>
#include <string>

#include "reference/bench/bench_report.hpp"
#include "reference/bench/roofline_svg.hpp"
#include "reference/core/error.hpp"
#include "tests/bench/sample_report.hpp"
#include "tests/support/test_support.hpp"

namespace test_roofline_svg {

using namespace convlab;

namespace {

BenchJson sample_json(const BenchReport& r, const std::string& origin = "sample.json") {
  return {origin, bench_report_json(r, "0.1.0")};
}

std::string error_of(const std::vector<BenchJson>& reports) {
  try {
    roofline_chart(reports);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("the chart of a report: its GPU's ceilings and a point per correct timed run") {
  const RooflineChart c = roofline_chart({sample_json(test::sample_report())});
  CHECK(c.gpu == "NVIDIA H100 80GB HBM3");
  CHECK(c.nets == std::vector<std::string>{"two-conv"});
  CHECK(c.ceilings.fp32 == doctest::Approx(66.9e12).epsilon(1e-3));
  CHECK(c.ceilings.bandwidth == 2.8e12);
  CHECK(c.sgemm_peak == 51.7e12);
  // conv1: cuDNN, direct, tensor; conv2: cuDNN, tensor (direct is WRONG there, tiled a stub).
  REQUIRE(c.points.size() == 5);
  const RooflinePoint& direct = c.points.at(1);
  CHECK(direct.layer == "two-conv conv1");
  CHECK(direct.implementation == "direct");
  CHECK(!direct.library);
  CHECK(direct.flops_per_s == doctest::Approx(2.304e9 / 4e-3));
  CHECK(direct.intensity == doctest::Approx(10.68).epsilon(1e-3));
  CHECK(direct.percent_of_bound == doctest::Approx(1.926).epsilon(1e-3));
  CHECK(c.points.at(0).library);
  CHECK(c.points.at(0).implementation == "cuDNN IMPLICIT_PRECOMP_GEMM");
  CHECK(c.points.at(2).precision == Precision::tf32);
}

TEST_CASE("the SVG: markers, lines, titles, accessible, inside its frame") {
  const std::string svg = roofline_svg(roofline_chart({sample_json(test::sample_report())}));
  CHECK(svg.rfind("<svg xmlns=\"http://www.w3.org/2000/svg\"", 0) == 0);
  CHECK(svg.find("role=\"img\"") != std::string::npos);
  CHECK(svg.find("aria-labelledby=\"roofline-title roofline-desc\"") != std::string::npos);
  CHECK(svg.find("<script") == std::string::npos);
  CHECK(test::occurrences(svg, "<g class=\"point ours\">") == 3);
  CHECK(test::occurrences(svg, "<g class=\"point cudnn\">") == 2);
  // The memory slope, the fp32, tf32 and fp16 ceilings, the measured SGEMM peak.
  CHECK(test::occurrences(svg, "<line class=\"roof ") == 5);
  CHECK(test::occurrences(svg, "<line class=\"roof slope\"") == 1);
  CHECK(test::occurrences(svg, "<line class=\"roof ceiling measured\"") == 1);
  CHECK(svg.find("fp32 peak, physical: 66.9 TFLOP/s") != std::string::npos);
  CHECK(svg.find("tf32 peak, physical: 535.3 TFLOP/s") != std::string::npos);
  CHECK(svg.find("fp32 SGEMM, measured: 51.7 TFLOP/s") != std::string::npos);
  CHECK(svg.find("memory: 2.80 TB/s<") != std::string::npos);
  CHECK(svg.find("<title>two-conv conv1, direct (fp32): 4 ms, 0.58 TFLOP/s at 10.7 flops per "
                 "byte, 1.9% of the fp32 bound</title>") != std::string::npos);
  CHECK(svg.find("variant (ours)") != std::string::npos);
  CHECK(svg.find("cuDNN, same class") != std::string::npos);

  // Every marker lies in the plot area (84..890 x 70..530).
  const std::regex centre(R"rx(<circle cx="([0-9.]+)" cy="([0-9.]+)" r="5" fill)rx");
  std::size_t markers = 0;
  for (auto it = std::sregex_iterator(svg.begin(), svg.end(), centre); it != std::sregex_iterator();
       ++it, ++markers) {
    const double x = std::stod((*it)[1]), y = std::stod((*it)[2]);
    CHECK(x >= 84);
    CHECK(x <= 890);
    CHECK(y >= 70);
    CHECK(y <= 530);
  }
  CHECK(markers == 4);  // three variants' points and the legend's circle
}

TEST_CASE("several reports of one GPU share a plot; names are escaped") {
  BenchReport second = test::sample_report();
  second.net = "lenet";
  second.layers.at(0).name = "a<b>&\"c\"";
  const RooflineChart c =
      roofline_chart({sample_json(test::sample_report()), sample_json(second, "second.json")});
  CHECK(c.nets == std::vector<std::string>{"two-conv", "lenet"});
  CHECK(c.points.size() == 10);
  const std::string svg = roofline_svg(c);
  CHECK(svg.find("two-conv, lenet") != std::string::npos);
  CHECK(svg.find("lenet a&lt;b&gt;&amp;&quot;c&quot;, direct") != std::string::npos);
  CHECK(svg.find("a<b>") == std::string::npos);
}

TEST_CASE("reports the plot cannot draw: one clear error naming the file") {
  BenchReport other = test::sample_report();
  other.machine.gpu = "NVIDIA A100-SXM4-40GB";
  CHECK(error_of({sample_json(test::sample_report()), sample_json(other, "a100.json")})
            .find("a100.json: measured on NVIDIA A100-SXM4-40GB, the first report on NVIDIA "
                  "H100 80GB HBM3") == 0);
  CHECK(error_of({{"x.json", "{"}}).find("x.json: not a bench report this convlab can draw") == 0);
  CHECK(error_of({{"run.json", R"({"command": "run"})"}})
            .find("run.json: not a convlab bench report") == 0);
  nlohmann::json old = nlohmann::json::parse(sample_json(test::sample_report()).text);
  old.at("machine").erase("physical_peak_flops");
  CHECK(error_of({{"old.json", old.dump()}}).find("old.json: not a bench report this convlab") ==
        0);
  nlohmann::json bf16 = nlohmann::json::parse(sample_json(test::sample_report()).text);
  bf16.at("layers").at(0).at("variants").at(0).at("precision") = "bf16";
  CHECK(error_of({{"bf16.json", bf16.dump()}}).find("bf16.json: unknown precision class 'bf16'") ==
        0);
  BenchReport slow_net = test::sample_report();
  slow_net.machine.hbm_bandwidth = 0;
  CHECK(error_of({sample_json(slow_net, "nobw.json")})
            .find("nobw.json: the report has no "
                  "measured memory bandwidth") == 0);
  BenchReport nothing = test::sample_report();
  for (LayerResult& l : nothing.layers) {
    l.cudnn.at(0).not_measured = "skipped";
    for (VariantResult& v : l.variants) v.status = BenchStatus::wrong;
  }
  CHECK(error_of({sample_json(nothing)}).find("nothing to plot: no layer of two-conv") == 0);
}

}  // namespace test_roofline_svg
