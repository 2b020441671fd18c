// `convlab leaderboard` end to end on a results database: the table, CSV, HTML, the
// anonymised view and its label list, the threshold rule, and clear errors on bad input.
#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "grader/db/results_db.hpp"
#include "tests/support/test_support.hpp"

namespace test_leaderboard_cli {

using namespace convlab;
using namespace convlab::grader;
namespace fs = std::filesystem;

namespace {

GradeResult grade(const std::string& team, double ms) {
  GradeResult g;
  g.team = team;
  g.milestone = "final";
  g.submission = "/s/" + team;
  g.started_at = "2025-05-01T12:00:00Z";
  g.op_time_s = ms * 1e-3;
  g.reference_time_s = 1.55e-3;
  g.ranked_variant = "best";
  g.ranked_model = "ece408-high";
  g.ranked_images = 10000;
  g.machine.gpu_name = "NVIDIA H100 80GB HBM3";
  for (const char* v : {"unroll", "best"}) {
    CheckResult c;
    c.id = std::string("network/") + v + "/ece408-high/10000";
    c.kind = "network";
    c.status = CheckStatus::passed;
    c.variant = v;
    c.model = "ece408-high";
    c.images = 10000;
    c.op_time_s = ms * 1e-3 * (c.variant == "best" ? 1.0 : 5.0);
    g.checks.push_back(c);
  }
  return g;
}

std::string leaderboard(const std::string& args, int* rc) {
  std::string out;
  *rc = test::run_command(test::convlab_binary().string() + " leaderboard " + args, &out);
  return out;
}

}  // namespace

TEST_CASE("convlab leaderboard reads the database and writes the table, CSV and HTML") {
  test::TempDir dir;
  const fs::path db_file = dir.path() / "class.sqlite";
  {
    ResultsDb db(db_file);
    db.record(grade("alpha", 0.9), "{}");
    db.record(grade("alpha", 0.7), "{}");
    db.record(grade("<b>bravo</b>", 1.6), "{}");
    db.record(grade("charlie", 4.2), "{}");
  }
  const std::string d = "--db '" + db_file.string() + "'";
  const fs::path html = dir.path() / "board.html", csv = dir.path() / "board.csv",
                 labels = dir.path() / "labels.csv";
  int rc = -1;
  std::string out =
      leaderboard(d + " --html '" + html.string() + "' --csv '" + csv.string() + "'", &rc);
  INFO(out);
  REQUIRE(rc == 0);
  CHECK(out.find("Leaderboard: milestone final, 3 teams") != std::string::npos);
  CHECK(out.find("stddev_from_median") != std::string::npos);  // final's checks.json rule
  CHECK(out.find("Median 1.600 ms") != std::string::npos);
  CHECK(out.find("alpha") < out.find("<b>bravo</b>"));
  CHECK(out.find("0.700") != std::string::npos);  // alpha's best run, not its first
  const std::string page = test::read_all(html);
  CHECK(page.find("&lt;b&gt;bravo&lt;/b&gt;") != std::string::npos);
  CHECK(page.find("<b>bravo") == std::string::npos);
  CHECK(page.find("<svg") != std::string::npos);
  const std::string table = test::read_all(csv);
  CHECK(table.find("1,alpha,0.7000,") != std::string::npos);
  CHECK(std::count(table.begin(), table.end(), '\n') == 4);

  // --json FILE, as on every command: the board as data, the reference named for what it is.
  const fs::path json_file = dir.path() / "board.json";
  out = leaderboard(d + " --json '" + json_file.string() + "'", &rc);
  REQUIRE(rc == 0);
  const auto board = nlohmann::json::parse(test::read_all(json_file));
  CHECK(board.at("milestone") == "final");
  CHECK(board.at("reference") == "cuDNN");
  REQUIRE(board.at("rows").size() == 3);
  CHECK(board.at("rows").at(0).at("team") == "alpha");
  CHECK(board.at("rows").at(0).at("op_time_s").get<double>() == doctest::Approx(0.0007));

  out = leaderboard(d + " --anonymize --labels '" + labels.string() + "'", &rc);
  REQUIRE(rc == 0);
  CHECK(out.find("(anonymised)") != std::string::npos);
  for (const char* name : {"alpha", "bravo", "charlie"}) CHECK(out.find(name) == std::string::npos);
  // The instructor's list maps each name to the label the students see.
  const std::string map = test::read_all(labels);
  CHECK(map.rfind("team,label\n", 0) == 0);
  std::istringstream lines(map);
  std::string line;
  std::getline(lines, line);
  int mapped = 0;
  while (std::getline(lines, line)) {
    const std::string label = line.substr(line.rfind(',') + 1);
    CHECK(label.rfind("Team ", 0) == 0);
    CHECK(out.find(label) != std::string::npos);
    ++mapped;
  }
  CHECK(mapped == 3);

  out = leaderboard(d + " --rule threshold", &rc);
  REQUIRE(rc == 0);
  CHECK(out.find("Points (threshold): 25 points at or under 1 ms") != std::string::npos);
  CHECK(out.find("25.00") != std::string::npos);  // alpha at 0.7 ms: full credit

  out = leaderboard(d + " --milestone m2", &rc);
  REQUIRE(rc == 0);
  CHECK(out.find("No team has a correct timed run on milestone m2") != std::string::npos);
}

TEST_CASE("convlab leaderboard: bad input gives one clear error") {
  test::TempDir dir;
  int rc = 0;
  const fs::path missing = dir.path() / "missing.sqlite";
  std::string out = leaderboard("--db '" + missing.string() + "'", &rc);
  CHECK(rc != 0);
  CHECK(out.find("no results database at") != std::string::npos);
  CHECK(!fs::exists(missing));

  const fs::path notes = dir.path() / "notes.txt";
  std::ofstream(notes) << "not a database\n";
  out = leaderboard("--db '" + notes.string() + "'", &rc);
  CHECK(rc != 0);
  CHECK(out.find("not a convlab results database") != std::string::npos);

  { ResultsDb db(dir.path() / "ok.sqlite"); }
  out = leaderboard("--db '" + (dir.path() / "ok.sqlite").string() + "' --milestone m9", &rc);
  CHECK(rc == 1);  // a bad argument exits 1, and the valid values are listed
  CHECK(out.find("m9 not in {m2,m3,final}") != std::string::npos);

  out = leaderboard("--db '" + (dir.path() / "ok.sqlite").string() + "' --html /nonexistent/x.html",
                    &rc);
  CHECK(rc != 0);
  CHECK(out.find("cannot write the HTML leaderboard") != std::string::npos);

  out = leaderboard("--db '" + (dir.path() / "ok.sqlite").string() + "' --rule fastest", &rc);
  CHECK(rc != 0);
  CHECK(out.find("fastest") != std::string::npos);
}

}  // namespace test_leaderboard_cli
