// `convlab grade-all` with the real `convlab grade` on a small class of m2 submissions: the
// staff solution, the untouched stub and code that does not compile are all graded (exit 0),
// with the scores each deserves, per-team outputs, a database row per team and the summary.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>
#include <string>

#include "tests/grader/class/class_test_support.hpp"
#include "tests/support/test_support.hpp"

namespace test_grade_all_real {

namespace fs = std::filesystem;
using convlab::test::run_command;
using nlohmann::json;

using convlab::test::read_text;
using convlab::test::team_of;
using convlab::test::write_text;

TEST_CASE("a small m2 class graded for real: full marks, zero, a build failure; exit 0") {
  std::string why;
  const auto data = convlab::test::real_data_dir(&why);
  if (!data) convlab::test::skip(why);
  const fs::path src = convlab::test::source_dir();
  if (!fs::exists(src / "reference/solutions/m2/conv_cpu.cpp")) {
    convlab::test::skip("staff solutions are not part of this tree");
  }
  convlab::test::TempDir tmp;
  const fs::path subs = tmp.path() / "subs", out = tmp.path() / "grades";
  write_text(subs / "good/student/m2/conv_cpu.cpp",
             std::regex_replace(read_text(src / "reference/solutions/m2/conv_cpu.cpp"),
                                std::regex("convlab::solution"), "convlab::student"));
  write_text(subs / "stub/student/m2/conv_cpu.cpp", read_text(src / "student/m2/conv_cpu.cpp"));
  write_text(subs / "broken/student/m2/conv_cpu.cpp", "this is not C++\n");

  std::string output;
  std::string cmd;
  for (const std::string& word :
       {convlab::test::convlab_binary().string(), std::string("grade-all"), subs.string(),
        std::string("--milestone"), std::string("m2"), std::string("--jobs"), std::string("2"),
        std::string("--seed"), std::string("7"), std::string("--out"), out.string(),
        std::string("--cache"), std::string(CONVLAB_TEST_CACHE), std::string("--data"),
        data->string(), std::string("--allow-degraded")}) {
    cmd += " '";
    cmd += word;
    cmd += '\'';
  }
  const int rc = run_command(cmd, &output);
  INFO(output);
  REQUIRE(rc == 0);

  const json s = json::parse(read_text(out / "summary.json"));
  CHECK(s["graded"] == 3);
  const json& good = team_of(s, "good");
  {
    // On failure, show which of the staff solution's checks did not pass, and why.
    std::string failed;
    const json report = json::parse(read_text(out / "good/report.json"));
    for (const json& c : report["checks"]) {
      if (c["status"] != "passed") {
        failed += c["id"].get<std::string>() + " (" + c["reason"].get<std::string>() +
                  "): " + c["output"].get<std::string>().substr(0, 400) + "\n";
      }
    }
    INFO("checks of the staff solution that did not pass:\n" << failed);
    CHECK(good["max_score"].get<double>() > 0);
    CHECK(good["score"] == good["max_score"]);
    CHECK(good["op_time_s"].is_number());
  }
  CHECK(team_of(s, "stub")["score"] == 0);
  CHECK(team_of(s, "broken")["score"] == 0);
  for (const char* team : {"good", "stub", "broken"}) {
    CAPTURE(team);
    CHECK(team_of(s, team)["status"] == "graded");
    CHECK(fs::exists(out / team / "report.json"));
    CHECK(fs::exists(out / team / "results.json"));
    const json report = json::parse(read_text(out / team / "report.json"));
    CHECK(report["team"] == team);
    CHECK(report["seed"] == 7);
  }
  const json broken = json::parse(read_text(out / "broken/report.json"));
  bool build_failed = false;
  for (const json& c : broken["checks"])
    build_failed = build_failed || c["reason"] == "build_failed";
  CHECK(build_failed);
  CHECK(output.find("Graded 3 of 3 teams (m2)") != std::string::npos);
}

}  // namespace test_grade_all_real
