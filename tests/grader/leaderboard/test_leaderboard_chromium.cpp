// The HTML leaderboard as a browser renders it: headless Chromium dumps the DOM (every team's
// row, both charts, hostile names as text) and takes a screenshot, left in the build tree
// (leaderboard.png) for a person to look at.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include "grader/leaderboard/leaderboard.hpp"
#include "reference/core/svg.hpp"
#include "tests/grader/leaderboard/sample_board.hpp"
#include "tests/support/browser.hpp"
#include "tests/support/test_support.hpp"

namespace test_leaderboard_chromium {

using namespace convlab;
using namespace convlab::grader;
namespace fs = std::filesystem;

namespace {

// How a browser serialises a text node: only &, < and > are escaped (and U+00A0).
std::string dom_text(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '&') {
      out += "&amp;";
    } else if (c == '<') {
      out += "&lt;";
    } else if (c == '>') {
      out += "&gt;";
    } else {
      out += c;
    }
  }
  return out;
}

}  // namespace

TEST_CASE("the leaderboard page renders in headless Chromium") {
  test::require_chromium();
  // The folder it runs in (ctest: tests/grader/leaderboard of the build tree), for a person to
  // look at.
  const fs::path out = fs::current_path();
  const fs::path page = out / "leaderboard.html", dom = out / "leaderboard.dom.html",
                 png = out / "leaderboard.png", log = out / "chromium.log";
  fs::remove(png);
  fs::remove(dom);

  const std::vector<TeamBest> teams = test::sample_teams();
  const Leaderboard board = rank_teams("final", teams, RankingRule{});
  const std::string html = leaderboard_html(board);
  std::ofstream(page, std::ios::binary) << html;

  // Nothing external: no URL in any src, href or CSS url().
  const std::regex external(R"((src|href)\s*=\s*["']?\s*(https?:)?//|url\(\s*["']?\s*(https?:)?//)",
                            std::regex::icase);
  CHECK(!std::regex_search(html, external));
  // Any other URL is inside a team's name, as text (one team is called =HYPERLINK("http://x")).
  std::string without_names = html;
  for (const LeaderboardRow& r : board.rows) {
    const std::string name = convlab::svg::escape(r.team);
    for (std::size_t p; (p = without_names.find(name)) != std::string::npos;) {
      without_names.erase(p, name.size());
    }
  }
  CHECK(without_names.find("http://") == std::string::npos);
  CHECK(without_names.find("https://") == std::string::npos);

  const std::string url = "file://" + page.string();
  const std::string d = test::dump_dom(url, dom, log);
  REQUIRE(d.size() > 1000);

  // The table has a row for every team, in rank order, the names as text.
  const std::size_t body = d.find("<tbody>");
  REQUIRE(body != std::string::npos);
  const std::string rows = d.substr(body, d.find("</tbody>") - body);
  CHECK(test::occurrences(rows, "<tr") == teams.size());
  std::size_t last = 0;
  for (const LeaderboardRow& r : board.rows) {
    const std::size_t at = rows.find("<td class=\"l team\">" + dom_text(r.team) + "</td>");
    CHECK_MESSAGE(at != std::string::npos, r.team);
    CHECK_MESSAGE(at >= last, r.team);
    last = at == std::string::npos ? last : at;
  }
  // A team called <script>...</script> is text, not an element.
  CHECK(d.find("&lt;script&gt;alert('x')&lt;/script&gt;") != std::string::npos);
  CHECK(d.find("<script") == std::string::npos);
  // Both charts are there, titled.
  CHECK(test::occurrences(d, "<svg") == 2);
  CHECK(d.find("Distribution of team times") != std::string::npos);
  CHECK(d.find("Op Time of every variant, per team") != std::string::npos);

  test::screenshot(url, png, 1280, 1600);
  REQUIRE(fs::exists(png));
  const std::string image = test::read_all(png);
  CHECK(image.rfind("\x89PNG\r\n\x1a\n", 0) == 0);
  // A blank 1280x1600 page compresses to a few kB; the table and charts take far more.
  CHECK(image.size() > 60000);
  // And the pixels say so: the page's background is not all there is, and the team dots and
  // the ranked variant's bars (#0072B2) are drawn.
  const test::Image shot = test::read_png(png);
  CHECK(shot.width == 1280);
  CHECK(shot.count_unlike_background(16) > 50000);
  CHECK(shot.count(0x0072B2, 24) > 500);
  MESSAGE("screenshot: " << png.string());
}

}  // namespace test_leaderboard_chromium
