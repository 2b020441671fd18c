#include "reference/milestones/milestone.hpp"

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>

#include "reference/conv/variant_table.hpp"
#include "reference/core/error.hpp"

namespace convlab {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// "m3" -> 3; 0 for an id that is not m<number>.
int milestone_number(const std::string& id) {
  if (id.size() < 2 || id[0] != 'm') return 0;
  if (!std::all_of(id.begin() + 1, id.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    return 0;
  }
  return std::atoi(id.c_str() + 1);
}

// Reads the fields of one JSON object, naming the field (checks[2].images) in every error.
class Fields {
 public:
  Fields(const json& j, std::string where) : j_(j), where_(std::move(where)) {
    if (!j_.is_object()) fail(where_.empty() ? "the file" : where_, "an object");
  }

  bool has(const char* key) const { return j_.contains(key); }
  std::string name(const char* key) const { return where_.empty() ? key : where_ + "." + key; }
  const json& at(const char* key) const {
    if (!has(key)) throw Error(name(key) + ": missing");
    return j_.at(key);
  }

  std::string str(const char* key) const { return text(at(key), name(key)); }
  std::string str(const char* key, const std::string& fallback) const {
    return has(key) ? str(key) : fallback;
  }
  std::int64_t integer(const char* key) const {
    const json& v = at(key);
    if (!v.is_number_integer()) fail(name(key), "an integer");
    return v.get<std::int64_t>();
  }
  std::int64_t integer(const char* key, std::int64_t fallback) const {
    return has(key) ? integer(key) : fallback;
  }
  double number(const char* key) const {
    const json& v = at(key);
    if (!v.is_number()) fail(name(key), "a number");
    return v.get<double>();
  }
  double number(const char* key, double fallback) const {
    return has(key) ? number(key) : fallback;
  }
  std::vector<std::string> strings(const char* key) const {
    std::vector<std::string> out;
    for (std::size_t i = 0; const json& v : array(key)) {
      out.push_back(text(v, name(key) + "[" + std::to_string(i++) + "]"));
    }
    return out;
  }
  const json& array(const char* key) const {
    const json& v = at(key);
    if (!v.is_array()) fail(name(key), "a list");
    return v;
  }

  [[noreturn]] static void fail(const std::string& field, const std::string& expected) {
    throw Error(field + ": expected " + expected);
  }

 private:
  static std::string text(const json& v, const std::string& field) {
    if (!v.is_string()) fail(field, "a string");
    return v.get<std::string>();
  }

  const json& j_;
  std::string where_;
};

int to_int(std::int64_t v, const std::string& field) {
  if (v < 0 || v > 1'000'000'000) throw Error(field + ": out of range");
  return static_cast<int>(v);
}

Check parse_check(const json& j, const std::string& where) {
  const Fields f(j, where);
  Check c;
  c.model = f.str("model");
  c.images = f.integer("images");
  if (c.images < 1) throw Error(f.name("images") + ": must be at least 1");
  c.expected_correct = f.integer("expected_correct");
  c.device = f.str("device", "");
  c.points = to_int(f.integer("points", 0), f.name("points"));
  return c;
}

ElementwiseGrading parse_elementwise(const json& j) {
  const Fields f(j, "grading.elementwise");
  ElementwiseGrading e;
  e.points = f.number("points", 0.0);
  e.atol = f.number("atol", 1e-4);
  e.rtol = f.number("rtol", 1e-4);
  for (std::size_t i = 0; const json& s : f.array("shapes")) {
    const std::string where = f.name("shapes") + "[" + std::to_string(i++) + "]";
    const Fields sf(s, where);
    const auto size = [&](const char* k) { return to_int(sf.integer(k), sf.name(k)); };
    const ConvShape shape{size("B"), size("M"), size("C"), size("H"), size("W"), size("K")};
    try {
      shape.validate();
    } catch (const Error& bad) {
      throw Error(where + ": " + bad.what());
    }
    e.shapes.push_back(shape);
    e.why.push_back(sf.str("why", ""));
  }
  return e;
}

MilestoneGrading parse_grading(const json& j) {
  const Fields f(j, "grading");
  MilestoneGrading g;
  if (f.has("elementwise")) g.elementwise = parse_elementwise(f.at("elementwise"));
  g.hidden_model_points = f.number("hidden_model_points", 0.0);
  if (f.has("other_variants")) {
    const Fields o(f.at("other_variants"), f.name("other_variants"));
    g.other_points_per_check = o.number("points_per_check", 0.0);
    if (o.has("variant_points")) {
      const json& points = o.at("variant_points");
      if (!points.is_object()) throw Error(o.name("variant_points") + ": must be an object");
      for (const auto& [id, value] : points.items()) {
        if (!value.is_number() || value.get<double>() < 0) {
          throw Error(o.name("variant_points") + "." + id + ": must be a number >= 0");
        }
        g.variant_points[id] = value.get<double>();
      }
    }
  }
  g.flag_speedup_over = f.number("flag_speedup_over", 10.0);
  if (f.has("memcheck")) {
    const Fields m(f.at("memcheck"), f.name("memcheck"));
    g.memcheck = MemcheckGrading{m.number("points", 0.0), m.integer("images", 100)};
    if (g.memcheck->images < 1) throw Error(m.name("images") + ": must be at least 1");
  }
  return g;
}

MilestoneRanking parse_ranking(const json& j) {
  const Fields f(j, "ranking");
  MilestoneRanking r;
  r.rule = f.str("rule", r.rule);
  r.points = f.number("points", r.points);
  r.points_per_stddev = f.number("points_per_stddev", r.points_per_stddev);
  if (f.has("threshold")) {
    const Fields t(f.at("threshold"), f.name("threshold"));
    r.threshold_ms = std::make_pair(t.number("full_ms"), t.number("zero_ms"));
  }
  return r;
}

// The core fields, and that the variants named by default/ranked are the milestone's.
void parse_core(const Fields& f, Milestone& m) {
  const std::string declared = f.str("milestone");
  if (declared != m.id) {
    throw Error("milestone: says '" + declared + "', but its folder is '" + m.id + "'");
  }
  m.title = f.str("title");
  // The files and the --variant values come from the variant declarations (variants.def); a
  // list here would be a second copy that can disagree.
  for (const char* key : {"team_writes", "team_folders", "variants"}) {
    if (f.has(key)) {
      throw Error(std::string(key) + ": comes from reference/conv/variants.def; remove it here");
    }
  }
  for (const Variant& v : variants()) {
    if (v.milestone != m.id) continue;
    m.team_writes.emplace_back(v.student_file);
    m.team_folders.push_back(v.student_folder());
  }
  m.devices = f.strings("devices");
  if (m.devices.empty()) throw Error("devices: lists none");
  m.default_device = f.str("default_device");
  if (std::find(m.devices.begin(), m.devices.end(), m.default_device) == m.devices.end()) {
    throw Error("default_device: '" + m.default_device + "' is not one of its devices");
  }
  m.variants = variant_ids(m.id, "gpu");
  m.default_variant = f.str("default_variant", m.variants.empty() ? "" : m.variants.front());
  m.ranked_variant = f.str("ranked_variant", m.default_variant);
  for (const char* key : {"default_variant", "ranked_variant"}) {
    const std::string& v = key[0] == 'd' ? m.default_variant : m.ranked_variant;
    if (!v.empty() && std::find(m.variants.begin(), m.variants.end(), v) == m.variants.end()) {
      throw Error(std::string(key) + ": '" + v + "' is not one of its variants");
    }
  }
  m.default_model = f.str("default_model");
  m.default_images = f.integer("default_images");
  if (m.default_images < 1) throw Error("default_images: must be at least 1");
  m.time_limit_s = f.number("time_limit_s");
  if (!(m.time_limit_s > 0.0)) throw Error("time_limit_s: must be positive");
  m.timed_runs = to_int(f.integer("timed_runs", 3), "timed_runs");
  if (m.timed_runs < 1) throw Error("timed_runs: must be at least 1");
}

}  // namespace

double Milestone::elementwise_atol() const {
  return grading && grading->elementwise ? grading->elementwise->atol : 1e-4;
}

double Milestone::elementwise_rtol() const {
  return grading && grading->elementwise ? grading->elementwise->rtol : 1e-4;
}

std::optional<std::int64_t> Milestone::expected(const std::string& model, std::int64_t images,
                                                const std::string& device) const {
  for (const Check& c : checks) {
    if (c.model == model && c.images == images && (c.device.empty() || c.device == device)) {
      return c.expected_correct;
    }
  }
  return std::nullopt;
}

std::vector<std::string> milestone_ids(const fs::path& root) {
  std::vector<std::string> ids;
  std::error_code ec;
  for (fs::directory_iterator it(root / "milestones", ec), end; !ec && it != end;
       it.increment(ec)) {
    if (fs::is_regular_file(it->path() / "checks.json")) {
      ids.push_back(it->path().filename().string());
    }
  }
  std::sort(ids.begin(), ids.end(), [](const std::string& a, const std::string& b) {
    const int na = milestone_number(a), nb = milestone_number(b);
    if ((na > 0) != (nb > 0)) return na > 0;
    return na != nb ? na < nb : a < b;
  });
  return ids;
}

std::vector<std::string> graded_milestone_ids(const fs::path& root) {
  std::vector<std::string> ids;
  for (const std::string& id : milestone_ids(root)) {
    if (load_milestone(root, id).graded()) ids.push_back(id);
  }
  return ids;
}

Milestone parse_milestone_file(const fs::path& file) {
  std::ifstream in(file);
  if (!in) throw Error("cannot read " + file.string() + ": is CONVLAB_ROOT right?");
  Milestone m;
  m.id = file.parent_path().filename().string();
  m.file = file;
  try {
    const json j = json::parse(in);
    const Fields f(j, "");
    parse_core(f, m);
    for (std::size_t i = 0; const json& c : f.array("checks")) {
      m.checks.push_back(parse_check(c, "checks[" + std::to_string(i++) + "]"));
    }
    if (f.has("grading")) m.grading = parse_grading(f.at("grading"));
    for (const auto& [id, points] :
         m.grading ? m.grading->variant_points : std::map<std::string, double>{}) {
      if (std::find(m.variants.begin(), m.variants.end(), id) == m.variants.end()) {
        throw Error("grading.other_variants.variant_points: '" + id +
                    "' is not one of its variants (convlab variants lists them)");
      }
    }
    if (f.has("ranking")) m.ranking = parse_ranking(f.at("ranking"));
  } catch (const json::exception& e) {
    throw Error("malformed milestone file " + file.string() + ": not JSON (" + e.what() + ")");
  } catch (const Error& e) {
    throw Error("malformed milestone file " + file.string() + ": " + e.what());
  }
  return m;
}

Milestone load_milestone(const fs::path& root, const std::string& id) {
  const std::vector<std::string> ids = milestone_ids(root);
  if (std::find(ids.begin(), ids.end(), id) == ids.end()) {
    std::string list;
    for (const std::string& m : ids) list += (list.empty() ? "" : ", ") + m;
    if (list.empty()) {
      throw Error("unknown milestone '" + id + "': " + (root / "milestones").string() +
                  " holds no milestone (is CONVLAB_ROOT right?)");
    }
    throw Error("unknown milestone '" + id + "': choose one of " + list);
  }
  return parse_milestone_file(root / "milestones" / id / "checks.json");
}

}  // namespace convlab
