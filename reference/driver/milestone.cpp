#include "reference/conv/variant_table.hpp"
#include "reference/driver/milestone.hpp"

#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>

#include "reference/core/error.hpp"

namespace convlab {

namespace fs = std::filesystem;

fs::path convlab_root() {
  if (const char* env = std::getenv("CONVLAB_ROOT"); env != nullptr && *env != '\0') return env;
  // An installed convlab (cmake --install) reads its data from PREFIX/share/convlab, beside
  // PREFIX/bin; a build reads the tree it was built from.
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    const fs::path installed = exe.parent_path().parent_path() / CONVLAB_INSTALL_DATA_DIR;
    if (fs::is_regular_file(installed / "milestones/m1/checks.json", ec)) return installed;
  }
  return CONVLAB_DEFAULT_ROOT;
}

const std::vector<std::string>& milestone_ids() {
  static const std::vector<std::string> ids{"m1", "m2", "m3", "final"};
  return ids;
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

Milestone load_milestone(const fs::path& root, const std::string& id) {
  bool known = false;
  std::string list;
  for (const std::string& m : milestone_ids()) {
    known = known || m == id;
    list += (list.empty() ? "" : ", ") + m;
  }
  if (!known) throw Error("unknown milestone '" + id + "': choose one of " + list);
  const fs::path path = root / "milestones" / id / "checks.json";
  std::ifstream in(path);
  if (!in) throw Error("cannot read " + path.string() + ": is CONVLAB_ROOT right?");
  try {
    const nlohmann::json j = nlohmann::json::parse(in);
    Milestone m;
    m.id = j.at("milestone").get<std::string>();
    m.title = j.at("title").get<std::string>();
    // The files and the --variant values come from the variant declarations (variants.def).
    for (const Variant& v : variants()) {
      if (v.milestone == m.id) m.team_writes.emplace_back(v.student_file);
    }
    m.devices = j.at("devices").get<std::vector<std::string>>();
    m.default_device = j.at("default_device").get<std::string>();
    m.variants = variant_ids(m.id, "gpu");
    m.default_variant = j.value("default_variant", m.variants.empty() ? "" : m.variants.front());
    m.default_model = j.at("default_model").get<std::string>();
    m.default_images = j.at("default_images").get<std::int64_t>();
    m.time_limit_s = j.at("time_limit_s").get<double>();
    for (const auto& c : j.at("checks")) {
      m.checks.push_back({c.at("model").get<std::string>(), c.at("images").get<std::int64_t>(),
                          c.at("expected_correct").get<std::int64_t>(), c.value("device", ""),
                          c.value("points", 0)});
    }
    if (j.contains("grading") && j.at("grading").contains("elementwise")) {
      const auto& e = j.at("grading").at("elementwise");
      m.elementwise_atol = e.value("atol", m.elementwise_atol);
      m.elementwise_rtol = e.value("rtol", m.elementwise_rtol);
    }
    if (m.id != id) throw Error("it says it is milestone '" + m.id + "'");
    return m;
  } catch (const nlohmann::json::exception& e) {
    throw Error("malformed milestone file " + path.string() + ": " + e.what());
  } catch (const Error& e) {
    throw Error("malformed milestone file " + path.string() + ": " + e.what());
  }
}

}  // namespace convlab
