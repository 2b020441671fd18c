// `convlab bench` without a GPU: the network descriptions in datasets/nets (their shapes
// checked against the model files and against VGG-16's published structure), clear errors for
// bad description files, and the report's statistics, checks and formats.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "reference/bench/bench_report.hpp"
#include "reference/bench/net_description.hpp"
#include "reference/core/error.hpp"
#include "reference/model/model.hpp"
#include "tests/bench/sample_report.hpp"
#include "tests/support/test_support.hpp"

namespace test_bench_nets {

namespace {

namespace fs = std::filesystem;
using convlab::ConvShape;
using convlab::Error;
using convlab::NetDescription;

fs::path nets_dir() {
  return convlab::test::source_dir() / "datasets" / "nets";
}

NetDescription load(const std::string& name) {
  return convlab::load_net(nets_dir() / (name + ".json"));
}

// The message of the Error that `f` throws ("" if it throws none).
template <typename F>
std::string error_of(F f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

std::string parse_error(const std::string& text) {
  return error_of([&] { convlab::parse_net(text, "broken.json"); });
}

// A valid description with one layer whose body is `layer` (a JSON object's members).
std::string with_layer(const std::string& layer) {
  return R"({"name": "t", "batch": 4, "layers": [{"name": "conv1", )" + layer + "}]}";
}

}  // namespace

TEST_CASE("every description in datasets/nets loads, under its own file name") {
  const std::vector<std::string> names = convlab::net_names(nets_dir());
  CHECK(names == std::vector<std::string>{"ece408", "lenet", "odd-shapes", "random-layers",
                                          "two-conv", "vgg16"});
  for (const std::string& name : names) {
    CAPTURE(name);
    const NetDescription net = load(name);
    CHECK(net.name == name);
    CHECK(!net.description.empty());
    CHECK(net.batch >= 1);
    CHECK(!net.layers.empty());
    CHECK(net.shapes(net.batch).size() == net.layers.size());
  }
}

TEST_CASE("the project's nets have the shapes of their model files") {
  for (const std::string name : {"ece408", "two-conv"}) {
    CAPTURE(name);
    const NetDescription net = load(name);
    REQUIRE(!net.models.empty());
    for (const std::string& model_name : net.models) {
      CAPTURE(model_name);
      const convlab::Model model = convlab::load_model(convlab::test::source_dir() / "datasets" /
                                                       "models" / (model_name + ".safetensors"));
      CHECK(model.conv_shapes(net.batch) == net.shapes(net.batch));
    }
  }
  const NetDescription ece408 = load("ece408");
  CHECK(ece408.batch == 10000);
  CHECK(ece408.layers.at(0).shape == ConvShape{10000, 50, 1, 28, 28, 5});
}

TEST_CASE("lenet: the later editions' two layers, chained through a 2x2 pool") {
  const NetDescription net = load("lenet");
  REQUIRE(net.layers.size() == 2);
  CHECK(net.layers[0].shape == ConvShape{10000, 4, 1, 86, 86, 7});
  CHECK(net.layers[1].shape == ConvShape{10000, 16, 4, 40, 40, 7});
  CHECK(net.layers[0].shape.H_out() / 2 == net.layers[1].shape.H);
}

TEST_CASE("vgg16: the 13 conv layers of VGG-16 with the padding folded into the input") {
  const NetDescription net = load("vgg16");
  const std::vector<std::string> names{"conv1-1", "conv1-2", "conv2-1", "conv2-2", "conv3-1",
                                       "conv3-2", "conv3-3", "conv4-1", "conv4-2", "conv4-3",
                                       "conv5-1", "conv5-2", "conv5-3"};
  REQUIRE(net.layers.size() == names.size());
  const std::vector<int> pool_after{1, 3, 6, 9};  // pool1..pool4 follow these layers
  int channels = 3, size = 224;                   // RGB 224x224 in
  std::int64_t weights = 0;
  for (std::size_t i = 0; i < names.size(); ++i) {
    const ConvShape& s = net.layers[i].shape;
    CAPTURE(names[i]);
    CHECK(net.layers[i].name == names[i]);
    CHECK(s.K == 3);
    CHECK(s.C == channels);
    CHECK(s.H == size + 2);  // 3x3 with padding 1 keeps the size: input + 2 in valid terms
    CHECK(s.W == size + 2);
    CHECK(s.H_out() == size);
    channels = s.M;
    if (std::find(pool_after.begin(), pool_after.end(), static_cast<int>(i)) != pool_after.end()) {
      size /= 2;
    }
    weights += s.k_elements();
  }
  CHECK(channels == 512);
  CHECK(size == 14);  // conv5-x works on 14x14 maps
  // VGG-16's conv layers hold 14,714,688 parameters, of which 4,224 are biases.
  CHECK(weights == 14714688 - 4224);
  // About 15.3 GMACs per 224x224 image in the conv layers.
  double flops = 0;
  for (const ConvShape& s : net.shapes(1)) flops += s.flops();
  CHECK(flops == doctest::Approx(30.69e9).epsilon(0.001));
}

TEST_CASE("a description's batch can be changed, within int-addressable tensors") {
  const NetDescription net = load("vgg16");
  for (const ConvShape& s : net.shapes(3)) CHECK(s.B == 3);
  const std::string e = error_of([&] { net.shapes(100000); });
  CHECK(e.find("vgg16.json") != std::string::npos);
  CHECK(e.find("conv1-1") != std::string::npos);
  CHECK(e.find("smaller batch") != std::string::npos);
  CHECK(error_of([&] { net.shapes(0); }).find("positive") != std::string::npos);
}

TEST_CASE("bad description files give one clear error naming the file") {
  CHECK(parse_error("{").find("broken.json: not valid JSON") != std::string::npos);
  CHECK(parse_error("[1, 2]").find("broken.json: a network description is a JSON object") !=
        std::string::npos);
  CHECK(parse_error(R"({"batch": 4, "layers": []})").find("missing key 'name'") !=
        std::string::npos);
  CHECK(parse_error(R"({"name": "t", "layers": []})").find("missing key 'batch'") !=
        std::string::npos);
  CHECK(parse_error(R"({"name": "t", "batch": 4})").find("missing key 'layers'") !=
        std::string::npos);
  CHECK(parse_error(R"({"name": "t", "batch": 4, "layers": []})").find("non-empty array") !=
        std::string::npos);
  CHECK(parse_error(R"({"name": "t", "batch": 0, "layers": []})")
            .find("'batch' must be a positive integer, got 0") != std::string::npos);
  CHECK(parse_error(R"({"name": "t", "batch": 4, "layer": []})").find("unknown key 'layer'") !=
        std::string::npos);
  CHECK(parse_error(R"({"name": "t", "batch": 4, "models": "x", "layers": []})")
            .find("'models' must be an array") != std::string::npos);
  CHECK(parse_error(R"({"name": "t", "batch": 4, "layers": [7]})")
            .find("broken.json: layer 1 must be an object") != std::string::npos);
}

TEST_CASE("bad layer shapes give one clear error naming the file and the layer") {
  const std::string prefix = "broken.json: layer 1 (conv1): ";
  const auto err = [](const std::string& layer) { return parse_error(with_layer(layer)); };
  CHECK(err(R"("C": 1, "M": 2, "H": 5, "W": 5, "K": 6)") ==
        prefix +
            "the filter (K=6) is larger than the input (5x5); H and W are the input size, "
            "padding included");
  CHECK(err(R"("C": 0, "M": 2, "H": 5, "W": 5, "K": 3)") ==
        prefix + "'C' must be a positive integer, got 0");
  CHECK(err(R"("C": 1, "M": -2, "H": 5, "W": 5, "K": 3)") ==
        prefix + "'M' must be a positive integer, got -2");
  CHECK(err(R"("C": 1, "M": 2, "H": 5.5, "W": 5, "K": 3)") ==
        prefix + "'H' must be a positive integer, got 5.5");
  CHECK(err(R"("C": 1, "M": 2, "H": 5, "W": "5", "K": 3)") ==
        prefix + "'W' must be a positive integer, got \"5\"");
  CHECK(err(R"("C": 1, "M": 2, "H": 5, "W": 5)").find(prefix + "missing key 'K'") == 0);
  CHECK(err(R"("C": 1, "M": 2, "H": 5, "W": 5, "k": 3)").find(prefix + "unknown key 'k'") == 0);
  CHECK(
      err(R"("C": 1, "M": 2, "H": 5, "W": 5, "K": 3, "note": 1)").find("'note' must be a string") !=
      std::string::npos);
  const std::string twice = R"({"name": "t", "batch": 4, "layers": [
      {"name": "a", "C": 1, "M": 2, "H": 5, "W": 5, "K": 3},
      {"name": "a", "C": 2, "M": 2, "H": 3, "W": 3, "K": 3}]})";
  CHECK(parse_error(twice).find("broken.json: layer 2 (a): another layer has the same name") == 0);
  // A good one parses, with its note.
  const NetDescription ok = convlab::parse_net(
      with_layer(R"("C": 2, "M": 3, "H": 9, "W": 7, "K": 3, "note": "fine")"), "good.json");
  CHECK(ok.layers.at(0).shape == ConvShape{4, 3, 2, 9, 7, 3});
}

