// Isolation between teams, for real: a `convlab serve` on loopback, `convlab submit` clients and
// plain HTTP calls with each team's token or page session. The jobs run the stand-in grader
// (fake_grade.cpp), which prints the word the team's file gives it.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "tests/grader/service/fake_class.hpp"

namespace test_service_isolation {

using convlab::test::contains;
using namespace convlab::test;
using nlohmann::json;

namespace {

// The page-link URL `convlab submit history` prints for `team`.
std::string page_link(const FakeClass& c, const std::string& team) {
  std::string out;
  REQUIRE(c.client(team, "history", &out) == 0);
  const auto at = out.find("http://");
  REQUIRE(at != std::string::npos);
  return out.substr(at, out.find('\n', at) - at);
}

}  // namespace

TEST_CASE("a team asking for another team's job, output, report or page is refused") {
  FakeClass c;
  ServeProcess server(c.dir, c.options({"--cpu-jobs", "1"}));
  c.login(server, "alpha");
  c.login(server, "beta");
  std::string out;
  c.code("alpha", "op_ms=2 say=alpha-secret-output");
  REQUIRE(c.client("alpha", "grade m2", &out) == 0);  // job 1

  httplib::Client http(server.url());
  const auto alpha = bearer(c.token("alpha")), beta = bearer(c.token("beta"));
  for (const std::string path :
       {"/api/v1/jobs/1", "/api/v1/jobs/1/output", "/api/v1/jobs/1/report", "/team/jobs/1"}) {
    CAPTURE(path);
    const auto mine = http.Get(path, alpha);
    REQUIRE(mine);
    CHECK(mine->status == 200);
    const auto theirs = http.Get(path, beta);
    REQUIRE(theirs);
    CHECK(theirs->status == 404);
    CHECK_FALSE(contains(theirs->body, "alpha-secret-output"));
    CHECK_FALSE(contains(theirs->body, "passed"));
  }
  // beta's history lists none of alpha's jobs, by the API or the page.
  CHECK(json::parse(http.Get("/api/v1/jobs", beta)->body)["jobs"].empty());
  const auto page = http.Get("/team", beta);
  CHECK(page->status == 200);
  CHECK_FALSE(contains(page->body, "job-1"));
  CHECK(c.client("beta", "output 1", &out) == 1);
  CHECK(contains(out, "HTTP 404"));

  // A page without a session says how to get one; a link works once.
  CHECK(http.Get("/team")->status == 401);
  CHECK(contains(http.Get("/team")->body, "convlab submit history"));
  const std::string link = page_link(c, "alpha");
  const std::string path = link.substr(link.find("/login/"));
  const auto first = http.Get(path);
  REQUIRE(first);
  CHECK(first->status == 303);
  CHECK(first->get_header_value("Location") == "/team");
  const std::string cookie = first->get_header_value("Set-Cookie");
  CHECK(contains(cookie, "HttpOnly"));
  CHECK(contains(cookie, "SameSite=Strict"));
  CHECK(http.Get(path)->status == 401);
  // The session opens alpha's pages, and only alpha's.
  const httplib::Headers session{{"Cookie", cookie.substr(0, cookie.find(';'))}};
  CHECK(http.Get("/team/jobs/1", session)->status == 200);
  CHECK(http.Get("/team/jobs/1", {{"Cookie", "convlab_session=forged"}})->status == 401);
  // A token issued anew ends the sessions opened with the old one.
  const std::string issue = shell_quote(convlab_binary().string()) +
                            " serve issue-token --roster " +
                            shell_quote((c.dir / "roster.csv").string()) + " --db " +
                            shell_quote((c.dir / "results.sqlite").string()) + " --team alpha";
  REQUIRE(run_command(issue, &out) == 0);
  CHECK(http.Get("/team/jobs/1", session)->status == 401);
  // An unknown leaderboard is a clear 404, and the text form serves `convlab submit ranking`.
  CHECK(http.Get("/leaderboard/m9")->status == 404);
  REQUIRE(c.client("beta", "ranking m2", &out) == 0);
  CHECK(contains(out, "Leaderboard: milestone m2, 1 team (anonymised)"));
  CHECK_FALSE(contains(out, "alpha"));
}

}  // namespace test_service_isolation
