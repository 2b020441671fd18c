// The GPU executor for real: `convlab serve --gpus 0` on loopback runs the m3 and final jobs of
// two teams (the staff code handed in as team files) in the grader's sandbox on the local GPU,
// with real `convlab submit` clients. It measures, per job, the time from submit to the first
// line of output and to the report, and the jobs per hour; it prints them.
#include <doctest/doctest.h>

#include <chrono>
#include <cstdio>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "grader/grade/grading_plan.hpp"
#include "reference/conv/variant_table.hpp"
#include "tests/grader/grade/grade_test_support.hpp"
#include "tests/grader/service/service_test_support.hpp"

namespace test_service_gpu {

namespace fs = std::filesystem;
using namespace convlab::test;
using Clock = std::chrono::steady_clock;

namespace {

// Every student file of `milestone`'s variants.
std::vector<std::string> student_files(const std::string& milestone) {
  std::vector<std::string> out;
  for (const convlab::Variant& v : convlab::variants()) {
    if (v.milestone == milestone) out.emplace_back(v.student_file);
  }
  return out;
}

// One `convlab submit` run, its stdout read line by line as it arrives.
struct Timed {
  int exit_code = -1;
  std::string out, err;
  double first_line_s = -1, end_s = -1;
};

Timed timed_submit(const fs::path& home, const fs::path& cwd, const std::string& args,
                   const fs::path& err_file) {
  Timed t;
  const auto t0 = Clock::now();
  const std::string line = submit_line(home, cwd, args) + " 2> " + shell_quote(err_file.string());
  FILE* p = popen(line.c_str(), "r");
  REQUIRE(p != nullptr);
  char buf[4096];
  while (std::fgets(buf, sizeof buf, p) != nullptr) {
    if (t.first_line_s < 0) {
      t.first_line_s = std::chrono::duration<double>(Clock::now() - t0).count();
    }
    t.out += buf;
  }
  const int status = pclose(p);
  t.end_s = std::chrono::duration<double>(Clock::now() - t0).count();
  t.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128;
  t.err = read_file(err_file);
  return t;
}

// "Total: S / M points" with S == M.
bool full_marks(const std::string& out) {
  std::smatch m;
  static const std::regex total(R"(Total: ([0-9.]+) / ([0-9.]+) points)");
  return std::regex_search(out, m, total) && m[1] == m[2];
}

struct GpuClass {
  TempDir tmp;
  fs::path dir = tmp.path() / "server";
  std::vector<std::unique_ptr<Submission>> teams;

