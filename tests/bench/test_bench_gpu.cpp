// `convlab bench` on a GPU: a real run of the staff solutions writes a well-formed JSON report
// with a row per layer, positive times and checks that passed, and prints the per-layer table;
// launchers that are wrong (fast or right only once), stubs and failures get the row they
// deserve. Benchmarks are not timed tests: nothing here depends on how fast anything is.
#include <doctest/doctest.h>

#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>

#include <cuda_runtime_api.h>

#include <iostream>

#include "reference/bench/bench_gpu.hpp"
#include "reference/bench/net_description.hpp"
#include "reference/conv/cudnn_conv.hpp"
#include "reference/conv/variants.hpp"
#include "reference/core/cuda_check.hpp"
#include "reference/core/error.hpp"
#include "tests/support/test_support.hpp"

namespace test_bench_gpu {

namespace {

using convlab::ConvShape;
using convlab::Precision;
using nlohmann::json;

struct Run {
  int code = 0;
  std::string output;
  json report;
  std::string svg;  // the roofline plot
};

Run bench(const std::string& args) {
  convlab::test::TempDir dir;
  const std::string file = (dir.path() / "bench.json").string();
  const std::string svg = (dir.path() / "roofline.svg").string();
  Run r;
  r.code = convlab::test::run_command(convlab::test::convlab_binary().string() + " bench " + args +
                                          " --json " + file + " --svg " + svg,
                                      &r.output);
  std::ifstream in(file);
  if (in) r.report = json::parse(in, nullptr, /*allow_exceptions=*/false);
  std::ifstream plot(svg);
  r.svg.assign(std::istreambuf_iterator<char>(plot), std::istreambuf_iterator<char>());
  return r;
}

std::size_t layers_of(const std::string& net) {
  return convlab::load_net(convlab::test::source_dir() / "datasets" / "nets" / (net + ".json"))
      .layers.size();
}

// Every layer of `r` has its roofline, cuDNN's fp32 figures and, for each variant, status ok
// with positive times; the plot has a point for each.
void check_rows(const Run& r, std::size_t layers, std::size_t variants) {
  REQUIRE(r.report.is_object());
  const json& m = r.report.at("machine");
  CHECK(m.at("fp32_peak_flops").get<double>() > 1e11);
  CHECK(m.at("memory_bandwidth_bytes_per_s").get<double>() > 1e10);
  CHECK(m.at("memory_bandwidth_theoretical_bytes_per_s").get<double>() > 1e10);
  // Stores alone: above a copy's per-direction rate, under the bus's theoretical rate.
  const double write = m.at("write_bandwidth_bytes_per_s").get<double>();
  CHECK(write > 0.5 * m.at("memory_bandwidth_bytes_per_s").get<double>());
  CHECK(write < m.at("memory_bandwidth_theoretical_bytes_per_s").get<double>());
  CHECK(m.at("clock_hz").get<double>() > 1e8);
  CHECK(!m.at("gpu").get<std::string>().empty());
  // The measured SGEMM peak stays under the physical one, where the GPU is in the table.
  const double physical = m.at("physical_peak_flops").at("fp32").get<double>();
  if (physical > 0) CHECK(m.at("fp32_peak_flops").get<double>() < physical);
  REQUIRE(r.report.at("layers").size() == layers);
  CHECK(r.svg.find("<svg") == 0);
  CHECK(r.svg.find("<g class=\"point cudnn\">") != std::string::npos);
  for (const json& layer : r.report.at("layers")) {
    CAPTURE(layer.at("name").get<std::string>());
    CHECK(layer.at("roofline").at("intensity").get<double>() > 0);
    if (physical > 0) CHECK(layer.at("roofline").at("bounds").at("fp32").at("seconds") > 0);
    const json& cu = layer.at("cudnn").at("fp32");
    CHECK(cu.at("min_s").get<double>() > 0);
    CHECK(cu.at("median_s").get<double>() >= cu.at("min_s").get<double>());
    CHECK(!cu.at("algorithm").get<std::string>().empty());
    CHECK(cu.at("math") != "TENSOR_OP");
    CHECK(!cu.at("candidates").empty());
    REQUIRE(layer.at("variants").size() == variants);
    for (const json& v : layer.at("variants")) {
      CAPTURE(v.dump());
      CHECK(v.at("status") == "ok");
      CHECK(v.at("min_s").get<double>() > 0);
      CHECK(v.at("max_s").get<double>() >= v.at("median_s").get<double>());
      CHECK(v.at("samples_s").size() == r.report.at("runs").get<std::size_t>());
      CHECK(v.at("check").at("ok") == true);
      CHECK(v.at("gflops").get<double>() > 0);
      // Each variant in its declared class, with cuDNN of that class measured beside it.
      const std::string cls(
          convlab::precision_name(convlab::find_variant(v.at("variant").get<std::string>()).precision));
      CHECK(v.at("precision") == cls);
      REQUIRE(layer.at("cudnn").contains(cls));
      CHECK(layer.at("cudnn").at(cls).at("min_s").get<double>() > 0);
      if (physical > 0) CHECK(v.at("percent_of_bound").get<double>() > 0);
    }
  }
}

}  // namespace

// The staff solutions are left out of the student release: these two are skipped there.
TEST_CASE("bench of the project's layer: a row per layer, positive times, correct output" *
          doctest::skip(!convlab::solutions_available())) {
  const Run r = bench("--net ece408 --batch 64 --runs 2 --impl solution");
  CAPTURE(r.output);
  CHECK(r.code == 0);
  CHECK(r.output.find("variant best") != std::string::npos);
  CHECK(r.output.find("conv1") != std::string::npos);
  CHECK(r.output.find("measured (cuBLAS SGEMM") != std::string::npos);
  CHECK(r.output.find("GB/s theoretical") != std::string::npos);
  CHECK(r.output.find("fp32 bound (ms)") != std::string::npos);
  CHECK(r.output.find("roofline plot: ") != std::string::npos);
  check_rows(r, layers_of("ece408"), 1);
  CHECK(r.report.at("batch") == 64);
  CHECK(r.report.at("layers").at(0).at("shape").at("B") == 64);
  CHECK(r.report.at("l2_flush") == true);
}

TEST_CASE("bench of every variant on a two-layer net, --no-flush" *
          doctest::skip(!convlab::solutions_available())) {
  const Run r =
      bench("--net two-conv --batch 32 --runs 1 --variant all --impl solution --no-flush");
  CAPTURE(r.output);
  CHECK(r.code == 0);
  std::size_t n = 0;
  for (const convlab::GpuVariant& v : convlab::gpu_variants()) {
    // A variant on host memory is timed by convlab run (Layer Time), never by the bench.
    const bool host = convlab::find_variant(v.name).host();
    CHECK((r.output.find("variant " + std::string(v.name) + " (") != std::string::npos) == !host);
    n += host ? 0 : 1;
  }
  check_rows(r, layers_of("two-conv"), n);
  CHECK(r.report.at("l2_flush") == false);
}

// Every variant that declares a parameter grid: a row per point, each checked, and the best.
TEST_CASE("sweep of every staff grid on a two-layer net" *
          doctest::skip(!convlab::solutions_available())) {
  int swept = 0;
  for (const convlab::Variant& v : convlab::variants()) {
    if (!v.sweep) continue;
    CAPTURE(v.id);
    convlab::test::TempDir dir;
    const std::string file = (dir.path() / "sweep.json").string();
    Run r;
    r.code = convlab::test::run_command(
        convlab::test::convlab_binary().string() + " sweep --variant " + std::string(v.id) +
            " --net two-conv --batch 32 --runs 2 --impl solution --json " + file,
        &r.output);
    CAPTURE(r.output);
    CHECK(r.code == 0);
    const auto points = convlab::find_gpu_variant(v.id).sweep(convlab::Impl::solution)();
    REQUIRE(points.size() >= 2);
    for (const convlab::SweepPoint& p : points) {
      CHECK(r.output.find(p.params) != std::string::npos);
    }
    CHECK(r.output.find("best point: ") != std::string::npos);
    CHECK(r.output.find("cuDNN (" + std::string(convlab::precision_name(v.precision)) + ")") != std::string::npos);
    std::ifstream in(file);
    const json report = json::parse(in);
    REQUIRE(report.at("layers").size() == layers_of("two-conv"));
    for (const json& layer : report.at("layers")) {
      REQUIRE(layer.at("variants").size() == points.size());
      for (const json& point : layer.at("variants")) {
        CHECK(point.at("status") == "ok");
        CHECK(point.at("check").at("ok") == true);
      }
    }
    ++swept;
  }
  CHECK(swept > 0);
}

namespace {

// Launchers with the variants' signature, each wrong in its own way.
int lazy_calls = 0;
void lazy(float* y, const float* x, const float* k, const ConvShape& s, cudaStream_t stream) {
  if (lazy_calls++ == 0) convlab::conv_forward_cudnn(y, x, k, s, stream);  // right once only
}
void zeros(float* y, const float*, const float*, const ConvShape& s, cudaStream_t stream) {
  CUDA_CHECK(cudaMemsetAsync(y, 0, static_cast<std::size_t>(s.y_elements()) * sizeof(float),
                             stream));  // as fast as it gets, and wrong
}
void stub(float*, const float*, const float*, const ConvShape&, cudaStream_t) {
  convlab::not_implemented("a stub", "student/final/9_stub.cu", "nowhere");
}
void unsupported(float*, const float*, const float*, const ConvShape&, cudaStream_t) {
  throw convlab::Error("this shape is not supported");
}

}  // namespace

TEST_CASE("wrong, lazy, unwritten and failing launchers get their own rows; the others go on") {
  const convlab::NetDescription net = convlab::parse_net(
      R"({"name": "odd", "batch": 3, "layers": [
          {"name": "a", "C": 3, "M": 5, "H": 20, "W": 18, "K": 3},
          {"name": "b", "C": 2, "M": 4, "H": 9, "W": 11, "K": 5}]})",
      "odd.json");
  const std::vector<convlab::BenchCandidate> candidates{
      {"cudnn", "reference/conv/cudnn_conv.cu", &convlab::conv_forward_cudnn, Precision::fp32},
      {"zeros", "here", &zeros, Precision::fp32},
      {"lazy", "here", &lazy, Precision::fp32},
      {"stub", "here", &stub, Precision::fp32},
      {"unsupported", "here", &unsupported, Precision::fp32},
      // A tf32-class candidate: compared with cuDNN of its class (TENSOR_OP math).
      {"as_tf32", "here", &convlab::conv_forward_cudnn, Precision::tf32},
      // An fp16-class one: compared with cuDNN on half data.
      {"as_fp16", "here", &convlab::conv_forward_cudnn, Precision::fp16}};
  convlab::BenchOptions opt;
  opt.runs = 2;
  const convlab::BenchReport r =
      convlab::measure_bench(net, net.shapes(net.batch), candidates, opt, std::cerr);
  REQUIRE(r.layers.size() == 2);
  for (const convlab::LayerResult& layer : r.layers) {
    CAPTURE(layer.name);
    REQUIRE(layer.variants.size() == candidates.size());
    REQUIRE(layer.cudnn.size() == 3);
    CHECK(layer.cudnn_for(Precision::fp32).time.min_s > 0);
    CHECK(layer.cudnn_for(Precision::fp32).check.ok);
    CHECK(layer.cudnn_for(Precision::fp32).math == "FMA");
    // tf32: measured and within its class's tolerance of the fp32 oracle.
    CHECK(layer.cudnn_for(Precision::tf32).not_measured.empty());
    CHECK(layer.cudnn_for(Precision::tf32).time.min_s > 0);
    CHECK(layer.cudnn_for(Precision::tf32).check.ok);
    // fp16: measured on half data, within its class's tolerance of the fp32 oracle.
    CHECK(layer.cudnn_for(Precision::fp16).not_measured.empty());
    CHECK(layer.cudnn_for(Precision::fp16).time.min_s > 0);
    CHECK(layer.cudnn_for(Precision::fp16).check.ok);
    const auto& v = layer.variants;
    CHECK(v[0].status == convlab::BenchStatus::ok);
    CHECK(v[0].time.samples_s.size() == 2);
    CHECK(v[1].status == convlab::BenchStatus::wrong);
    CHECK(v[1].check.mismatches > 0);
    CHECK(v[1].check.first_mismatch.find("y[") == 0);
    CHECK(v[3].status == convlab::BenchStatus::not_implemented);
    CHECK(v[3].message.find("student/final/9_stub.cu") != std::string::npos);
    CHECK(v[4].status == convlab::BenchStatus::error);
    CHECK(v[4].message == "this shape is not supported");
    CHECK(v[5].status == convlab::BenchStatus::ok);
    CHECK(v[6].status == convlab::BenchStatus::ok);
  }
  // Right on its first call (layer a), never again: caught by the check of the last timed run.
  CHECK(r.layers[0].variants[2].status == convlab::BenchStatus::wrong);
  CHECK(r.layers[0].variants[2].message.find("last timed run") != std::string::npos);
  CHECK(r.layers[1].variants[2].status == convlab::BenchStatus::wrong);

  const std::string text = convlab::format_bench_report(r);
  CHECK(text.find("zeros, a: WRONG") != std::string::npos);
  CHECK(text.find("unsupported, b: error: this shape is not supported") != std::string::npos);
  CHECK(text.find("variant as_tf32 (here), tf32 class") != std::string::npos);
  CHECK(text.find("cuDNN tf32, a: not measured") == std::string::npos);
  CHECK(text.find("cuDNN fp16, a: not measured") == std::string::npos);
  CHECK(text.find("variant as_fp16 (here), fp16 class") != std::string::npos);
  CHECK(convlab::bench_exit_code(r) == 3);
}

// A variant on host memory has no kernel time on device data: the bench says where its time is.
TEST_CASE("bench refuses a variant that takes host memory, naming convlab run") {
  int host_variants = 0;
  for (const convlab::Variant& v : convlab::variants()) {
    if (!v.host()) continue;
    ++host_variants;
    const Run r = bench("--net two-conv --batch 8 --runs 1 --variant " + std::string(v.id));
    CAPTURE(r.output);
    CHECK(r.code == 1);
    CHECK(r.output.find("takes host memory") != std::string::npos);
    CHECK(r.output.find("convlab run final MODEL --variant " + std::string(v.id)) !=
          std::string::npos);
  }
  CHECK(host_variants > 0);
}

}  // namespace test_bench_gpu
