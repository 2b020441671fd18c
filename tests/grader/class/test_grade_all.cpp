// `convlab grade-all` with a stand-in grader (--grader, a shell script that behaves as each
// team's folder says): scheduling (the first team alone, then in parallel; GPU milestones one
// at a time), a crash, a hang, a failure or a bad report of one team never stops the others,
// the summary files, re-grading one team, and bad input.
#include <doctest/doctest.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "tests/grader/class/class_test_support.hpp"
#include "tests/support/test_support.hpp"

namespace test_grade_all {

using convlab::test::read_all;
namespace fs = std::filesystem;
using convlab::test::run_command;
using convlab::test::TempDir;
using nlohmann::json;

using convlab::test::team_of;

namespace {

// Writes a report.json like `convlab grade` does, or misbehaves, as <submission>/behaviour
// says; logs "start TEAM TIME" and "end TEAM TIME" to $EVENTS and its arguments to
// <out>/args.txt.
constexpr const char* kFakeGrader = R"SH(#!/bin/sh
[ "$1" = grade ] || { echo "fake grader: expected 'grade', got '$1'" >&2; exit 9; }
sub=$2; shift 2
args="$*"
while [ $# -gt 0 ]; do
  case $1 in
    --team) team=$2; shift 2;;
    --out) out=$2; shift 2;;
    --milestone) ms=$2; shift 2;;
    *) shift;;
  esac
done
mkdir -p "$out"
echo "$args" > "$out/args.txt"
echo "${CUDA_VISIBLE_DEVICES-unset}" > "$out/gpu.txt"
echo "start $team $(date +%s.%N)" >> "$EVENTS"
behaviour=$(cat "$sub/behaviour" 2>/dev/null || echo ok)
score=$(cat "$sub/score" 2>/dev/null || echo 0)
sleep 0.4
case $behaviour in
  crash) echo "end $team $(date +%s.%N)" >> "$EVENTS"; kill -SEGV $$;;
  hang) sleep 600 & echo $! > "$out/sleep.pid"; wait;;
  fail) echo "fake grader: cannot read the submission" >&2; exit 1;;
  garbage) echo "not json" > "$out/report.json";;
  contended)
    # The first grade of this team runs out of processes (as when another team's code forks
    # without end at the same time); later grades are clean.
    if [ ! -f "$sub/graded-once" ]; then
      : > "$sub/graded-once"
      printf '{"schema":"convlab-grade-report/1","score":0,"max_score":50,"checks":[{"status":"failed","output":"Your code reported an error: unexpected exception: Resource temporarily unavailable"}]}' > "$out/report.json"
    else
      printf '{"schema":"convlab-grade-report/1","score":%s,"max_score":50,"checks":[{"status":"passed","output":""}]}' "$score" > "$out/report.json"
    fi;;
  grader_error)
    printf '{"schema":"convlab-grade-report/1","score":0,"max_score":50,"grader_error":"%s","checks":[]}' \
      "the pristine framework did not build" > "$out/report.json";;
  flagged)
    printf '{"schema":"convlab-grade-report/1","team":"%s","milestone":"%s","score":%s,"max_score":50,"op_time_s":0.0001,"op_time_median_s":0.00011,"speedup":14.2,"flags":["best is 14.2x faster than cuDNN"],"checks":[{"status":"passed"},{"status":"passed"}]}' \
      "$team" "$ms" "$score" > "$out/report.json";;
  *)
    printf '{"schema":"convlab-grade-report/1","team":"%s","milestone":"%s","score":%s,"max_score":50,"op_time_s":0.0768,"op_time_median_s":0.08,"speedup":null,"flags":[],"checks":[{"status":"passed"},{"status":"failed"}]}' \
      "$team" "$ms" "$score" > "$out/report.json";;
esac
echo "end $team $(date +%s.%N)" >> "$EVENTS"
)SH";

