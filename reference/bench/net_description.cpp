#include "reference/bench/net_description.hpp"

#include <algorithm>
#include <climits>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "reference/core/error.hpp"
#include "reference/core/files.hpp"

namespace convlab {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr const char* kFormatHint = " (the format is described in datasets/nets/README.md)";

// Rejects keys outside `allowed`: a misspelt key ("k" for "K") must not pass silently.
void check_keys(const json& object, std::initializer_list<const char*> allowed,
                const std::string& where) {
  for (const auto& [key, value] : object.items()) {
    (void)value;
    if (std::none_of(allowed.begin(), allowed.end(), [&](const char* a) { return key == a; })) {
      std::string list;
      for (const char* a : allowed) list += (list.empty() ? "" : ", ") + std::string(a);
      throw Error(where + ": unknown key '" + key + "'; the keys are " + list + kFormatHint);
    }
  }
}

std::string required_string(const json& object, const char* key, const std::string& where) {
  if (!object.contains(key)) {
    throw Error(where + ": missing key '" + key + "'" + kFormatHint);
  }
  const json& v = object.at(key);
  if (!v.is_string() || v.get<std::string>().empty()) {
    throw Error(where + ": '" + key + "' must be a non-empty string, got " + v.dump());
  }
  return v.get<std::string>();
}

int positive_int(const json& object, const char* key, const std::string& where) {
  if (!object.contains(key)) {
    throw Error(where + ": missing key '" + key + "'" + kFormatHint);
  }
  const json& v = object.at(key);
  const bool ok = v.is_number_integer() && v.get<std::int64_t>() >= 1 &&
                  v.get<std::int64_t>() <= std::int64_t{INT_MAX};
  if (!ok) {
    throw Error(where + ": '" + key + "' must be a positive integer, got " + v.dump());
  }
  return static_cast<int>(v.get<std::int64_t>());
}

}  // namespace

std::vector<ConvShape> NetDescription::shapes(int b) const {
  if (b < 1) {
    throw Error(file.string() + ": the batch must be a positive integer, got " + std::to_string(b));
  }
  std::vector<ConvShape> out;
  for (const NetLayer& layer : layers) {
    ConvShape s = layer.shape;
    s.B = b;
    try {
      s.validate();
    } catch (const Error& e) {
      throw Error(file.string() + ": layer " + layer.name + " at batch " + std::to_string(b) +
                  ": " + e.what());
    }
    out.push_back(s);
  }
  return out;
}

NetDescription parse_net(const std::string& json_text, const std::string& origin) {
  json doc;
  try {
    doc = json::parse(json_text);
  } catch (const json::parse_error& e) {
    throw Error(origin + ": not valid JSON (" + e.what() + ")" + kFormatHint);
  }
  if (!doc.is_object()) {
    throw Error(origin +
                ": a network description is a JSON object with keys name, batch and "
                "layers" +
                kFormatHint);
  }
  check_keys(doc, {"name", "description", "batch", "models", "layers"}, origin);

  NetDescription net;
  net.file = origin;
  net.name = required_string(doc, "name", origin);
  if (doc.contains("description")) net.description = required_string(doc, "description", origin);
  net.batch = positive_int(doc, "batch", origin);
  if (doc.contains("models")) {
    const json& models = doc.at("models");
    if (!models.is_array()) {
      throw Error(origin + ": 'models' must be an array of model names, got " + models.dump());
    }
    for (const json& m : models) {
      if (!m.is_string() || m.get<std::string>().empty()) {
        throw Error(origin + ": 'models' must hold model names (strings), got " + m.dump());
      }
      net.models.push_back(m.get<std::string>());
    }
  }

  if (!doc.contains("layers")) throw Error(origin + ": missing key 'layers'" + kFormatHint);
  const json& layers = doc.at("layers");
  if (!layers.is_array() || layers.empty()) {
    throw Error(origin + ": 'layers' must be a non-empty array of conv layers" + kFormatHint);
  }
  std::set<std::string> names;
  for (std::size_t i = 0; i < layers.size(); ++i) {
    const json& l = layers[i];
    std::string where = origin + ": layer " + std::to_string(i + 1);
    if (!l.is_object()) {
      throw Error(where +
                  " must be an object such as {\"name\": \"conv1\", \"C\": 1, \"M\": 50, "
                  "\"H\": 28, \"W\": 28, \"K\": 5}, got " +
                  l.dump());
    }
    NetLayer layer;
    layer.name = required_string(l, "name", where);
    where += " (" + layer.name + ")";
    check_keys(l, {"name", "C", "M", "H", "W", "K", "note"}, where);
    if (l.contains("note") && !l.at("note").is_string()) {
      throw Error(where + ": 'note' must be a string, got " + l.at("note").dump());
    }
    if (!names.insert(layer.name).second) {
      throw Error(where + ": another layer has the same name; layer names must be unique");
    }
    ConvShape& s = layer.shape;
    s.B = net.batch;
    s.C = positive_int(l, "C", where);
    s.M = positive_int(l, "M", where);
    s.H = positive_int(l, "H", where);
    s.W = positive_int(l, "W", where);
    s.K = positive_int(l, "K", where);
    if (s.K > s.H || s.K > s.W) {
      throw Error(where + ": the filter (K=" + std::to_string(s.K) +
                  ") is larger than the input (" + std::to_string(s.H) + "x" + std::to_string(s.W) +
                  "); H and W are the input size, padding included");
    }
    net.layers.push_back(std::move(layer));
  }
  net.shapes(net.batch);  // every tensor addressable with int at the default batch
  return net;
}

NetDescription load_net(const fs::path& file) {
  const auto text = try_read_file(file);
  if (!text) {
    throw Error("cannot read the network description " + file.string() +
                ": check the path, or name one of the files in datasets/nets");
  }
  return parse_net(*text, file.string());
}

std::vector<std::string> net_names(const fs::path& nets_dir) {
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(nets_dir, ec)) {
    if (entry.path().extension() == ".json") names.push_back(entry.path().stem().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

fs::path find_net(const std::string& name_or_path, const fs::path& nets_dir) {
  const bool looks_like_path =
      name_or_path.find('/') != std::string::npos || fs::path(name_or_path).extension() == ".json";
  if (looks_like_path) {
    if (fs::is_regular_file(name_or_path)) return name_or_path;
    throw Error("network description " + name_or_path + " not found: check the path");
  }
  const fs::path candidate = nets_dir / (name_or_path + ".json");
  if (fs::is_regular_file(candidate)) return candidate;
  std::string list;
  for (const std::string& n : net_names(nets_dir)) list += (list.empty() ? "" : ", ") + n;
  throw Error("unknown net '" + name_or_path + "': choose one of " +
              (list.empty() ? "(none found in " + nets_dir.string() + ")" : list) +
              ", or give the path of a .json file" + kFormatHint);
}

}  // namespace convlab
