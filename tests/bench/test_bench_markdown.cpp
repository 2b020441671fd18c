// The Markdown page of bench reports (docs/perf/GPU.md are such pages), written from their JSON.
#include <doctest/doctest.h>

#include <string>

#include "reference/bench/bench_markdown.hpp"
#include "reference/bench/bench_report.hpp"
#include "reference/core/error.hpp"
#include "tests/bench/sample_report.hpp"

namespace test_bench_markdown {

namespace {

using convlab::BenchJson;

std::string sample_json() {
  return convlab::bench_report_json(convlab::test::sample_report(), "0.1.0");
}

std::string tables() {
  return convlab::bench_markdown({{"sample", sample_json()}});
}

}  // namespace

TEST_CASE("the layer table names each layer's fastest correct fp32 variant against cuDNN fp32") {
  const std::string t = tables();
  CHECK(t.find("## `--net two-conv`") != std::string::npos);
  CHECK(t.find("1 warm-up call, then 3 timed runs, L2 flushed before each") != std::string::npos);
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

TEST_CASE("the page names its GPU, its sources, the machine's ceilings and the plot") {
  const std::string t =
      convlab::bench_markdown({{"a", sample_json()}, {"b", sample_json()}},
                              {{"H100/bench-a.json", "H100/bench-b.json"}, "H100/roofline.svg"});
  CHECK(t.find("# Bench figures: NVIDIA H100 80GB HBM3\n") == 0);
  CHECK(t.find("from the bench reports of [`two-conv`](H100/bench-a.json) and "
               "[`two-conv`](H100/bench-b.json) (the staff solutions)") != std::string::npos);
  CHECK(
      t.find("| NVIDIA H100 80GB HBM3 | 9.0 | 132 | 1980 | 50.0 | 580.159.04 | 13.0 | 9.14.0 |") !=
      std::string::npos);
  CHECK(t.find("fp32 66.9, tf32 535.3, fp16 1070.5; theoretical memory bandwidth 3352 GB/s") !=
        std::string::npos);
  // Each run's measured ceilings; the ridge is the physical fp32 peak over the copy bandwidth.
  CHECK(t.find("| `two-conv` | 51.7 | 2800 | 3160 | 23.9 |") != std::string::npos);
  CHECK(t.find("![Roofline on the NVIDIA H100 80GB HBM3](H100/roofline.svg)") != std::string::npos);
  // Without links: the nets named, no plot.
  const std::string bare = tables();
  CHECK(bare.find("from the bench reports of `two-conv` (the staff solutions)") !=
        std::string::npos);
  CHECK(bare.find("## Roofline") == std::string::npos);
  // The same reports give the same bytes.
  CHECK(tables() == bare);
}

TEST_CASE("a page holds the reports of one GPU") {
  convlab::BenchReport other = convlab::test::sample_report();
  other.machine.gpu = "NVIDIA H200";
  CHECK_THROWS_WITH_AS(
      convlab::bench_markdown(
          {{"a.json", sample_json()}, {"b.json", convlab::bench_report_json(other, "0.1.0")}}),
      doctest::Contains("b.json: measured on NVIDIA H200, the first report on NVIDIA H100 80GB "
                        "HBM3: a page holds the reports of one GPU"),
      convlab::Error);
}

TEST_CASE("text that is not a bench report is refused, naming where it came from") {
  CHECK_THROWS_WITH_AS(convlab::bench_markdown({}), doctest::Contains("no bench report"),
                       convlab::Error);
  CHECK_THROWS_WITH_AS(convlab::bench_markdown({{"a.json", "{\"command\": \"run\"}"}}),
                       doctest::Contains("a.json: not a convlab bench report"), convlab::Error);
  CHECK_THROWS_WITH_AS(convlab::bench_markdown({{"b.json", "{\"command\": \"bench\"}"}}),
                       doctest::Contains("b.json: not a bench report this convlab can read"),
                       convlab::Error);
}

}  // namespace test_bench_markdown