struct Class {
  TempDir tmp;
  fs::path subs = tmp.path() / "subs";
  fs::path out = tmp.path() / "grades";
  fs::path events = tmp.path() / "events.log";
  fs::path grader = tmp.path() / "fake-convlab";

  Class() {
    std::ofstream(grader) << kFakeGrader;
    fs::permissions(grader, fs::perms::owner_all);
  }
  void team(const std::string& name, const std::string& behaviour, int score = 0) {
    fs::create_directories(subs / name / "student/m2");
    std::ofstream(subs / name / "student/m2/conv_cpu.cpp") << "// " << name << "\n";
    std::ofstream(subs / name / "behaviour") << behaviour << "\n";
    std::ofstream(subs / name / "score") << score << "\n";
  }
  int grade_all(const std::string& args, std::string* output) const {
    return run_command("EVENTS='" + events.string() + "' '" +
                           convlab::test::convlab_binary().string() + "' grade-all '" +
                           subs.string() + "' --out '" + out.string() + "' --grader '" +
                           grader.string() + "' " + args,
                       output);
  }
  json summary() const {
    std::ifstream in(out / "summary.json");
    return json::parse(in);
  }
  // (team, start, end) from the events log.
  std::map<std::string, std::pair<double, double>> spans() const {
    std::map<std::string, std::pair<double, double>> s;
    std::ifstream in(events);
    std::string what, team;
    double t = 0;
    while (in >> what >> team >> t) (what == "start" ? s[team].first : s[team].second) = t;
    return s;
  }
};

// One shell word per argument, joined by spaces (built piecewise: g++ 12 warns, wrongly, with
// -Wrestrict on "'" + string + "'").
std::string shell(std::initializer_list<std::string> words) {
  std::string cmd;
  for (const std::string& w : words) {
    if (!cmd.empty()) cmd += ' ';
    cmd += '\'';
    cmd += w;
    cmd += '\'';
  }
  return cmd;
}

// Alive and not a zombie (a killed orphan stays a zombie until init reaps it).
bool is_running(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(stat, line)) return false;
  const auto paren = line.rfind(')');
  return paren != std::string::npos && paren + 2 < line.size() && line[paren + 2] != 'Z';
}

}  // namespace

