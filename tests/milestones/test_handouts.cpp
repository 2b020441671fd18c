// Each handout's "How it is graded" table is checks.json's grading, row for row: the table is
// rebuilt here from checks.json and compared with the handout's (a mismatch prints the table
// to paste in). The points totals and the ranking rule, with its numbers, stand in generated
// blocks of the final handout and docs/grader.md; CONVLAB_UPDATE_DOCS=1 makes this test
// rewrite them from checks.json, and without it a block that drifted fails.
#include <doctest/doctest.h>

#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "grader/leaderboard/board_format.hpp"
#include "grader/leaderboard/leaderboard.hpp"
#include "reference/conv/variant_table.hpp"
#include "tests/support/test_support.hpp"

namespace test_handouts {

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

json read_checks(const std::string& id) {
  std::ifstream in(convlab::test::source_dir() / "milestones" / id / "checks.json");
  REQUIRE(in);
  return json::parse(in);
}

std::string num(double v) {
  return points_text(v);
}

// A milestone's points before hidden models, split as docs/grader.md's table shows them.
struct Totals {
  std::string network;  // "10 + 10 + 5"
  double network_sum = 0, elementwise = 0, memcheck = 0;
  int fixed_variants = 0;  // the handout's steps: points_per_check for each of two checks
  double per_check = 0, menu = 0;
  double required() const {
    return network_sum + elementwise + memcheck + fixed_variants * 2 * per_check;
  }
};

Totals totals(const json& j, const std::string& id) {
  Totals t;
  for (const json& c : j.at("checks")) {
    const double p = c.value("points", 0.0);
    if (p == 0) continue;
    t.network += (t.network.empty() ? "" : " + ") + num(p);
    t.network_sum += p;
  }
  const json& g = j.at("grading");
  t.elementwise = g.at("elementwise").at("points").get<double>();
  if (g.contains("memcheck")) t.memcheck = g.at("memcheck").at("points").get<double>();
  if (g.contains("other_variants")) {
    const json& o = g.at("other_variants");
    t.per_check = o.at("points_per_check").get<double>();
    const json menu = o.value("variant_points", json::object());
    for (const auto& [name, points] : menu.items()) t.menu += points.get<double>();
    for (const convlab::Variant& v : convlab::variants()) {
      if (v.milestone == id && v.id != j.at("ranked_variant").get<std::string>() &&
          !menu.contains(std::string(v.id))) {
        ++t.fixed_variants;
      }
    }
  }
  return t;
}

// Each paragraph of `text` (lines of prose; table rows stay as they are) wrapped at 100.
std::string wrapped(const std::string& text) {
  std::istringstream in(text);
  std::string out, line;
  while (std::getline(in, line)) {
    if (line.starts_with("|") || line.size() <= 100) {
      out += line + "\n";
      continue;
    }
    std::istringstream words(line);
    std::string current;
    for (std::string w; words >> w;) {
      if (!current.empty() && current.size() + 1 + w.size() > 100) {
        out += current + "\n";
        current.clear();
      }
      current += (current.empty() ? "" : " ") + w;
    }
    out += current + "\n";
  }
  return out;
}

// The text between the lines "<!-- NAME: generated ..." and "<!-- NAME: end -->" of `file`
// must be `want`; with CONVLAB_UPDATE_DOCS set, it is rewritten to be.
void check_block(const fs::path& file, const std::string& name, const std::string& text_in) {
  const std::string want = wrapped(text_in);
  std::ifstream in(file, std::ios::binary);
  REQUIRE(in);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  in.close();
  const std::string open = "<!-- " + name + ": generated", close = "<!-- " + name + ": end -->";
  const std::size_t b = text.find(open), e = text.find(close);
  REQUIRE_MESSAGE(b != std::string::npos, file.string() << " has no line " << open);
  REQUIRE_MESSAGE(e != std::string::npos, file.string() << " has no line " << close);
  const std::size_t body = text.find('\n', b) + 1;
  REQUIRE(body <= e);
  if (std::getenv("CONVLAB_UPDATE_DOCS") != nullptr) {
    text.replace(body, e - body, want);
    std::ofstream(file, std::ios::binary | std::ios::trunc) << text;
    return;
  }
  CHECK_MESSAGE(text.substr(body, e - body) == want,
                file.string() << ", block \"" << name << "\", is not what checks.json gives; "
                              << "rerun this test with CONVLAB_UPDATE_DOCS=1 to rewrite it as:\n"
                              << want);
}

}  // namespace

