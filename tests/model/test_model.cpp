// Model files: the network described in metadata, its shapes, exact save/load round trips,
// refusal of files whose header lies, and finding a model by name.
#include <doctest/doctest.h>

#include <bit>
#include <cstdint>
#include <fstream>
#include <iterator>
#include <map>
#include <string>

#include "reference/core/error.hpp"
#include "reference/model/model.hpp"
#include "reference/model/safetensors.hpp"
#include "tests/support/test_support.hpp"

namespace test_model {

namespace {

namespace fs = std::filesystem;
using convlab::ConvShape;
using convlab::Error;
using convlab::Layer;
using convlab::LayerKind;
using convlab::Model;
using convlab::Shape;
using convlab::Tensor;

Tensor random_tensor(Shape shape, std::uint32_t seed) {
  const std::int64_t n = convlab::shape_elements(shape);
  return Tensor(std::move(shape), convlab::test::random_values(n, seed));
}

Layer simple(LayerKind kind) {
  Layer l;
  l.kind = kind;
  return l;
}

Layer conv(const std::string& name, Shape w, std::uint32_t seed) {
  Layer l = simple(LayerKind::conv);
  l.weight_name = name;
  l.weight = random_tensor(std::move(w), seed);
  return l;
}

Layer pool(int size, int stride) {
  Layer l = simple(LayerKind::maxpool);
  l.pool_size = size;
  l.pool_stride = stride;
  return l;
}

Layer fc(const std::string& name, std::int64_t out, std::int64_t in, std::uint32_t seed) {
  Layer l = simple(LayerKind::fc);
  l.weight_name = name + ".weight";
  l.bias_name = name + ".bias";
  l.weight = random_tensor({out, in}, seed);
  l.bias = random_tensor({out}, seed + 1);
  return l;
}

/// The course network: conv 50x1x5x5, tanh, maxpool 2/2, flatten, fc 128, tanh, fc 10, softmax.
Model ece408() {
  Model m;
  m.name = "ece408-test";
  m.input = {1, 28, 28};
  m.input_scale = 1.0f / 255.0f;
  m.layers = {conv("conv1.weight", {50, 1, 5, 5}, 1),
              simple(LayerKind::tanh),
              pool(2, 2),
              simple(LayerKind::flatten),
              fc("fc1", 128, 7200, 2),
              simple(LayerKind::tanh),
              fc("fc2", 10, 128, 4),
              simple(LayerKind::softmax)};
  m.expected_correct = {{100, 87}, {1000, 861}, {10000, 8562}};
  m.min_margin = 0.0012345678901234567;
  m.provenance = R"({"trainer": "convlab-train", "seed": 7, "epochs": 3})";
  return m;
}

/// Two conv layers, C > 1 in the second, other K, relu.
Model two_conv() {
  Model m;
  m.name = "two-conv";
  m.input = {1, 28, 28};
  m.layers = {conv("c1", {8, 1, 5, 5}, 10),  simple(LayerKind::relu), pool(2, 2),
              conv("c2", {16, 8, 3, 3}, 11), simple(LayerKind::tanh), pool(2, 2),
              simple(LayerKind::flatten),    fc("out", 10, 400, 12),  simple(LayerKind::softmax)};
  return m;
}

bool same_bits(const Tensor& a, const Tensor& b) {
  if (a.shape() != b.shape() || a.size() != b.size()) return false;
  for (std::int64_t i = 0; i < a.size(); ++i) {
    if (std::bit_cast<std::uint32_t>(a.data()[i]) != std::bit_cast<std::uint32_t>(b.data()[i]))
      return false;
  }
  return true;
}

void check_same(const Model& a, const Model& b) {
  CHECK(a.name == b.name);
  CHECK(a.input == b.input);
  CHECK(std::bit_cast<std::uint32_t>(a.input_scale) == std::bit_cast<std::uint32_t>(b.input_scale));
  CHECK(a.expected_correct == b.expected_correct);
  CHECK(a.min_margin == b.min_margin);
  CHECK(a.provenance == b.provenance);
  REQUIRE(a.layers.size() == b.layers.size());
  for (std::size_t i = 0; i < a.layers.size(); ++i) {
    INFO("layer " << i);
    const Layer& x = a.layers[i];
    const Layer& y = b.layers[i];
    CHECK(x.kind == y.kind);
    CHECK(x.pool_size == y.pool_size);
    CHECK(x.pool_stride == y.pool_stride);
    CHECK(x.weight_name == y.weight_name);
    CHECK(x.bias_name == y.bias_name);
    CHECK(same_bits(x.weight, y.weight));
    CHECK(same_bits(x.bias, y.bias));
  }
}

// ---- files whose header lies -------------------------------------------------------------

/// The ece408 tensors, with `network` as the network metadata.
fs::path write_raw(const fs::path& dir, const std::string& network,
                   std::map<std::string, Tensor> tensors = {}, const std::string& expected = "") {
  convlab::SafetensorsFile f;
  if (tensors.empty()) {
    tensors.emplace("conv1.weight", Tensor({50, 1, 5, 5}));
    tensors.emplace("fc1.weight", Tensor({128, 7200}));
    tensors.emplace("fc1.bias", Tensor({128}));
    tensors.emplace("fc2.weight", Tensor({10, 128}));
    tensors.emplace("fc2.bias", Tensor({10}));
  }
  f.tensors = std::move(tensors);
  if (!network.empty()) f.metadata["convlab.network"] = network;
  if (!expected.empty()) f.metadata["convlab.expected"] = expected;
  const fs::path p = dir / "liar.safetensors";
  convlab::write_safetensors(p, f);
  return p;
}

const std::string kLayers =
    R"([{"type":"conv","weight":"conv1.weight"},{"type":"tanh"},{"type":"maxpool","size":2,"stride":2},)"
    R"({"type":"flatten"},{"type":"fc","weight":"fc1.weight","bias":"fc1.bias"},{"type":"tanh"},)"
    R"({"type":"fc","weight":"fc2.weight","bias":"fc2.bias"},{"type":"softmax"}])";

std::string net(const std::string& layers, const std::string& input = "[1,28,28]") {
  return R"({"name":"liar","input":)" + input + R"(,"input_scale":0.00392156862745098,"layers":)" +
         layers + "}";
}

/// The load error for a model file, or "" when it loads.
std::string load_error(const fs::path& p) {
  try {
    convlab::load_model(p);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("model: layer kind names") {
  CHECK(convlab::layer_kind_name(LayerKind::conv) == "conv");
  CHECK(convlab::layer_kind_name(LayerKind::maxpool) == "maxpool");
  CHECK(convlab::layer_kind_name(LayerKind::fc) == "fc");
  CHECK(convlab::layer_kind_name(LayerKind::softmax) == "softmax");
  CHECK(convlab::layer_kind_name(LayerKind::relu) == "relu");
}

TEST_CASE("model: shapes of the course network") {
  const Model m = ece408();
  const std::vector<Shape> expected{{50, 24, 24}, {50, 24, 24}, {50, 12, 12}, {7200},
                                    {128},        {128},        {10},         {10}};
  CHECK(m.output_shapes() == expected);
  CHECK(m.classes() == 10);
  const std::vector<ConvShape> convs = m.conv_shapes(10000);
  REQUIRE(convs.size() == 1);
  CHECK(convs[0] == ConvShape{10000, 50, 1, 28, 28, 5});
  CHECK_THROWS_AS(m.conv_shapes(0), Error);
}

TEST_CASE("model: shapes of a two-conv network") {
  const Model m = two_conv();
  const std::vector<Shape> expected{{8, 24, 24},  {8, 24, 24},  {8, 12, 12},
                                    {16, 10, 10}, {16, 10, 10}, {16, 5, 5},
                                    {400},        {10},         {10}};
  CHECK(m.output_shapes() == expected);
  const std::vector<ConvShape> convs = m.conv_shapes(7);
  REQUIRE(convs.size() == 2);
  CHECK(convs[0] == ConvShape{7, 8, 1, 28, 28, 5});
  CHECK(convs[1] == ConvShape{7, 16, 8, 12, 12, 3});
  CHECK(m.classes() == 10);

  Model odd;  // a pool that does not divide evenly rounds down
  odd.input = {2, 7, 8};
  odd.layers = {pool(3, 2), simple(LayerKind::flatten)};
  CHECK(odd.output_shapes() == std::vector<Shape>{{2, 3, 3}, {18}});
}

TEST_CASE("model: save then load is exact") {
  const convlab::test::TempDir dir;
  for (const Model& m : {ece408(), two_conv()}) {
    INFO(m.name);
    const fs::path p = dir.path() / (m.name + ".safetensors");
    convlab::save_model(p, m);
    const Model back = convlab::load_model(p);
    check_same(m, back);
    // Saving the loaded model gives the same file, byte for byte.
    const fs::path p2 = dir.path() / "again.safetensors";
    convlab::save_model(p2, back);
    std::ifstream a(p, std::ios::binary), b(p2, std::ios::binary);
    const std::string sa{std::istreambuf_iterator<char>(a), {}},
        sb{std::istreambuf_iterator<char>(b), {}};
    CHECK(sa == sb);
  }
  // The file is plain safetensors with the network in its metadata.
  const convlab::SafetensorsFile raw =
      convlab::read_safetensors(dir.path() / "ece408-test.safetensors");
  CHECK(raw.tensors.size() == 5);
  CHECK(raw.metadata.count("convlab.network") == 1);
  CHECK(raw.metadata.at("convlab.provenance") == ece408().provenance);
}

TEST_CASE("model: save refuses a network whose shapes do not chain") {
  const convlab::test::TempDir dir;
  Model m = ece408();
  m.layers[4].weight = Tensor({128, 7000});
  CHECK_THROWS_WITH_AS(convlab::save_model(dir.path() / "x.safetensors", m),
                       doctest::Contains("layer 4 (fc)"), Error);
  CHECK_FALSE(fs::exists(dir.path() / "x.safetensors"));
}

TEST_CASE("model: a file that lies is refused, naming the layer and the mismatch") {
  const convlab::test::TempDir dir;
  const fs::path d = dir.path();
  auto tensors = [](const std::string& which, Shape shape) {
    std::map<std::string, Tensor> t{{"conv1.weight", Tensor({50, 1, 5, 5})},
                                    {"fc1.weight", Tensor({128, 7200})},
                                    {"fc1.bias", Tensor({128})},
                                    {"fc2.weight", Tensor({10, 128})},
                                    {"fc2.bias", Tensor({10})}};
    t.erase(which);
    t.emplace(which, Tensor(std::move(shape)));
    return t;
  };
  auto check_error = [&](const fs::path& p, std::initializer_list<std::string> parts) {
    const std::string msg = load_error(p);
    INFO(msg);
    CHECK_FALSE(msg.empty());
    CHECK(msg.find("liar.safetensors") != std::string::npos);
    for (const std::string& part : parts) CHECK(msg.find(part) != std::string::npos);
  };

  SUBCASE("the honest baseline loads") {
    CHECK(load_error(write_raw(d, net(kLayers))).empty());
    CHECK(convlab::load_model(write_raw(d, net(kLayers))).classes() == 10);
  }
  SUBCASE("conv weight of the wrong rank") {
    check_error(write_raw(d, net(kLayers), tensors("conv1.weight", {50, 25})),
                {"layer 0 (conv)", "rank 4", "[50, 25]"});
  }
  SUBCASE("conv weight for another channel count") {
    check_error(write_raw(d, net(kLayers), tensors("conv1.weight", {50, 3, 5, 5})),
                {"layer 0 (conv)", "C = 3", "1 channels"});
  }
  SUBCASE("non-square conv filter") {
    check_error(write_raw(d, net(kLayers), tensors("conv1.weight", {50, 1, 5, 3})),
                {"layer 0 (conv)", "square"});
  }
  SUBCASE("conv filter larger than its input") {
    check_error(write_raw(d, net(kLayers, "[1,4,4]")), {"layer 0 (conv)", "larger than its input"});
  }
  SUBCASE("fc weight for another feature count") {
    check_error(write_raw(d, net(kLayers), tensors("fc1.weight", {128, 7201})),
                {"layer 4 (fc)", "in = 7201", "7200 features"});
  }
  SUBCASE("second fc that does not follow the first") {
    check_error(write_raw(d, net(kLayers), tensors("fc2.weight", {10, 64})),
                {"layer 6 (fc)", "128 features"});
  }
  SUBCASE("fc weight of the wrong rank") {
    check_error(write_raw(d, net(kLayers), tensors("fc2.weight", {1280})),
                {"layer 6 (fc)", "rank 2"});
  }
  SUBCASE("bias that does not match the weight") {
    check_error(write_raw(d, net(kLayers), tensors("fc1.bias", {127})),
                {"layer 4 (fc)", "bias 'fc1.bias'", "[127]"});
  }
  SUBCASE("fc without a flatten before it") {
    const std::string layers =
        R"([{"type":"conv","weight":"conv1.weight"},{"type":"fc","weight":"fc1.weight","bias":"fc1.bias"}])";
    check_error(write_raw(d, net(layers)), {"layer 1 (fc)", "flatten"});
  }
  SUBCASE("a layer names a tensor the file does not hold") {
    std::string layers = kLayers;
    layers.replace(layers.find("fc2.bias"), 8, "fc9.bias");
    check_error(write_raw(d, net(layers)), {"layer 6 (fc)", "'fc9.bias'"});
  }
  SUBCASE("unknown layer type") {
    check_error(write_raw(d, net(R"([{"type":"dropout"}])")),
                {"layer 0", "unknown type \"dropout\""});
  }
  SUBCASE("missing required fields") {
    check_error(write_raw(d, net(R"([{"type":"conv"}])")), {"layer 0 (conv)", "no \"weight\""});
    check_error(write_raw(d, net(R"([{"type":"fc","weight":"fc1.weight"}])")),
                {"layer 0 (fc)", "no \"bias\""});
    check_error(write_raw(d, net(R"([{"type":"maxpool","size":2}])")),
                {"layer 0 (maxpool)", "no \"stride\""});
    check_error(write_raw(d, net(R"([{"weight":"x"}])")), {"layer 0", "no \"type\""});
    check_error(write_raw(d, R"({"input":[1,28,28]})"), {"\"layers\""});
    check_error(write_raw(d, R"({"layers":[]})"), {"\"input\""});
  }
  SUBCASE("a key the layer does not take (a conv bias would be ignored)") {
    check_error(write_raw(d, net(R"([{"type":"conv","weight":"conv1.weight","bias":"fc1.bias"}])")),
                {"layer 0 (conv)", "\"bias\""});
  }
  SUBCASE("maxpool that is invalid or does not fit") {
    check_error(
        write_raw(
            d,
            net(R"([{"type":"conv","weight":"conv1.weight"},{"type":"maxpool","size":0,"stride":2}])")),
        {"layer 1 (maxpool)", "at least 1"});
    check_error(
        write_raw(
            d,
            net(R"([{"type":"conv","weight":"conv1.weight"},{"type":"maxpool","size":25,"stride":1}])")),
        {"layer 1 (maxpool)", "larger than its input [50, 24, 24]"});
  }
  SUBCASE("bad input shape") {
    check_error(write_raw(d, net(kLayers, "[0,28,28]")), {"\"input\"", "positive"});
    check_error(write_raw(d, net(kLayers, "[28,28]")), {"\"input\"", "[C, H, W]"});
  }
  SUBCASE("softmax that is not on a vector, or a network that does not end in one") {
    check_error(write_raw(d, net(R"([{"type":"softmax"}])")), {"layer 0 (softmax)"});
    check_error(write_raw(d, net(R"([{"type":"tanh"}])")), {"class scores"});
  }
  SUBCASE("metadata missing or not JSON") {
    check_error(write_raw(d, ""), {"convlab.network"});
    check_error(write_raw(d, "{not json"), {"convlab.network", "not valid JSON"});
  }
  SUBCASE("bad expected results") {
    check_error(write_raw(d, net(kLayers), {}, R"({"correct":{"ten":5}})"),
                {"convlab.expected", "\"ten\""});
    check_error(write_raw(d, net(kLayers), {}, R"({"correct":{"100":101}})"),
                {"convlab.expected", "outside 0..100"});
    check_error(write_raw(d, net(kLayers), {}, R"({"min_margin":"small"})"), {"min_margin"});
    CHECK(convlab::load_model(
              write_raw(d, net(kLayers), {}, R"({"correct":{"100":87},"min_margin":0.5})"))
              .expected_correct.at(100) == 87);
  }
}

TEST_CASE("model: find_model") {
  const convlab::test::TempDir one, two;
  const Model m = two_conv();
  convlab::save_model(one.path() / "c.safetensors", m);
  convlab::save_model(one.path() / "a.safetensors", m);
  convlab::save_model(two.path() / "b.safetensors", m);
  std::ofstream(one.path() / "notes.txt") << "not a model";
  const std::vector<fs::path> dirs{one.path(), two.path(), one.path() / "missing"};

  CHECK(convlab::find_model("b", dirs) == two.path() / "b.safetensors");
  CHECK(convlab::find_model("a", dirs) == one.path() / "a.safetensors");
  const std::string direct = (two.path() / "b.safetensors").string();
  CHECK(convlab::find_model(direct, {}) == fs::path(direct));

  std::string msg;
  try {
    convlab::find_model("zzz", dirs);
  } catch (const Error& e) {
    msg = e.what();
  }
  INFO(msg);
  CHECK(msg.find("unknown model 'zzz': available models are a, b, c (in " + one.path().string()) ==
        0);
  CHECK(msg.find("notes") == std::string::npos);
  CHECK_THROWS_WITH_AS(convlab::find_model("zzz", {one.path() / "missing"}),
                       doctest::Contains("no model files"), Error);
}

}  // namespace test_model
