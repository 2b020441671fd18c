// Each handout's "How it is graded" table is checks.json's grading, row for row: the table is
// rebuilt here from checks.json and compared with the handout's (a mismatch prints the table
// to paste in).
#include <doctest/doctest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "reference/conv/variant_table.hpp"
#include "tests/support/test_support.hpp"

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

std::string points_text(const json& p) {
  std::ostringstream s;
  s << p.get<double>();
  return s.str();
}

// The rows "| check | points |" that checks.json gives.
std::vector<std::string> expected_rows(const json& j) {
  std::vector<std::string> rows;
  const json& g = j.at("grading");
  // Final ranks one variant; its checks are those of m2 and m3, for that variant only.
  std::string ranked;
  if (j.contains("ranked_variant")) {
    ranked = " (`";
    ranked += j.at("ranked_variant").get<std::string>();
    ranked += "`)";
  }
  const auto row = [&](const std::string& check, const json& points) {
    rows.push_back("| " + check + " | " + points_text(points) + " |");
  };
  // Built piecewise: g++ 12 warns (-Wrestrict, wrongly) on "`" + string + ...
  const auto code = [](const std::string& name) {
    std::string text = "`";
    text += name;
    text += '`';
    return text;
  };
  for (const json& c : j.at("checks")) {
    if (c.value("points", 0) == 0) continue;
    row(code(c.at("model").get<std::string>()) +
            ", N = " + std::to_string(c.at("images").get<int>()) + ": exact count" + ranked,
        c.at("points"));
  }
  const json& e = g.at("elementwise");
  row("element-wise on " + std::to_string(e.at("shapes").size()) + " shapes, random inputs" +
          ranked,
      e.at("points"));
  if (g.contains("memcheck")) {
    row("compute-sanitizer memcheck, " + std::to_string(g.at("memcheck").at("images").get<int>()) +
            " images" + ranked,
        g.at("memcheck").at("points"));
  }
  row("each hidden model: exact count" + ranked, g.at("hidden_model_points"));
  if (g.contains("other_variants")) {
    const json& pts = g.at("other_variants").at("points_per_check");
    row("each other variant (`convlab variants` lists them): " +
            code(j.at("default_model").get<std::string>()) +
            ", N = " + std::to_string(j.at("default_images").get<int>()) + ": exact count",
        pts);
    row("each other variant: element-wise", pts);
    if (g.at("other_variants").contains("variant_points")) {
      for (const auto& [id, points] : g.at("other_variants").at("variant_points").items()) {
        row(code(id) + " instead: both checks together", points);
      }
    }
  }
  return rows;
}

// The table rows after the "## How it is graded" heading (header and separator left out).
std::vector<std::string> handout_rows(const fs::path& readme) {
  std::ifstream in(readme);
  std::string line;
  bool section = false, table = false;
  std::vector<std::string> rows;
  while (std::getline(in, line)) {
    if (line.starts_with("## ")) {
      if (section) break;
      section = line == "## How it is graded";
      continue;
    }
    if (!section) continue;
    if (line.starts_with("|")) {
      if (!table) {  // the header; the separator follows
        table = true;
        std::getline(in, line);
        continue;
      }
      rows.push_back(line);
    } else if (table) {
      break;
    }
  }
  return rows;
}

}  // namespace

TEST_CASE("every graded milestone's handout lists checks.json's checks and points") {
  int graded = 0;
  for (const char* id : {"m1", "m2", "m3", "final"}) {
    const fs::path dir = convlab::test::source_dir() / "milestones" / id;
    std::ifstream in(dir / "checks.json");
    REQUIRE(in);
    const json j = json::parse(in);
    if (!j.contains("grading")) continue;
    ++graded;
    const auto want = expected_rows(j);
    const auto have = handout_rows(dir / "README.md");
    std::string table = "| check | points |\n| --- | --- |\n";
    for (const std::string& r : want) table += r + "\n";
    CAPTURE(id);
    CHECK_MESSAGE(have == want, "milestones/" << id << "/README.md, section \"How it is graded\", "
                                              << "should hold this table:\n"
                                              << table);
  }
  CHECK(graded == 3);
}
