// The pages the service serves, as a browser shows them: the live leaderboard and a team's
// history and job pages, in headless Chromium (skipped, with the reason, where it is not
// installed); what other accounts get of the same pages. A real `convlab serve`
// on loopback and real `convlab submit` clients; the jobs run the stand-in grader
// (fake_grade.cpp), which prints the word the team's file gives it.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "tests/grader/service/fake_class.hpp"
#include "tests/support/browser.hpp"

namespace test_service_pages {

using convlab::test::contains;
using namespace convlab::test;
using nlohmann::json;

namespace {

// The page-link URL `convlab submit history [ARGS]` prints for `team`.
std::string page_link(const FakeClass& c, const std::string& team, const std::string& args = "") {
  std::string out;
  REQUIRE(c.client(team, "history " + args, &out) == 0);
  const auto at = out.find("http://");
  REQUIRE(at != std::string::npos);
  return out.substr(at, out.find('\n', at) - at);
}

// The DOM Chromium builds for `url`, in a fresh profile.
std::string dom(const std::string& url) {
  TempDir files;
  return dump_dom(url, files.path() / "page.html", files.path() / "chromium.log");
}

}  // namespace

TEST_CASE("the live leaderboard and a team's own pages, in Chromium; no team sees another's") {
  require_chromium();
  FakeClass c;
  ServeProcess server(c.dir,
                      c.options({"--cpu-jobs", "2", "--deadline", "m2=2099-01-01T00:00:00Z"}));
  c.login(server, "alpha");
  c.login(server, "beta");
  std::string out;
  c.code("alpha", "op_ms=2 say=alpha-secret-output");
  REQUIRE(c.client("alpha", "grade m2", &out) == 0);  // job 1
  c.code("beta", "op_ms=3 say=beta-secret-output");
  REQUIRE(c.client("beta", "grade m2", &out) == 0);  // job 2
  c.code("alpha", "op_ms=9");
  REQUIRE(c.client("alpha", "check m2", &out) == 0);  // job 3

  // The leaderboard: both teams, anonymised, served live; no login needed.
  const std::string board = dom(server.url() + "/leaderboard/m2");
  CHECK(contains(board, "Leaderboard: milestone m2"));
  CHECK(contains(board, ">anonymised<"));
  CHECK(contains(board, "Served live by <code>convlab serve</code>"));
  CHECK(contains(board, "grade that counts"));
  CHECK(occurrences(board, "<td class=\"l team\">Team ") == 2);
  CHECK_FALSE(contains(board, "alpha"));
  CHECK_FALSE(contains(board, "beta"));
  CHECK(contains(board, "2.000"));  // alpha's grade; its check (9 ms) is no grade
  CHECK_FALSE(contains(board, "9.000"));

  // alpha's history: its jobs and deadlines, its row's label; nothing of beta.
  const std::string team = dom(page_link(c, "alpha"));
  CHECK(contains(team, "<h1>Team alpha</h1>"));
  CHECK(contains(team, "id=\"job-1\""));
  CHECK(contains(team, "id=\"job-3\""));
  CHECK_FALSE(contains(team, "id=\"job-2\""));
  CHECK_FALSE(contains(team, "beta"));
  CHECK(contains(team, "2099-01-01 00:00:00 UTC"));
  CHECK(contains(team, "<span class=\"counts\">counts</span>"));
  // The label it shows is alpha's row on the board.
  const auto label_at = team.find("/leaderboard/m2\">Team ");
  REQUIRE(label_at != std::string::npos);
  const std::string label = team.substr(label_at + 17, 11);
  CHECK(contains(board, "<td class=\"l team\">" + label + "</td><td>2.000</td>"));

  // alpha's job page: its report and its output.
  const std::string job = dom(page_link(c, "alpha", "1"));
  CHECK(contains(job, "Job 1: grade m2"));
  CHECK(contains(job, "alpha-secret-output"));
  CHECK(contains(job, "cpu: ece408-high, 10000 images"));
  CHECK(contains(job, "the team's grade that counts on m2"));

  // The same pages, as other accounts fetch them (no browser needed to compare text): beta,
  // asking for alpha's job, gets what it gets for a job that does not exist; staff see all.
  httplib::Client http(server.url());
  const auto refused = http.Get("/team/jobs/1", bearer(c.token("beta")));
  CHECK(refused->status == 404);
  CHECK(contains(refused->body, "No such job"));
  CHECK_FALSE(contains(refused->body, "alpha-secret-output"));
  const std::string beta_team = http.Get("/team", bearer(c.token("beta")))->body;
  CHECK(contains(beta_team, "id=\"job-2\""));
  CHECK_FALSE(contains(beta_team, "id=\"job-1\""));
  CHECK_FALSE(contains(beta_team, "alpha"));
  const std::string staff = http.Get("/team", bearer(c.token("prof")))->body;
  CHECK(contains(staff, "<h1>Every team"));
  for (const char* id : {"job-1", "job-2", "job-3"}) CHECK(contains(staff, id));
}

}  // namespace test_service_pages