TEST_CASE("files: unreadable, broken on disk, found by name or path") {
  convlab::test::TempDir dir;
  const fs::path bad = dir.path() / "mine.json";
  std::ofstream(bad) << R"({"name": "mine", "batch": 2, "layers": [{"name": "c", "C": 1}]})";
  std::string e = error_of([&] { convlab::load_net(bad); });
  CHECK(e.find(bad.string() + ": layer 1 (c): missing key 'M'") == 0);
  e = error_of([&] { convlab::load_net(dir.path() / "absent.json"); });
  CHECK(e.find("cannot read the network description " + (dir.path() / "absent.json").string()) ==
        0);

  CHECK(convlab::find_net("vgg16", nets_dir()) == nets_dir() / "vgg16.json");
  CHECK(convlab::find_net(bad.string(), nets_dir()) == bad);
  e = error_of([&] { convlab::find_net("resnet", nets_dir()); });
  CHECK(e.find("unknown net 'resnet': choose one of ece408, lenet, odd-shapes, random-layers, "
               "two-conv, vgg16") == 0);
  e = error_of([&] { convlab::find_net("nets/absent.json", nets_dir()); });
  CHECK(e.find("network description nets/absent.json not found") == 0);
}

TEST_CASE("timing statistics: min, median, spread") {
  const convlab::TimingStats odd = convlab::summarize({3e-3, 1e-3, 2e-3});
  CHECK(odd.min_s == 1e-3);
  CHECK(odd.median_s == 2e-3);
  CHECK(odd.max_s == 3e-3);
  CHECK(odd.spread() == doctest::Approx(1.0));
  CHECK(odd.samples_s == std::vector<double>{3e-3, 1e-3, 2e-3});  // kept in run order
  const convlab::TimingStats even = convlab::summarize({4.0, 1.0, 2.0, 3.0});
  CHECK(even.median_s == 2.5);
  CHECK(convlab::summarize({5.0}).spread() == 0.0);
  CHECK(error_of([] { convlab::summarize({}); }) != "");
}

