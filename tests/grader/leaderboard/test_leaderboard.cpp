// Ranking math, the rule from checks.json, anonymous labels, and the text, CSV and HTML forms
// (escaping, self-containment).
#include <doctest/doctest.h>

#include <cmath>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <regex>
#include <set>

#include "grader/leaderboard/leaderboard.hpp"
#include "reference/core/error.hpp"
#include "reference/core/svg.hpp"
#include "tests/grader/leaderboard/sample_board.hpp"
#include "tests/support/test_support.hpp"

namespace test_leaderboard {

using convlab::test::error_of;
using namespace convlab;
using namespace convlab::grader;

namespace {

std::vector<TeamBest> teams_ms(const std::vector<double>& ms) {
  std::vector<TeamBest> out;
  for (std::size_t i = 0; i < ms.size(); ++i) {
    TeamBest t;
    t.team = std::string("t") + std::to_string(i);
    t.op_time_s = ms[i] * 1e-3;
    out.push_back(t);
  }
  return out;
}

RankingRule original() {
  return RankingRule{};  // stddev_from_median, 25 points, 6.25 per standard deviation
}

}  // namespace

TEST_CASE("median, population standard deviation, sigma and points") {
  // Times 1, 2, 3, 4, 10 ms: median 3, mean 4, population variance (9+4+1+0+36)/5 = 10.
  const Leaderboard b = rank_teams("final", teams_ms({4, 10, 1, 3, 2}), original());
  REQUIRE(b.rows.size() == 5);
  CHECK(b.median_s == doctest::Approx(3e-3));
  CHECK(b.stddev_s == doctest::Approx(std::sqrt(10.0) * 1e-3));  // not sqrt(12.5): population
  const double sd = std::sqrt(10.0);
  const double want_ms[] = {1, 2, 3, 4, 10};
  for (int i = 0; i < 5; ++i) {
    const LeaderboardRow& r = b.rows[static_cast<std::size_t>(i)];
    CHECK(r.rank == i + 1);
    CHECK(r.best.op_time_s == doctest::Approx(want_ms[i] * 1e-3));
    const double sigma = (want_ms[i] - 3.0) / sd;
    CHECK(r.stddevs_from_median == doctest::Approx(sigma));
    CHECK(r.points == doctest::Approx(std::clamp(12.5 - 6.25 * sigma, 0.0, 25.0)));
  }
  CHECK(b.rows[0].points > b.rows[1].points);        // faster earns more
  CHECK(b.rows[2].points == doctest::Approx(12.5));  // the median team gets half
  CHECK(b.rows[4].points == 0.0);  // 10 ms is 2.21 sigma slower: 12.5 - 13.8, clamped
}

TEST_CASE("an even number of teams takes the mean of the middle two as the median") {
  const Leaderboard b = rank_teams("final", teams_ms({1, 2, 3, 4}), original());
  CHECK(b.median_s == doctest::Approx(2.5e-3));
  CHECK(b.rows[1].stddevs_from_median < 0);
  CHECK(b.rows[2].stddevs_from_median > 0);
  CHECK(b.rows[1].points + b.rows[2].points == doctest::Approx(25.0));  // symmetric
}

TEST_CASE("points are clamped to [0, points]") {
  // Nine teams at 10 ms and one at 1 ms: sigma of the fast one is (1-10)/2.7 = -3.33.
  std::vector<double> ms(9, 10.0);
  ms.push_back(1.0);
  Leaderboard b = rank_teams("final", teams_ms(ms), original());
  CHECK(b.stddev_s == doctest::Approx(2.7e-3));
  CHECK(b.rows[0].stddevs_from_median == doctest::Approx(-9.0 / 2.7));
  CHECK(b.rows[0].points == 25.0);
  // The mirror: one slow team at 10 ms among nine at 1 ms gets nothing.
  std::vector<double> slow(9, 1.0);
  slow.push_back(10.0);
  b = rank_teams("final", teams_ms(slow), original());
  CHECK(b.rows.back().stddevs_from_median == doctest::Approx(9.0 / 2.7));
  CHECK(b.rows.back().points == 0.0);
  // Other numbers from the rule: 10 points, 2 per standard deviation.
  RankingRule r = original();
  r.points = 10;
  r.points_per_stddev = 2;
  b = rank_teams("final", teams_ms(slow), r);
  CHECK(b.rows.back().points == doctest::Approx(std::max(0.0, 5.0 - 2.0 * 9.0 / 2.7)));
  CHECK(b.rows.front().points == doctest::Approx(5.0));  // at the median: half of 10
}

TEST_CASE("one team, or all teams equal, get half the points") {
  Leaderboard b = rank_teams("final", teams_ms({3.2}), original());
  REQUIRE(b.rows.size() == 1);
  CHECK(b.rows[0].rank == 1);
  CHECK(b.stddev_s == 0.0);
  CHECK(b.rows[0].stddevs_from_median == 0.0);
  CHECK(b.rows[0].points == 12.5);
  b = rank_teams("final", teams_ms({2, 2, 2}), original());
  for (const LeaderboardRow& r : b.rows) {
    CHECK(r.rank == 1);
    CHECK(r.points == 12.5);
  }
  CHECK(rank_teams("final", {}, original()).rows.empty());
}

TEST_CASE("equal times share a rank and their points; the next rank skips") {
  const Leaderboard b = rank_teams("final", teams_ms({3, 2, 1, 2}), original());
  REQUIRE(b.rows.size() == 4);
  CHECK(b.rows[0].rank == 1);
  CHECK(b.rows[1].rank == 2);
  CHECK(b.rows[2].rank == 2);
  CHECK(b.rows[3].rank == 4);
  CHECK(b.rows[1].points == b.rows[2].points);
  CHECK(b.rows[1].team < b.rows[2].team);  // a stable order: by name within a tie
}

TEST_CASE("the threshold rule is linear between full_ms and zero_ms") {
  RankingRule r;
  r.rule = "threshold";
  r.points = 25;
  r.full_ms = 1.0;
  r.zero_ms = 8.0;
  CHECK(ranking_points(r, 0.0, 0.5e-3) == 25.0);
  CHECK(ranking_points(r, 0.0, 1.0e-3) == 25.0);
  CHECK(ranking_points(r, 0.0, 4.5e-3) == doctest::Approx(12.5));
  CHECK(ranking_points(r, 0.0, 7.3e-3) == doctest::Approx(25.0 * 0.7 / 7.0));
  CHECK(ranking_points(r, 0.0, 8.0e-3) == 0.0);
  CHECK(ranking_points(r, 0.0, 30e-3) == 0.0);
  // The board uses it, and sigma is still reported.
  const Leaderboard b = rank_teams("final", teams_ms({0.5, 4.5, 9}), r);
  CHECK(b.rows[0].points == 25.0);
  CHECK(b.rows[1].points == doctest::Approx(12.5));
  CHECK(b.rows[2].points == 0.0);
  CHECK(b.rows[0].stddevs_from_median < 0.0);
}

TEST_CASE("the rule comes from the milestone's checks.json") {
  const auto root = test::source_dir();
  RankingRule r = load_ranking_rule(root, "final");
  CHECK(r.rule == "stddev_from_median");
  CHECK(r.points == 25.0);
  CHECK(r.points_per_stddev == 6.25);
  CHECK(r.full_ms == 1.0);
  CHECK(r.zero_ms == 8.0);
  r = load_ranking_rule(root, "final", std::string("threshold"));
  CHECK(r.rule == "threshold");
  CHECK(r.full_ms == 1.0);
  CHECK(error_of([&] { load_ranking_rule(root, "m9"); }).find("unknown milestone 'm9'") !=
        std::string::npos);
  CHECK(error_of([&] {
          load_ranking_rule(root, "final", std::string("fastest"));
        }).find("unknown ranking rule 'fastest'") != std::string::npos);

  // The shipped file with another "ranking" (the milestone parser reads the rest).
  test::TempDir dir;
  std::filesystem::create_directories(dir.path() / "milestones" / "final");
  const auto write_final = [&](const std::optional<nlohmann::json>& ranking) {
    std::ifstream in(root / "milestones" / "final" / "checks.json");
    nlohmann::json j = nlohmann::json::parse(in);
    j.erase("ranking");
    if (ranking) j["ranking"] = *ranking;
    std::ofstream(dir.path() / "milestones" / "final" / "checks.json") << j.dump();
  };
  write_final(nlohmann::json::parse(R"({"rule": "threshold", "points": 25,
                                        "threshold": {"full_ms": 8, "zero_ms": 1}})"));
  CHECK(error_of([&] { load_ranking_rule(dir.path(), "final"); }).find("full_ms < zero_ms") !=
        std::string::npos);
  write_final(nlohmann::json::parse(R"({"threshold": {"full_ms": 8}})"));
  CHECK(error_of([&] {
          load_ranking_rule(dir.path(), "final");
        }).find("malformed milestone file") != std::string::npos);
  CHECK(error_of([&] {
          load_ranking_rule(dir.path(), "final");
        }).find("ranking.threshold.zero_ms: missing") != std::string::npos);
  std::ofstream(dir.path() / "milestones" / "final" / "checks.json") << R"({"ranking": {)";
  CHECK(error_of([&] { load_ranking_rule(dir.path(), "final"); }).find("malformed") !=
        std::string::npos);
  write_final(std::nullopt);
  r = load_ranking_rule(dir.path(), "final");  // no ranking object: the original rule
  CHECK(r.rule == "stddev_from_median");
  CHECK(r.points == 25.0);
  CHECK(error_of([&] {
          load_ranking_rule(dir.path(), "final", std::string("threshold"));
        }).find("no ranking threshold") != std::string::npos);
}

TEST_CASE("anonymous labels: a keyed hash, stable per key, unique on the board") {
  // SipHash-2-4 reference vectors (key 00..0f): the empty message and 00..0e.
  const std::string key = "000102030405060708090a0b0c0d0e0f";
  CHECK(anonymous_label("", key, 16) == "Team 726fdb47dd0e0e31");
  std::string fifteen;
  for (char c = 0; c < 15; ++c) fifteen += c;
  CHECK(anonymous_label(fifteen, key, 16) == "Team a129ca6149be45e5");

  const std::string k1 = "5f1d3c0a9b8e7d6c5b4a39281706f5e4",
                    k2 = "00000000000000000000000000000001";
  const std::vector<TeamBest> teams = test::sample_teams();
  const Leaderboard a = rank_teams("final", teams, original(), k1);
  const Leaderboard again = rank_teams("final", teams, original(), k1);
  const Leaderboard other = rank_teams("final", teams, original(), k2);
  const Leaderboard named = rank_teams("final", teams, original());
  CHECK(a.anonymized);
  CHECK(!named.anonymized);
  std::set<std::string> labels;
  const std::regex shape("Team [0-9a-f]{6}");
  for (std::size_t i = 0; i < a.rows.size(); ++i) {
    CHECK(std::regex_match(a.rows[i].team, shape));
    CHECK(a.rows[i].best.team == a.rows[i].team);  // the copy in best is replaced too
    CHECK(a.rows[i].team == again.rows[i].team);
    CHECK(a.rows[i].team != other.rows[i].team);
    CHECK(a.rows[i].points == named.rows[i].points);
    CHECK(!a.rows[i].best.flagged);  // flags are for staff
    CHECK(a.rows[i].best.flags.empty());
    CHECK(a.rows[i].best.run_id == 0);
    labels.insert(a.rows[i].team);
  }
  CHECK(labels.size() == teams.size());
  // Nothing of a name is left in any form of the anonymised board.
  const std::string text = leaderboard_text(a), csv = leaderboard_csv(a),
                    html = leaderboard_html(a);
  for (const TeamBest& t : teams) {
    // The name, and its first 12 characters (what a truncated label would show).
    for (const std::string& word : {t.team, t.team.substr(0, 12)}) {
      CHECK_MESSAGE(text.find(word) == std::string::npos, word);
      CHECK_MESSAGE(csv.find(word) == std::string::npos, word);
      CHECK_MESSAGE(html.find(convlab::svg::escape(word)) == std::string::npos, word);
    }
  }
  CHECK(html.find("anonymised") != std::string::npos);
  CHECK(named.rows[0].best.flagged);
  CHECK(html.find("\u2691<span class=\"sr\"> flagged") == std::string::npos);
  CHECK(leaderboard_html(named).find("\u2691<span class=\"sr\"> flagged") != std::string::npos);
}

TEST_CASE("colliding anonymous labels are lengthened, the others kept") {
  const std::string key = "0123456789abcdef0123456789abcdef";
  std::map<std::string, std::string> seen;
  std::string x, y;
  for (int i = 0; i < 200000 && x.empty(); ++i) {
    const std::string name = std::string("team") + std::to_string(i);
    const std::string label = anonymous_label(name, key);
    if (auto it = seen.find(label); it != seen.end()) {
      x = it->second;
      y = name;
    }
    seen.emplace(label, name);
  }
  REQUIRE_MESSAGE(!x.empty(), "no 24-bit collision among 200000 names");
  const std::vector<TeamBest> teams = teams_ms({1, 2, 3});
  std::vector<TeamBest> named = teams;
  named[0].team = x;
  named[1].team = y;
  named[2].team = "bystander";
  const Leaderboard b = rank_teams("final", named, original(), key);
  CHECK(b.rows[0].team != b.rows[1].team);
  CHECK(b.rows[0].team.size() > std::string("Team 123456").size());
  CHECK(b.rows[2].team == anonymous_label("bystander", key));
}

TEST_CASE("team names are escaped in HTML, quoted in CSV, made printable in text") {
  std::vector<TeamBest> teams = teams_ms({1, 2, 3, 4});
  teams[0].team = "<script>alert('pwned')</script>";
  teams[1].team = "Tom & \"Jerry\"";
  teams[2].team = "=HYPERLINK(\"http://evil\"),x";
  teams[3].team = "bell\x07 \x1b[31mred";
  const Leaderboard b = rank_teams("final", teams, original());

  const std::string html = leaderboard_html(b);
  CHECK(html.find("&lt;script&gt;alert(&#39;pwned&#39;)&lt;/script&gt;") != std::string::npos);
  CHECK(html.find("<script") == std::string::npos);
  CHECK(html.find("Tom &amp; &quot;Jerry&quot;") != std::string::npos);
  CHECK(html.find('\x1b') == std::string::npos);
  CHECK(convlab::svg::escape("a<b>&\"'") == "a&lt;b&gt;&amp;&quot;&#39;");

  const std::string csv = leaderboard_csv(b);
  CHECK(csv.find("\"'=HYPERLINK(\"\"http://evil\"\"),x\"") != std::string::npos);
  CHECK(csv.find("\"Tom & \"\"Jerry\"\"\"") != std::string::npos);
  CHECK(csv.find(",=") == std::string::npos);

  const std::string text = leaderboard_text(b);
  CHECK(text.find('\x1b') == std::string::npos);
  CHECK(text.find('\x07') == std::string::npos);
  CHECK(text.find("bell red") != std::string::npos);  // the escape sequence dropped whole
}

TEST_CASE("the CSV and text forms carry every row and the statistics") {
  const Leaderboard b = rank_teams("final", test::sample_teams(), original());
  const std::string csv = leaderboard_csv(b);
  CHECK(csv.rfind("rank,team,op_time_ms,median_ms,cudnn_ms,speedup,sigma,points,flagged", 0) == 0);
  CHECK(test::occurrences(csv, "\n") == b.rows.size() + 1);
  CHECK(csv.find("1,warp_speed,0.6120,0.6193,1.5510,2.53,") != std::string::npos);

  const std::string text = leaderboard_text(b);
  CHECK(text.find("Median 1.776 ms") != std::string::npos);  // (1.562 + 1.990) / 2
  CHECK(text.find("warp_speed") != std::string::npos);
  CHECK(text.find("The Extraordinarily Long Team...") != std::string::npos);  // 32 wide
  CHECK(text.find("(!)") != std::string::npos);
  CHECK(text.find("NVIDIA H100 80GB HBM3") != std::string::npos);
  CHECK(leaderboard_text(rank_teams("final", {}, original())).find("No team") != std::string::npos);
}

TEST_CASE("the HTML page is one self-contained document with the table and two charts") {
  const Leaderboard b = rank_teams("final", test::sample_teams(), original());
  const std::string html = leaderboard_html(b);
  CHECK(html.rfind("<!DOCTYPE html>", 0) == 0);
  CHECK(test::occurrences(html, "<svg") == 2);
  CHECK(test::occurrences(html, "<tr class=") == b.rows.size());  // body rows
  CHECK(html.find("<script") == std::string::npos);
  // A URL may only appear inside a team's (escaped) name, as text.
  std::string without_names = html;
  for (const LeaderboardRow& r : b.rows) {
    const std::string name = convlab::svg::escape(r.team);
    for (std::size_t p; (p = without_names.find(name)) != std::string::npos;) {
      without_names.erase(p, name.size());
    }
  }
  CHECK(without_names.find("http://") == std::string::npos);
  CHECK(without_names.find("https://") == std::string::npos);
  CHECK(html.find("url(") == std::string::npos);
  CHECK(html.find("@import") == std::string::npos);
  CHECK(html.find(" src=") == std::string::npos);
  CHECK(html.find("href=") == std::string::npos);
  CHECK(html.find("Content-Security-Policy") != std::string::npos);
  // The distribution has the median line and both bands; the variant chart a legend entry per
  // variant and cuDNN ticks.
  CHECK(html.find("class=\"med-line\"") != std::string::npos);
  CHECK(html.find("class=\"band1\"") != std::string::npos);
  CHECK(html.find("class=\"band2\"") != std::string::npos);
  for (const char* v : {"shared_tiling", "threads_1024", "unroll", "constant_memory", "best"}) {
    CHECK_MESSAGE(html.find(std::string("</span>") + v) != std::string::npos, std::string(v));
  }
  CHECK(html.find("</span>best (ranked)</li>") != std::string::npos);
  CHECK(test::occurrences(html, "<g class=\"ref\">") == b.rows.size());
  CHECK(html.find("no correct time") != std::string::npos);  // a failed variant is said so
  CHECK(html.find("median 1.776 ms") != std::string::npos);
  CHECK(html.find("Op Time (ms)") != std::string::npos);  // axis titles in ms

  // Threshold: the full and zero lines appear instead of points at the band edges.
  RankingRule t = load_ranking_rule(test::source_dir(), "final", std::string("threshold"));
  const std::string thr = leaderboard_html(rank_teams("final", test::sample_teams(), t));
  CHECK(thr.find("full credit") != std::string::npos);
  CHECK(thr.find("no credit") != std::string::npos);

  const std::string empty = leaderboard_html(rank_teams("final", {}, original()));
  CHECK(empty.find("No team has a correct timed run") != std::string::npos);
  CHECK(empty.find("<svg") == std::string::npos);
}

TEST_CASE("team names lose their terminal controls in every form of the board") {
  std::vector<TeamBest> teams = teams_ms({2, 1});
  teams[0].team = "evil\x1b[2J\x1b]0;title\x07-team\x07";
  const Leaderboard b = rank_teams("final", teams, original());
  REQUIRE(b.rows.size() == 2);
  CHECK(b.rows[1].team == "evil-team");
  for (const std::string& text : {leaderboard_text(b), leaderboard_csv(b), leaderboard_html(b)}) {
    CHECK(text.find('\x1b') == std::string::npos);
    CHECK(text.find('\x07') == std::string::npos);
    CHECK(text.find("evil-team") != std::string::npos);
  }
}

}  // namespace test_leaderboard
