#include "reference/model/model.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>
#include <string>
#include <system_error>
#include <utility>

#include <nlohmann/json.hpp>

#include "reference/core/error.hpp"
#include "reference/model/safetensors.hpp"

namespace convlab {

namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

constexpr const char* kNetworkKey = "convlab.network";
constexpr const char* kExpectedKey = "convlab.expected";
constexpr const char* kProvenanceKey = "convlab.provenance";

std::string layer_label(std::size_t index, LayerKind kind) {
  return "layer " + std::to_string(index) + " (" + layer_kind_name(kind) + ")";
}

[[noreturn]] void layer_fail(std::size_t index, LayerKind kind, const std::string& what) {
  throw Error(layer_label(index, kind) + ": " + what);
}

std::optional<LayerKind> kind_from_name(const std::string& name) {
  for (const LayerKind k : {LayerKind::conv, LayerKind::tanh, LayerKind::relu, LayerKind::maxpool,
                            LayerKind::flatten, LayerKind::fc, LayerKind::softmax}) {
    if (layer_kind_name(k) == name) return k;
  }
  return std::nullopt;
}

/// A dimension small enough for the int sizes of ConvShape and the layer code.
bool fits_int(std::int64_t v) {
  return v > 0 && v <= std::numeric_limits<int>::max();
}

/// The per-image shape after `layer`, given the shape that flows into it.
Shape layer_output(std::size_t i, const Layer& layer, const Shape& in) {
  const LayerKind kind = layer.kind;
  switch (kind) {
    case LayerKind::conv: {
      if (in.size() != 3) {
        layer_fail(i, kind,
                   "needs a [C, H, W] input but gets " + shape_string(in) +
                       " (a conv cannot follow flatten or fc)");
      }
      const Shape& w = layer.weight.shape();
      if (w.size() != 4) {
        layer_fail(i, kind,
                   "weight '" + layer.weight_name + "' has shape " + shape_string(w) +
                       ", expected rank 4 [M][C][K][K]");
      }
      if (w[2] != w[3]) {
        layer_fail(i, kind,
                   "weight '" + layer.weight_name + "' has shape " + shape_string(w) +
                       ": filters must be square (K x K)");
      }
      if (!fits_int(w[0]) || !fits_int(w[2])) {
        layer_fail(i, kind,
                   "weight '" + layer.weight_name + "' has shape " + shape_string(w) +
                       ": M and K must be positive");
      }
      if (w[1] != in[0]) {
        layer_fail(i, kind,
                   "weight '" + layer.weight_name + "' has shape " + shape_string(w) +
                       " with C = " + std::to_string(w[1]) + ", but its input " + shape_string(in) +
                       " has " + std::to_string(in[0]) + " channels");
      }
      if (w[2] > in[1] || w[3] > in[2]) {
        layer_fail(i, kind,
                   "filter " + std::to_string(w[2]) + "x" + std::to_string(w[3]) +
                       " is larger than its input " + shape_string(in));
      }
      return {w[0], in[1] - w[2] + 1, in[2] - w[3] + 1};
    }
    case LayerKind::tanh:
    case LayerKind::relu:
      return in;
    case LayerKind::softmax:
      if (in.size() != 1) {
        layer_fail(i, kind, "needs a vector input (after fc) but gets " + shape_string(in));
      }
      return in;
    case LayerKind::maxpool: {
      if (in.size() != 3)
        layer_fail(i, kind, "needs a [C, H, W] input but gets " + shape_string(in));
      if (layer.pool_size < 1 || layer.pool_stride < 1) {
        layer_fail(i, kind,
                   "size " + std::to_string(layer.pool_size) + " and stride " +
                       std::to_string(layer.pool_stride) + " must both be at least 1");
      }
      if (layer.pool_size > in[1] || layer.pool_size > in[2]) {
        layer_fail(i, kind,
                   "window " + std::to_string(layer.pool_size) + " is larger than its input " +
                       shape_string(in));
      }
      return {in[0], (in[1] - layer.pool_size) / layer.pool_stride + 1,
              (in[2] - layer.pool_size) / layer.pool_stride + 1};
    }
    case LayerKind::flatten:
      if (in.size() != 3)
        layer_fail(i, kind, "needs a [C, H, W] input but gets " + shape_string(in));
      return {shape_elements(in)};
    case LayerKind::fc: {
      if (in.size() != 1) {
        layer_fail(i, kind,
                   "needs a vector input but gets " + shape_string(in) +
                       " (put a flatten layer before the first fc)");
      }
      const Shape& w = layer.weight.shape();
      if (w.size() != 2) {
        layer_fail(i, kind,
                   "weight '" + layer.weight_name + "' has shape " + shape_string(w) +
                       ", expected rank 2 [out][in]");
      }
      if (!fits_int(w[0])) {
        layer_fail(i, kind,
                   "weight '" + layer.weight_name + "' has shape " + shape_string(w) +
                       ": out must be positive");
      }
      if (w[1] != in[0]) {
        layer_fail(i, kind,
                   "weight '" + layer.weight_name + "' has shape " + shape_string(w) +
                       " with in = " + std::to_string(w[1]) + ", but its input has " +
                       std::to_string(in[0]) + " features");
      }
      if (layer.bias.shape() != Shape{w[0]}) {
        layer_fail(i, kind,
                   "bias '" + layer.bias_name + "' has shape " + shape_string(layer.bias.shape()) +
                       ", expected [" + std::to_string(w[0]) + "] to match the weight " +
                       shape_string(w));
      }
      return {w[0]};
    }
  }
  layer_fail(i, kind, "unknown layer kind");
}

// ---- metadata parsing ---------------------------------------------------------------------

std::int64_t json_int(const json& v, const std::string& what) {
  if (!v.is_number_integer()) throw Error(what + " must be an integer, got " + v.dump());
  if (v.is_number_unsigned() &&
      v.get<std::uint64_t>() >
          static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
    throw Error(what + " is too large: " + v.dump());
  }
  return v.get<std::int64_t>();
}

std::string json_string(const json& obj, const char* key, const std::string& where) {
  if (!obj.contains(key)) throw Error(where + " has no \"" + key + "\"");
  if (!obj[key].is_string() || obj[key].get<std::string>().empty()) {
    throw Error(where + ": \"" + key + "\" must be a non-empty string");
  }
  return obj[key].get<std::string>();
}

int json_small_int(const json& obj, const char* key, const std::string& where) {
  if (!obj.contains(key)) throw Error(where + " has no \"" + key + "\"");
  const std::int64_t v = json_int(obj[key], where + ": \"" + key + "\"");
  if (v < 1 || v > std::numeric_limits<int>::max()) {
    throw Error(where + ": \"" + key + "\" is " + std::to_string(v) + ", must be at least 1");
  }
  return static_cast<int>(v);
}

json parse_json(const std::string& text, const std::string& what) {
  try {
    return json::parse(text);
  } catch (const json::exception& e) {
    throw Error(what + " is not valid JSON: " + e.what());
  }
}

const Tensor& find_tensor(const SafetensorsFile& file, const std::string& name, std::size_t index,
                          LayerKind kind) {
  const auto it = file.tensors.find(name);
  if (it == file.tensors.end()) {
    layer_fail(index, kind, "names tensor '" + name + "', which the file does not hold");
  }
  return it->second;
}

Layer parse_layer(const json& j, std::size_t index, const SafetensorsFile& file) {
  const std::string where = "layer " + std::to_string(index);
  if (!j.is_object()) throw Error(where + " is not a JSON object");
  const std::string type = json_string(j, "type", where);
  const std::optional<LayerKind> kind = kind_from_name(type);
  if (!kind) {
    throw Error(where + " has unknown type \"" + type +
                "\" (known: conv, tanh, relu, maxpool, flatten, fc, softmax)");
  }
  Layer layer;
  layer.kind = *kind;
  const std::string label = layer_label(index, *kind);
  // Keys a layer does not use are refused, so that (say) a conv bias is never silently dropped.
  std::set<std::string> allowed{"type"};
  switch (*kind) {
    case LayerKind::conv:
      allowed.insert("weight");
      layer.weight_name = json_string(j, "weight", label);
      layer.weight = find_tensor(file, layer.weight_name, index, *kind);
      break;
    case LayerKind::fc:
      allowed.insert({"weight", "bias"});
      layer.weight_name = json_string(j, "weight", label);
      layer.bias_name = json_string(j, "bias", label);
      layer.weight = find_tensor(file, layer.weight_name, index, *kind);
      layer.bias = find_tensor(file, layer.bias_name, index, *kind);
      break;
    case LayerKind::maxpool:
      allowed.insert({"size", "stride"});
      layer.pool_size = json_small_int(j, "size", label);
      layer.pool_stride = json_small_int(j, "stride", label);
      break;
    default:
      break;
  }
  for (const auto& [key, value] : j.items()) {
    if (!allowed.contains(key))
      throw Error(label + " has a key \"" + key + "\" this layer type does not take");
  }
  return layer;
}

void parse_network(Model& model, const std::string& text, const SafetensorsFile& file,
                   const fs::path& path) {
  const json net = parse_json(text, std::string("metadata \"") + kNetworkKey + "\"");
  if (!net.is_object()) throw Error(std::string("\"") + kNetworkKey + "\" is not a JSON object");
  model.name = path.stem().string();
  if (net.contains("name")) model.name = json_string(net, "name", "the network");
  if (!net.contains("input")) throw Error("the network has no \"input\" ([C, H, W])");
  const json& input = net["input"];
  if (!input.is_array() || input.size() != 3) {
    throw Error("the network's \"input\" must be [C, H, W], got " + input.dump());
  }
  for (const json& d : input) {
    const std::int64_t v = json_int(d, "the network's \"input\"");
    if (!fits_int(v)) throw Error("the network's \"input\" " + input.dump() + " must be positive");
    model.input.push_back(v);
  }
  if (net.contains("input_scale")) {
    const json& s = net["input_scale"];
    if (!s.is_number() || !std::isfinite(s.get<double>()) || s.get<double>() <= 0.0) {
      throw Error("the network's \"input_scale\" must be a positive number, got " + s.dump());
    }
    model.input_scale = static_cast<float>(s.get<double>());
  }
  if (!net.contains("layers") || !net["layers"].is_array() || net["layers"].empty()) {
    throw Error("the network has no \"layers\" array, or it is empty");
  }
  const json& layers = net["layers"];
  for (std::size_t i = 0; i < layers.size(); ++i)
    model.layers.push_back(parse_layer(layers[i], i, file));
}

void parse_expected(Model& model, const std::string& text) {
  const std::string what = std::string("metadata \"") + kExpectedKey + "\"";
  const json exp = parse_json(text, what);
  if (!exp.is_object()) throw Error(what + " is not a JSON object");
  if (exp.contains("correct")) {
    const json& correct = exp["correct"];
    if (!correct.is_object()) throw Error(what + ": \"correct\" is not an object");
    for (const auto& [key, value] : correct.items()) {
      std::int64_t n = 0;
      const bool digits =
          !key.empty() && key.size() <= 12 &&
          std::all_of(key.begin(), key.end(), [](char c) { return c >= '0' && c <= '9'; });
      if (digits) n = std::stoll(key);
      if (!digits || n < 1)
        throw Error(what + ": key \"" + key + "\" of \"correct\" is not an image count");
      const std::int64_t c = json_int(value, what + ": \"correct\"[\"" + key + "\"]");
      if (c < 0 || c > n) {
        throw Error(what + ": \"correct\"[\"" + key + "\"] is " + std::to_string(c) +
                    ", outside 0.." + key);
      }
      model.expected_correct[n] = c;
    }
  }
  if (exp.contains("min_margin")) {
    const json& m = exp["min_margin"];
    if (!m.is_number() || !std::isfinite(m.get<double>())) {
      throw Error(what + ": \"min_margin\" must be a number, got " + m.dump());
    }
    model.min_margin = m.get<double>();
  }
}

}  // namespace