TEST_CASE("one team's crash, hang, failure or bad report never stops the class") {
  Class c;
  c.team("alice", "flagged", 50);
  c.team("bob", "ok", 20);
  c.team("carol", "crash");
  c.team("dave", "hang");
  c.team("erin", "garbage");
  c.team("frank", "fail");
  c.team("gina", "grader_error");
  std::string output;
  const int rc = c.grade_all("--milestone m2 --jobs 3 --team-timeout 5", &output);
  INFO(output);
  CHECK(rc == 4);

  const json s = c.summary();
  CHECK(s["schema"] == "convlab-class-summary/1");
  CHECK(s["milestone"] == "m2");
  CHECK(s["total"] == 7);
  CHECK(s["graded"] == 2);
  CHECK(s["jobs"] == 3);
  const json& alice = team_of(s, "alice");
  CHECK(alice["status"] == "graded");
  CHECK(alice["score"] == 50);
  CHECK(alice["op_time_s"] == 0.0001);
  CHECK(alice["flags"][0] == "best is 14.2x faster than cuDNN");
  const json& bob = team_of(s, "bob");
  CHECK(bob["status"] == "graded");
  CHECK(bob["score"] == 20);
  CHECK(bob["checks_passed"] == 1);
  CHECK(bob["checks_total"] == 2);
  for (const char* broken : {"carol", "dave", "erin", "frank", "gina"}) {
    CAPTURE(broken);
    CHECK(team_of(s, broken)["status"] == "grader error");
    CHECK(team_of(s, broken)["score"].is_null());
  }
  CHECK(team_of(s, "carol")["error"].get<std::string>().find("signal 11") != std::string::npos);
  CHECK(team_of(s, "dave")["error"].get<std::string>().find("--team-timeout") != std::string::npos);
  CHECK(team_of(s, "dave")["wall_s"].get<double>() < 30.0);
  CHECK(team_of(s, "erin")["error"].get<std::string>().find("not valid JSON") != std::string::npos);
  CHECK(team_of(s, "frank")["error"].get<std::string>().find("exited with code 1") !=
        std::string::npos);
  CHECK(team_of(s, "gina")["error"].get<std::string>().find("pristine framework") !=
        std::string::npos);
  // The error says where to look, and the log has the command to re-run by hand.
  CHECK(team_of(s, "frank")["error"].get<std::string>().find("grade.log") != std::string::npos);
  const std::string frank_log = read_all(c.out / "frank/grade.log");
  CHECK(frank_log.starts_with("$ convlab grade "));
  CHECK(frank_log.find("cannot read the submission") != std::string::npos);

  // The hung grader was killed with everything it started.
  const pid_t sleeper = std::stoi(read_all(c.out / "dave/sleep.pid"));
  // A killed process may take a moment to go on a loaded machine.
  for (int i = 0; i < 50 && is_running(sleeper); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  CHECK_FALSE(is_running(sleeper));

  // The first team runs alone (it builds the framework cache), then up to 3 at once.
  const auto spans = c.spans();
  REQUIRE(spans.size() == 7);
  for (const auto& [team, span] : spans) {
    if (team != "alice") CHECK_MESSAGE(span.first >= spans.at("alice").second, team);
  }
  int most = 0;
  for (const auto& [team, span] : spans) {
    int at_once = 0;
    for (const auto& [other, o] : spans) {
      // The hung team never logs its end: it ends when it is killed.
      const double end =
          o.second > 0 ? o.second : o.first + team_of(s, other)["wall_s"].get<double>();
      if (o.first <= span.first && span.first < end) ++at_once;
    }
    most = std::max(most, at_once);
  }
  CHECK(most >= 2);
  CHECK(most <= 3);

  // The CSV has a header and one row per team; the table names every team and status.
  const std::string csv = read_all(c.out / "summary.csv");
  CHECK(csv.starts_with("team,status,score,max_score,op_time_s,"));
  CHECK(csv.find(",error,regraded_alone,gpu,slurm_task,resubmitted\n") != std::string::npos);
  CHECK(std::count(csv.begin(), csv.end(), '\n') == 8);
  CHECK(csv.find("\nalice,graded,50,50,0.0001,") != std::string::npos);
  CHECK(output.find("alice  ") != std::string::npos);
  CHECK(output.find("50/50") != std::string::npos);
  CHECK(output.find("look: best is 14.2x faster than cuDNN") != std::string::npos);
  CHECK(output.find("76.800 ms") != std::string::npos);
  // Not a terminal: plain progress lines.
  CHECK(output.find("] bob: graded, 20/50") != std::string::npos);
  CHECK(output.find("\r") == std::string::npos);
  CHECK(output.find("5 teams could not be graded") != std::string::npos);
}

TEST_CASE("a class that grades cleanly exits 0; --team re-grades one team; options pass on") {
  Class c;
  c.team("t1", "ok", 10);
  c.team("t2", "ok", 0);
  fs::create_directories(c.subs / ".hidden");
  std::ofstream(c.subs / "notes.txt") << "not a team\n";
  std::string output;
  REQUIRE_MESSAGE(c.grade_all("--milestone m2 --db class.db --models hm --models hm2 --seed 42 "
                              "--cache cache --runs 5",
                              &output) == 0,
                  output);
  json s = c.summary();
  CHECK(s["graded"] == 2);
  CHECK(s["total"] == 2);
  CHECK(team_of(s, "t2")["score"] == 0);  // a zero score is still graded
  const std::string args = read_all(c.out / "t1/args.txt");
  CHECK(args.find("--milestone m2 --team t1 --out " + (c.out / "t1").string()) !=
        std::string::npos);
  CHECK(args.find("--db " + fs::absolute("class.db").string()) != std::string::npos);
  CHECK(args.find("--models " + fs::absolute("hm").string() + " --models " +
                  fs::absolute("hm2").string()) != std::string::npos);
  CHECK(args.find("--seed 42") != std::string::npos);
  CHECK(args.find("--runs 5") != std::string::npos);
  CHECK(args.find("--cache " + fs::absolute("cache").string()) != std::string::npos);

  // Re-grade t2 only: t1's results and summary row stay, t2's are fresh; t1 stays hidden
  // from t2's checks.
  const json t1_before = team_of(s, "t1");
  std::ofstream(c.subs / "t2/score") << "30\n";
  std::ofstream(c.out / "t2/stale.txt") << "old\n";
  REQUIRE_MESSAGE(c.grade_all("--milestone m2 --team t2", &output) == 0, output);
  s = c.summary();
  CHECK(s["total"] == 2);
  CHECK(team_of(s, "t2")["score"] == 30);
  CHECK(team_of(s, "t1") == t1_before);
  CHECK(fs::exists(c.out / "t1/report.json"));
  CHECK_FALSE(fs::exists(c.out / "t2/stale.txt"));
  CHECK(read_all(c.out / "t2/args.txt").find("--hide " + (c.subs / "t1").string()) !=
        std::string::npos);
  const std::string csv = read_all(c.out / "summary.csv");
  CHECK(csv.find("\nt1,graded,10,") != std::string::npos);
  CHECK(csv.find("\nt2,graded,30,") != std::string::npos);

  CHECK(c.grade_all("--milestone m2 --team nobody", &output) == 1);
  CHECK(output.find("no team 'nobody'") != std::string::npos);
}

TEST_CASE("GPU milestones grade one team at a time on one GPU") {
  Class c;
  for (const char* t : {"a", "b", "c"}) c.team(t, "ok", 5);
  std::string output;
  REQUIRE_MESSAGE(c.grade_all("--milestone final --jobs 4 --gpus 0", &output) == 0, output);
  CHECK(output.find("one per GPU at a time") != std::string::npos);
  CHECK(c.summary()["jobs"] == 1);
  const auto spans = c.spans();
  REQUIRE(spans.size() == 3);
  std::vector<std::pair<double, double>> v;
  for (const auto& [team, span] : spans) v.push_back(span);
  std::sort(v.begin(), v.end());
  for (std::size_t i = 1; i < v.size(); ++i) CHECK(v[i].first >= v[i - 1].second);
  for (const char* t : {"a", "b", "c"}) CHECK(read_all(c.out / t / "gpu.txt") == "0\n");
}

TEST_CASE("two GPUs: one grade per GPU at once, each pinned to its GPU, never two on one") {
  Class c;
  const std::vector<std::string> teams{"t1", "t2", "t3", "t4", "t5", "t6"};
  for (const std::string& t : teams) c.team(t, "ok", 5);
  std::string output;
  // Fake GPU ids: the scheduler only passes them on, it never opens a device.
  REQUIRE_MESSAGE(c.grade_all("--milestone final --gpus 7,3", &output) == 0, output);
  const json s = c.summary();
  CHECK(s["jobs"] == 2);
  CHECK(s["gpus"] == json::array({"7", "3"}));
  CHECK(output.find("2 at a time (one per GPU)") != std::string::npos);

  const auto spans = c.spans();
  REQUIRE(spans.size() == teams.size());
  std::map<std::string, std::vector<std::pair<double, double>>> by_gpu;
  for (const std::string& t : teams) {
    CAPTURE(t);
    const std::string seen = read_all(c.out / t / "gpu.txt");
    // Each grade saw exactly one GPU, the one the summary names.
    CHECK((seen == "7\n" || seen == "3\n"));
    CHECK(team_of(s, t)["gpu"].get<std::string>() + "\n" == seen);
    by_gpu[seen].push_back(spans.at(t));
  }
  CHECK(by_gpu.size() == 2);  // both GPUs were used
  for (auto& [gpu, v] : by_gpu) {
    CAPTURE(gpu);
    std::sort(v.begin(), v.end());
    for (std::size_t i = 1; i < v.size(); ++i) CHECK(v[i].first >= v[i - 1].second);
  }
  // The first team alone (the framework cache), then two at once.
  int most = 0;
  for (const auto& [team, span] : spans) {
    if (team != "t1") CHECK_MESSAGE(span.first >= spans.at("t1").second, team);
    int at_once = 0;
    for (const auto& [other, o] : spans) at_once += o.first <= span.first && span.first < o.second;
    most = std::max(most, at_once);
  }
  CHECK(most == 2);
  CHECK(read_all(c.out / "summary.csv").find("\nt1,graded,5,50,") != std::string::npos);

  CHECK(c.grade_all("--milestone final --gpus 0,,1", &output) == 1);
  CHECK(output.find("separated by commas") != std::string::npos);
}

TEST_CASE("bad input: one clear message and exit 1") {
  Class c;
  std::string output;
  CHECK(c.grade_all("--milestone m2", &output) == 1);  // no subs folder yet
  CHECK(output.find("no such folder") != std::string::npos);
  fs::create_directories(c.subs);
  CHECK(c.grade_all("--milestone m2", &output) == 1);
  CHECK(output.find("holds no team folder") != std::string::npos);
  c.team("t1", "ok", 1);
  CHECK(c.grade_all("--milestone m1", &output) == 1);
  CHECK(output.find("choose m2, m3, final or all") != std::string::npos);
  const std::string convlab = convlab::test::convlab_binary().string();
  CHECK(run_command(shell({convlab, "grade-all", c.subs.string(), "--milestone", "m2", "--out",
                           c.subs.string()}),
                    &output) == 1);
  CHECK(output.find("must not be the submissions folder") != std::string::npos);
  CHECK(run_command(shell({convlab, "grade-all", c.subs.string(), "--milestone", "m2", "--out",
                           (c.subs / "t1" / "grades").string()}),
                    &output) == 1);
  CHECK(output.find("overlaps the submission of team t1") != std::string::npos);
  CHECK(fs::exists(c.subs / "t1/student/m2/conv_cpu.cpp"));
}

TEST_CASE("a team whose checks ran out of processes in parallel is graded again, alone") {
  Class c;
  c.team("a", "ok", 10);
  c.team("b", "contended", 40);
  c.team("c", "ok", 10);
  c.team("d", "ok", 10);
  std::string output;
  REQUIRE_MESSAGE(c.grade_all("--milestone m2 --jobs 3", &output) == 0, output);
  const json s = c.summary();
  CHECK(team_of(s, "b")["score"] == 40);
  CHECK(team_of(s, "b")["regraded_alone"] == true);
  CHECK(team_of(s, "a")["regraded_alone"] == false);
  CHECK(output.find("graded again alone") != std::string::npos);
  // b started twice; the second time after every other team had ended.
  std::ifstream in(c.events);
  std::string what, team;
  double t = 0, last_end = 0, b_second_start = 0;
  int b_starts = 0;
  while (in >> what >> team >> t) {
    if (what == "start" && team == "b" && ++b_starts == 2) b_second_start = t;
    if (what == "end" && team != "b") last_end = std::max(last_end, t);
  }
  CHECK(b_starts == 2);
  CHECK(b_second_start >= last_end);

  // One grader at a time cannot starve another: no second grade.
  Class one;
  one.team("b", "contended", 40);
  REQUIRE_MESSAGE(one.grade_all("--milestone m2 --jobs 1", &output) == 0, output);
  CHECK(one.summary()["teams"][0]["score"] == 0);
  CHECK(one.summary()["teams"][0]["regraded_alone"] == false);
}

}  // namespace test_grade_all