  GpuClass() {
    write_file(dir / "roster.csv", "team,role\nalpha,team\nbeta,team\n");
    for (const char* name : {"alpha", "beta"}) {
      auto s = std::make_unique<Submission>(name);
      s->add_solutions(student_files("m3"));
      s->add_solutions(student_files("final"));
      teams.push_back(std::move(s));
    }
  }
  fs::path home(const std::string& team) const { return tmp.path() / ("home-" + team); }
  fs::path checkout(const std::string& team) const { return teams[team == "alpha" ? 0 : 1]->dir(); }
  void login(const ServeProcess& server, const std::string& team) const {
    login_client(home(team), checkout(team), server, dir, team);
  }
  // Runs one job per (team, args) at once; returns their timings in that order.
  std::vector<Timed> at_once(const std::vector<std::pair<std::string, std::string>>& jobs) const {
    std::vector<Timed> out(jobs.size());
    std::vector<std::thread> threads;
    for (std::size_t i = 0; i < jobs.size(); ++i) {
      threads.emplace_back([&, i] {
        const auto& [team, args] = jobs[i];
        out[i] = timed_submit(home(team), checkout(team), args,
                              tmp.path() / ("err-" + std::to_string(i)));
      });
      // Submitted in this order, so that the queue's order is known.
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
    }
    for (auto& t : threads) t.join();
    return out;
  }
};

void report(const std::string& what, const Timed& t) {
  MESSAGE(what << ": exit " << t.exit_code << ", first line after " << t.first_line_s
               << " s, report after " << t.end_s << " s");
}

}  // namespace

TEST_CASE("gpu executor: m3 and final jobs of two teams, with their latency and throughput") {
  std::string why;
  const auto data = real_data_dir(&why);
  if (!data) skip(why);
  if (!fs::exists(source_dir() / "reference/solutions/m3")) {
    skip("staff solutions (reference/solutions/) are not part of this tree");
  }
  GpuClass c;
  ServeProcess server(c.dir, {"--gpus", "0", "--cpu-jobs", "1", "--data", data->string(), "--cache",
                              grade_cache_dir().string(), "--allow-degraded"});
  c.login(server, "alpha");
  c.login(server, "beta");
  const auto t0 = Clock::now();

  // m3: both teams grade at once, and alpha asks for a run; one GPU takes them in turn.
  const auto m3 = c.at_once(
      {{"alpha", "grade m3"}, {"beta", "grade m3"}, {"alpha", "run m3 ece408-high 1000"}});
  report("alpha grade m3", m3[0]);
  report("beta grade m3", m3[1]);
  report("alpha run m3 ece408-high 1000", m3[2]);
  for (std::size_t i = 0; i < 2; ++i) {
    INFO(m3[i].out << m3[i].err << "\nserver:\n" << server.log());
    CHECK(m3[i].exit_code == 0);
    CHECK(full_marks(m3[i].out));
    CHECK(m3[i].out.find("Op Time") != std::string::npos);
  }
  CHECK(m3[0].out.find("beta") == std::string::npos);
  CHECK(m3[1].out.find("alpha") == std::string::npos);
  {
    INFO(m3[2].out << m3[2].err);
    CHECK(m3[2].exit_code == 0);
    CHECK(m3[2].out.find("Correctness: 0.") != std::string::npos);
    CHECK(m3[2].out.find("Op Time") != std::string::npos);
  }
  // Jobs submitted while the GPU was busy said where they stood in the queue.
  CHECK(m3[1].err.find("queued, position") != std::string::npos);
  CHECK(server.log().find("on GPU 0") != std::string::npos);

  // final: both teams grade every variant at once; beta also checks its ranked kernel.
  const auto specs = convlab::grader::load_milestone_specs(source_dir(), "final");
  REQUIRE(specs.size() == 1);
  const std::string check_ranked = "check final --variant " + specs[0].ranked_variant;
  const auto fin =
      c.at_once({{"alpha", "grade final"}, {"beta", "grade final"}, {"beta", check_ranked}});
  report("alpha grade final", fin[0]);
  report("beta grade final", fin[1]);
  report("beta " + check_ranked, fin[2]);
  for (std::size_t i = 0; i < 2; ++i) {
    INFO(fin[i].out << fin[i].err << "\nserver:\n" << server.log());
    CHECK(fin[i].exit_code == 0);
    CHECK(full_marks(fin[i].out));
  }
  {
    INFO(fin[2].out << fin[2].err);
    CHECK(fin[2].exit_code == 0);
    CHECK(fin[2].out.find("passed") != std::string::npos);
    CHECK(fin[2].out.find("failed") == std::string::npos);
  }
  const double total_s = std::chrono::duration<double>(Clock::now() - t0).count();
  MESSAGE("6 GPU jobs of two teams on one GPU in " << total_s << " s: " << 6 * 3600.0 / total_s
                                                   << " jobs per hour");

  // Each team's grades are in its history; the ranked board lists both.
  std::string out;
  REQUIRE(submit(c.home("alpha"), c.checkout("alpha"), "status", &out) == 0);
  CHECK(out.find("grade m3") != std::string::npos);
  CHECK(out.find("grade final") != std::string::npos);
  REQUIRE(submit(c.home("beta"), c.checkout("beta"), "ranking final", &out) == 0);
  INFO(out);
  CHECK(out.find("milestone final, 2 teams (anonymised)") != std::string::npos);
  CHECK(out.find("cuDNN ms") != std::string::npos);
}

}  // namespace test_service_gpu