std::string layer_kind_name(LayerKind kind) {
  switch (kind) {
    case LayerKind::conv:
      return "conv";
    case LayerKind::tanh:
      return "tanh";
    case LayerKind::relu:
      return "relu";
    case LayerKind::maxpool:
      return "maxpool";
    case LayerKind::flatten:
      return "flatten";
    case LayerKind::fc:
      return "fc";
    case LayerKind::softmax:
      return "softmax";
  }
  return "unknown";
}

std::vector<Shape> Model::output_shapes() const {
  if (input.size() != 3 || !std::all_of(input.begin(), input.end(), fits_int)) {
    throw Error("model input " + shape_string(input) + " must be [C, H, W] with positive sizes");
  }
  std::vector<Shape> shapes;
  shapes.reserve(layers.size());
  Shape current = input;
  for (std::size_t i = 0; i < layers.size(); ++i) {
    current = layer_output(i, layers[i], current);
    shapes.push_back(current);
  }
  return shapes;
}

std::vector<ConvShape> Model::conv_shapes(int batch) const {
  if (batch < 1) throw Error("conv_shapes: batch must be at least 1, got " + std::to_string(batch));
  const std::vector<Shape> outs = output_shapes();
  std::vector<ConvShape> convs;
  for (std::size_t i = 0; i < layers.size(); ++i) {
    if (layers[i].kind != LayerKind::conv) continue;
    const Shape& in = i == 0 ? input : outs[i - 1];
    const Shape& w = layers[i].weight.shape();
    ConvShape s;
    s.B = batch;
    s.M = static_cast<int>(w[0]);
    s.C = static_cast<int>(w[1]);
    s.H = static_cast<int>(in[1]);
    s.W = static_cast<int>(in[2]);
    s.K = static_cast<int>(w[2]);
    s.validate();
    convs.push_back(s);
  }
  return convs;
}

