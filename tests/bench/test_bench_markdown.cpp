// The Markdown tables of docs/performance.md, written from bench reports' JSON.
#include <doctest/doctest.h>

#include <string>

#include "reference/bench/bench_markdown.hpp"
#include "reference/bench/bench_report.hpp"
#include "reference/core/error.hpp"
#include "tests/bench/sample_report.hpp"

namespace {

using convlab::BenchJson;

std::string tables() {
  return convlab::bench_markdown(
      {{"sample", convlab::bench_report_json(convlab::test::sample_report(), "0.1.0")}});
}

}  // namespace

TEST_CASE("the layer table names each layer's fastest correct fp32 variant against cuDNN fp32") {
  const std::string t = tables();
  CHECK(t.find("### `--net two-conv`") == 0);
  CHECK(t.find("NVIDIA H100 80GB HBM3, driver 580.159.04") != std::string::npos);
  CHECK(t.find("3 timed runs per layer, L2 flushed") != std::string::npos);
  // conv1: direct (4 ms) is right, tensor (0.5 ms) is tf32: direct is the fp32 row, 2 / 4 = 0.5.
  CHECK(t.find("| conv1 | C=1 M=8 K=5 28x28 | 2.30 | 10.7 | ") != std::string::npos);
  CHECK(t.find("| 2.000 | 2.100 | IMPLICIT_PRECOMP_GEMM | direct | 4.000 | 4.200 | 0.50 |") !=
        std::string::npos);
  // conv2: direct is WRONG there, the stub never ran: no fp32 variant to show.
  CHECK(t.find("| IMPLICIT_PRECOMP_GEMM | - | - | - | - |") != std::string::npos);
}

TEST_CASE("the variant table totals a net only when every layer was right") {
  const std::string t = tables();
  // direct: wrong on conv2, so no total; the stub: nothing; tensor: cuDNN tf32 not measured.
  CHECK(t.find("| direct | fp32 | - | - | 4.000 | - | - | 1 of 2 |") != std::string::npos);
  CHECK(t.find("| tiled | fp32 | - | - | 4.000 | - | - | 0 of 2 |") != std::string::npos);
  CHECK(t.find("| tensor | tf32 | 1.000 | 1.050 | - | - | ") != std::string::npos);
  CHECK(t.find("| 2 of 2 |") != std::string::npos);
}

TEST_CASE("text that is not a bench report is refused, naming where it came from") {
  CHECK_THROWS_WITH_AS(convlab::bench_markdown({{"a.json", "{\"command\": \"run\"}"}}),
                       doctest::Contains("a.json: not a convlab bench report"), convlab::Error);
  CHECK_THROWS_WITH_AS(convlab::bench_markdown({{"b.json", "{\"command\": \"bench\"}"}}),
                       doctest::Contains("b.json: not a bench report this convlab can read"),
                       convlab::Error);
}