TEST_CASE("output check: tolerance grows with the sum's length; NaN and misplaced values fail") {
  const ConvShape s{2, 3, 4, 6, 5, 3};                                   // y is 2x3x4x3
  CHECK(convlab::tolerance_for(s).atol == doctest::Approx(1e-4 * 6.0));  // sqrt(4*3*3) = 6
  CHECK(convlab::tolerance_for(ConvShape{1, 50, 1, 28, 28, 5}).atol == doctest::Approx(5e-4));
  const convlab::Tolerance tol = convlab::tolerance_for(s);
  std::vector<float> ref(static_cast<std::size_t>(s.y_elements()));
  for (std::size_t i = 0; i < ref.size(); ++i) ref[i] = static_cast<float>(i) * 0.25f - 3.0f;

  std::vector<float> out = ref;
  for (float& v : out) v += 4e-4f;  // fp32-sized differences everywhere
  convlab::OutputCheck c = convlab::check_output(out, ref, s, tol);
  CHECK(c.ok);
  CHECK(c.mismatches == 0);
  CHECK(c.worst_error == doctest::Approx(4e-4).epsilon(0.01));

  out = ref;
  const std::size_t at = ((1 * 3 + 2) * 4 + 3) * 3 + 1;  // y[1][2][3][1]
  out[at] += 0.5f;
  out[at + 1] = std::numeric_limits<float>::quiet_NaN();  // an output never written
  c = convlab::check_output(out, ref, s, tol);
  CHECK(!c.ok);
  CHECK(c.mismatches == 2);
  CHECK(c.worst_error == doctest::Approx(0.5));
  CHECK(c.first_mismatch.find("y[1][2][3][1] = ") == 0);

  out.pop_back();
  CHECK(!convlab::check_output(out, ref, s, tol).ok);
}