std::int64_t Model::classes() const {
  const std::vector<Shape> outs = output_shapes();
  if (outs.empty() || outs.back().size() != 1) {
    throw Error("model '" + name +
                "' does not end in a vector of class scores (end with fc, softmax)");
  }
  return outs.back()[0];
}

Model load_model(const fs::path& path) {
  const SafetensorsFile file = read_safetensors(path);
  Model model;
  try {
    const auto net = file.metadata.find(kNetworkKey);
    if (net == file.metadata.end()) {
      throw Error(std::string("no \"") + kNetworkKey +
                  "\" metadata: this safetensors file does not describe a convlab network");
    }
    parse_network(model, net->second, file, path);
    if (const auto exp = file.metadata.find(kExpectedKey); exp != file.metadata.end()) {
      parse_expected(model, exp->second);
    }
    if (const auto prov = file.metadata.find(kProvenanceKey); prov != file.metadata.end()) {
      model.provenance = prov->second;
    }
    model.classes();  // checks that every layer's weights fit the shapes flowing in
  } catch (const Error& e) {
    throw Error("model file " + path.string() + ": " + e.what());
  }
  return model;
}

void save_model(const fs::path& path, const Model& model) {
  try {
    model.classes();  // never write a model that would not load
  } catch (const Error& e) {
    throw Error("cannot save model to " + path.string() + ": " + e.what());
  }
  SafetensorsFile file;
  json layers = json::array();
  for (const Layer& layer : model.layers) {
    json j = {{"type", layer_kind_name(layer.kind)}};
    const auto put = [&](const std::string& name, const Tensor& t) {
      if (name.empty())
        throw Error("cannot save model to " + path.string() + ": a layer's tensor has no name");
      const auto [it, inserted] = file.tensors.emplace(name, t);
      if (!inserted &&
          (it->second.shape() != t.shape() ||
           !std::equal(t.values().begin(), t.values().end(), it->second.values().begin()))) {
        throw Error("cannot save model to " + path.string() +
                    ": two different tensors are named '" + name + "'");
      }
    };
    switch (layer.kind) {
      case LayerKind::conv:
        j["weight"] = layer.weight_name;
        put(layer.weight_name, layer.weight);
        break;
      case LayerKind::fc:
        j["weight"] = layer.weight_name;
        j["bias"] = layer.bias_name;
        put(layer.weight_name, layer.weight);
        put(layer.bias_name, layer.bias);
        break;
      case LayerKind::maxpool:
        j["size"] = layer.pool_size;
        j["stride"] = layer.pool_stride;
        break;
      default:
        break;
    }
    layers.push_back(std::move(j));
  }
  // input_scale goes through double: JSON keeps 17 significant digits, so the float comes back
  // exact.
  const json net = {{"name", model.name},
                    {"input", model.input},
                    {"input_scale", static_cast<double>(model.input_scale)},
                    {"layers", std::move(layers)}};
  file.metadata[kNetworkKey] = net.dump();
  if (!model.expected_correct.empty() || model.min_margin) {
    json exp = json::object();
    if (!model.expected_correct.empty()) {
      json correct = json::object();
      for (const auto& [n, c] : model.expected_correct) correct[std::to_string(n)] = c;
      exp["correct"] = std::move(correct);
    }
    if (model.min_margin) exp["min_margin"] = *model.min_margin;
    file.metadata[kExpectedKey] = exp.dump();
  }
  if (!model.provenance.empty()) file.metadata[kProvenanceKey] = model.provenance;
  write_safetensors(path, file);
}