TEST_CASE("docs/grader.md's points table is checks.json's") {
  std::string table =
      "| milestone | network | element-wise | memcheck | other variants | menu (optional) | "
      "total before hidden models |\n| --- | --- | --- | --- | --- | --- | --- |\n";
  double hidden = -1;
  for (const char* id : {"m2", "m3", "final"}) {
    const json j = read_checks(id);
    const Totals t = totals(j, id);
    const double h = j.at("grading").at("hidden_model_points").get<double>();
    CHECK_MESSAGE((hidden < 0 || hidden == h), "hidden_model_points differs between milestones");
    hidden = h;
    const std::string dash = "\u2014";
    table += std::string("| ") + id + " | " + t.network + " | " + num(t.elementwise) + " | " +
             (t.memcheck > 0 ? num(t.memcheck) : dash) + " | " +
             (t.fixed_variants > 0 ? std::to_string(t.fixed_variants) + " x (" + num(t.per_check) +
                                         " + " + num(t.per_check) + ")"
                                   : dash) +
             " | " + (t.menu > 0 ? num(t.menu) : dash) + " | " + num(t.required()) +
             (t.menu > 0 ? ", " + num(t.required() + t.menu) + " with the menu" : "") + " |\n";
  }
  const auto rule = convlab::grader::load_ranking_rule(convlab::test::source_dir(), "final");
  table += "\nEach hidden model adds `hidden_model_points` (" + num(hidden) +
           "). The menu is optional: an item left as its stub scores nothing for its own two "
           "checks and costs nothing else. The ranking points of final (up to " +
           num(rule.points) +
           ", the rule in `checks.json` \"ranking\") are the leaderboard's, computed over the "
           "class.\n";
  check_block(convlab::test::source_dir() / "docs/grader.md", "points", table);
}

TEST_CASE("the final handout states its totals and the ranking rule with checks.json's numbers") {
  const json j = read_checks("final");
  const Totals t = totals(j, "final");
  const fs::path root = convlab::test::source_dir();
  const auto rule = convlab::grader::load_ranking_rule(root, "final");
  const auto threshold = convlab::grader::load_ranking_rule(root, "final", "threshold");
  REQUIRE(rule.rule == "stddev_from_median");
  const std::string text =
      "Without hidden models the checks are worth " + num(t.required()) +
      " points: " + num(t.network_sum + t.elementwise + t.memcheck) + " for `best` and " +
      num(t.fixed_variants * 2 * t.per_check) + " for the " + std::to_string(t.fixed_variants) +
      " steps' variants; the menu adds up to " + num(t.menu) +
      " more. The menu is optional: an item left as its stub scores nothing for " +
      "its own two checks and costs nothing else. Each hidden model adds " +
      num(j.at("grading").at("hidden_model_points").get<double>()) + ".\n\n" + "Ranking, up to " +
      num(rule.points) + " points more, is the leaderboard's, over the " +
      "class's times (only exactly correct submissions are ranked): " +
      convlab::grader::board::rule_sentence(rule) + ". A standard deviation is that of the " +
      "class's times, so the points need the whole class. The instructor may rank by the " +
      "threshold rule instead: " + convlab::grader::board::rule_sentence(threshold) +
      ". A time more than " + num(j.at("grading").at("flag_speedup_over").get<double>()) +
      " times faster than the library convolution's gets a human look before it counts.\n";
  check_block(root / "milestones/final/README.md", "points", text);
}

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

}  // namespace test_handouts