TEST_CASE("the report: one table per variant, WRONG not celebrated, stubs shown, JSON complete") {
  convlab::BenchReport r = convlab::test::sample_report();
  const std::string text = convlab::format_bench_report(r);
  CAPTURE(text);
  CHECK(text.find("variant direct (reference/solutions/final/8_direct.cu), fp32 class") !=
        std::string::npos);
  CHECK(text.find("variant tiled") != std::string::npos);
  CHECK(text.find("variant tensor (reference/solutions/final/10_tensor.cu), tf32 class") !=
        std::string::npos);
  CHECK(text.find("cuDNN algorithm") != std::string::npos);
  CHECK(text.find("IMPLICIT_PRECOMP_GEMM") != std::string::npos);
  CHECK(text.find("3.0 MiB") != std::string::npos);
  CHECK(text.find("not implemented") != std::string::npos);
  CHECK(text.find("WRONG") != std::string::npos);
  CHECK(text.find("direct, conv2: WRONG: 17 of") != std::string::npos);
  // conv1 of the direct variant: 4 ms against cuDNN's 2 ms is a ratio of 0.50.
  CHECK(text.find(" 0.50 ") != std::string::npos);
  // cuDNN of the tf32 class is not measured yet: the tensor variant's rows say so.
  CHECK(text.find("not measured") != std::string::npos);
  CHECK(text.find("cuDNN tf32, conv1: not measured: ") != std::string::npos);
  CHECK(convlab::bench_exit_code(r) == 3);

  const nlohmann::json j = nlohmann::json::parse(convlab::bench_report_json(r, "0.1.0"));
  CHECK(j.at("command") == "bench");
  CHECK(j.at("net") == "two-conv");
  REQUIRE(j.at("layers").size() == 2);
  const auto& l1 = j.at("layers").at(0);
  CHECK(l1.at("shape").at("C") == 1);
  CHECK(l1.at("cudnn").at("fp32").at("min_s") == 2e-3);
  CHECK(l1.at("cudnn").at("fp32").at("algorithm") == "IMPLICIT_PRECOMP_GEMM");
  CHECK(l1.at("cudnn").at("tf32").contains("not_measured"));
  CHECK(l1.at("variants").at(0).at("status") == "ok");
  CHECK(l1.at("variants").at(0).at("precision") == "fp32");
  CHECK(l1.at("variants").at(0).at("cudnn_over_ours").get<double>() == doctest::Approx(0.5));
  CHECK(l1.at("variants").at(0).at("samples_s").size() == 3);
  CHECK(l1.at("variants").at(1).at("status") == "not_implemented");
  CHECK(!l1.at("variants").at(1).contains("min_s"));
  CHECK(l1.at("variants").at(2).at("precision") == "tf32");
  CHECK(!l1.at("variants").at(2).contains("cudnn_over_ours"));
  CHECK(j.at("layers").at(1).at("variants").at(0).at("status") == "wrong");

  // Only stubs and correct variants: success.
  r.layers[1].variants[0].status = convlab::BenchStatus::ok;
  CHECK(convlab::bench_exit_code(r) == 0);
}