fs::path find_model(const std::string& name, const std::vector<fs::path>& search_dirs) {
  std::error_code ec;
  if (!name.empty() && fs::is_regular_file(name, ec)) return name;
  if (name.find('/') != std::string::npos || name.ends_with(".safetensors")) {
    throw Error("model file " + name + " does not exist (a name without '/' or .safetensors "
                "is looked up among the model files)");
  }
  for (const fs::path& dir : search_dirs) {
    const fs::path candidate = dir / (name + ".safetensors");
    if (fs::is_regular_file(candidate, ec)) return candidate;
  }
  std::set<std::string> available;
  std::string dirs;
  for (const fs::path& dir : search_dirs) {
    dirs += (dirs.empty() ? "" : ", ") + dir.string();
    for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
      if (it->path().extension() == ".safetensors" && it->is_regular_file(ec)) {
        available.insert(it->path().stem().string());
      }
    }
    ec.clear();
  }
  std::string list;
  for (const std::string& m : available) list += (list.empty() ? "" : ", ") + m;
  if (available.empty()) {
    throw Error("unknown model '" + name + "': no model files (*.safetensors) found in " +
                (dirs.empty() ? std::string("any directory") : dirs) +
                "; pass the path to a model file");
  }
  throw Error("unknown model '" + name + "': available models are " + list + " (in " + dirs + ")");
}

}  // namespace convlab