TEST_CASE("the report's roofline: both peaks and bandwidths in the header, a bound per layer") {
  const convlab::BenchReport r = convlab::test::sample_report();
  const std::string text = convlab::format_bench_report(r);
  CAPTURE(text);
  CHECK(text.find("fp32 peak: 66.9 TFLOP/s physical (132 SMs x 256 flops per clock x 1980 MHz), "
                  "51.7 TFLOP/s measured (cuBLAS SGEMM 8192^3)") != std::string::npos);
  CHECK(text.find("tf32 535.3 TFLOP/s") != std::string::npos);
  CHECK(text.find("fp16 1070.5 TFLOP/s") != std::string::npos);
  CHECK(text.find("memory bandwidth: 2800 GB/s measured (cudaMemcpy device to device), 3352 GB/s "
                  "theoretical (2 x 2619 MHz x 5120-bit bus)") != std::string::npos);
  CHECK(text.find("write bandwidth: 3160 GB/s measured (a kernel storing float4s)") !=
        std::string::npos);
  CHECK(text.find("fp32 bound (ms)") != std::string::npos);
  CHECK(text.find("tf32 bound (ms)") != std::string::npos);
  CHECK(text.find("fp16 bound (ms)") == std::string::npos);  // no fp16 variant in the report
  // conv1: 2.304 GFLOP over 215.7 MB is 10.7 flops per byte; memory-bound at 2.8 TB/s, 77.0 us,
  // which is 29.9 TFLOP/s.
  CHECK(text.find("2.304") != std::string::npos);
  CHECK(text.find("215.7") != std::string::npos);
  CHECK(text.find("10.7") != std::string::npos);
  CHECK(text.find("0.0770") != std::string::npos);
  // y's 184.3 MB at the 3.16 TB/s write bandwidth: 58.3 us.
  CHECK(text.find("y write floor (ms)") != std::string::npos);
  CHECK(text.find("0.0583") != std::string::npos);
  CHECK(text.find("29.9") != std::string::npos);
  CHECK(text.find("memory") != std::string::npos);
  // % bound: the direct variant's 4 ms is 1.9% of it, cuDNN's 2 ms 3.9%.
  CHECK(text.find("% bound") != std::string::npos);
  CHECK(text.find(" 1.9 ") != std::string::npos);
  CHECK(text.find(" 3.9 ") != std::string::npos);

  const nlohmann::json j = nlohmann::json::parse(convlab::bench_report_json(r, "0.1.0"));
  const auto& m = j.at("machine");
  CHECK(m.at("physical_peak_flops").at("fp32").get<double>() ==
        doctest::Approx(66.9e12).epsilon(1e-3));
  CHECK(m.at("physical_peak_flops").at("tf32").get<double>() ==
        doctest::Approx(535.3e12).epsilon(1e-3));
  CHECK(m.at("memory_bandwidth_theoretical_bytes_per_s").get<double>() ==
        doctest::Approx(3.352e12).epsilon(1e-3));
  CHECK(m.at("clock_hz") == 1.98e9);
  const auto& roof = j.at("layers").at(0).at("roofline");
  CHECK(roof.at("bytes") == 215680800.0);
  CHECK(roof.at("write_floor_seconds").get<double>() == doctest::Approx(58.33e-6).epsilon(1e-3));
  CHECK(roof.at("intensity").get<double>() == doctest::Approx(10.683).epsilon(1e-3));
  CHECK(roof.at("bounds").at("fp32").at("limit") == "memory");
  CHECK(roof.at("bounds").at("fp32").at("seconds").get<double>() ==
        doctest::Approx(77.03e-6).epsilon(1e-3));
  CHECK(roof.at("bounds").contains("fp16"));
  const auto& direct = j.at("layers").at(0).at("variants").at(0);
  CHECK(direct.at("percent_of_bound").get<double>() == doctest::Approx(1.926).epsilon(1e-3));
  CHECK(direct.at("percent_of_peak").get<double>() == doctest::Approx(1.114).epsilon(1e-3));
  CHECK(j.at("layers").at(0).at("cudnn").at("fp32").at("percent_of_bound").get<double>() ==
        doctest::Approx(3.851).epsilon(1e-3));
}

TEST_CASE("the report on a GPU outside the roofline's table: no bound, the rest as before") {
  convlab::BenchReport r = convlab::test::sample_report();
  r.machine.device.compute_capability = 120;
  const std::string text = convlab::format_bench_report(r);
  CAPTURE(text);
  CHECK(text.find("physical peak not tabulated") != std::string::npos);
  CHECK(text.find("tf32 none (not tabulated") != std::string::npos);
  CHECK(text.find("51.7 TFLOP/s measured") != std::string::npos);
  const nlohmann::json j = nlohmann::json::parse(convlab::bench_report_json(r, "0.1.0"));
  CHECK(j.at("layers").at(0).at("roofline").at("bounds").empty());
  CHECK(!j.at("layers").at(0).at("variants").at(0).contains("percent_of_bound"));
}

}  // namespace test_bench_nets
