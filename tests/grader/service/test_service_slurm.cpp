// `convlab serve --executor slurm` on a real one-node Slurm cluster started for the test
// (tests/grader/class/slurm_cluster.hpp), with real `convlab submit` clients: every job is a
// Slurm job, its output streams back and its report arrives; a Slurm job cancelled under a
// job is queued again once, then the job fails with what Slurm said; a restart cancels the
// Slurm jobs and runs their jobs again. The quick cases run a stand-in grader; the real m2
// jobs need the data set and the staff solution. Skipped, with the reason, where the cluster
// cannot start.
#include <doctest/doctest.h>
#include <httplib.h>

#include <chrono>
#include <cstdlib>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

#include "tests/grader/class/slurm_cluster.hpp"
#include "tests/grader/service/service_test_support.hpp"

namespace test_service_slurm {

namespace fs = std::filesystem;
using namespace convlab::test;
using nlohmann::json;

namespace {

// Stand-in for `convlab grade` (the service runs PROGRAM grade SUBMISSION --milestone M --team T
// --out OUT ...): logs each run as "TEAM SLURM_JOB_ID" in @RUNS@, then team alpha sleeps (to be
// cancelled), gamma sleeps on its first run only; every other run prints a grade's lines and
// writes a passing report at once.
constexpr const char* kStandIn = R"SH(#!/bin/sh
shift 2
while [ $# -gt 0 ]; do
  case $1 in
    --team) team=$2; shift 2;;
    --out) out=$2; shift 2;;
    *) shift;;
  esac
done
echo "$team $SLURM_JOB_ID" >> '@RUNS@'
echo "grading $team, milestone m2 (stand-in grader)"
runs=$(grep -c "^$team " '@RUNS@')
if [ "$team" = alpha ] || { [ "$team" = gamma ] && [ "$runs" -eq 1 ]; }; then sleep 300; fi
mkdir -p "$out"
printf '{"team": "%s", "checks": [{"id": "elementwise/cpu", "status": "passed"}]}\n' "$team" \
  > "$out/report.json"
echo "[1/1] elementwise/cpu: passed"
)SH";

struct Class {
  TempDir tmp;
  fs::path dir = tmp.path() / "server";
  SlurmCluster cluster{tmp.path()};

  Class() {
    if (!cluster.ok()) skip("no test Slurm cluster: " + cluster.why());
    // The server and every sbatch it runs talk to this cluster.
    setenv("SLURM_CONF", cluster.conf().c_str(), 1);
    write_file(dir / "roster.csv", "team,role\nalpha,team\nbeta,team\ngamma,team\nprof,staff\n");
    write_file(checkout("alpha") / "student/m2/conv_cpu.cpp",
               fs::exists(source_dir() / "reference/solutions/m2/conv_cpu.cpp")
                   ? working_m2()
                   : read_file(source_dir() / "student/m2/conv_cpu.cpp"));
    for (const char* team : {"beta", "gamma"}) {
      write_file(checkout(team) / "student/m2/conv_cpu.cpp",
                 read_file(source_dir() / "student/m2/conv_cpu.cpp"));
    }
  }
  fs::path home(const std::string& team) const { return tmp.path() / ("home-" + team); }
  fs::path checkout(const std::string& team) const { return tmp.path() / team; }
  fs::path runs() const { return tmp.path() / "runs.log"; }

  // A stand-in grader that logs its runs in runs().
  fs::path stand_in() const {
    std::string text = kStandIn;
    for (std::size_t at; (at = text.find("@RUNS@")) != std::string::npos;) {
      text.replace(at, 6, runs().string());
    }
    const fs::path file = tmp.path() / "stand-in-grader";
    write_file(file, text);
    fs::permissions(file, fs::perms::owner_all);
    return file;
  }

  void login(const ServeProcess& server, const std::string& team) const {
    login_client(home(team), checkout(team), server, dir, team);
  }

  // The Slurm job ids of `team`'s runs of the stand-in, in order.
  std::vector<std::string> runs_of(const std::string& team) const {
    std::vector<std::string> ids;
    std::stringstream in(read_file(runs()));
    for (std::string t, id; in >> t >> id;) {
      if (t == team) ids.push_back(id);
    }
    return ids;
  }
};

httplib::Headers bearer(const std::string& token) {
  return {{"Authorization", "Bearer " + token}};
}

// Waits up to `seconds` for `ready`.
bool wait_for(const std::function<bool()>& ready, double seconds) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (std::chrono::steady_clock::now() < end) {
    if (ready()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  return ready();
}

json job_of(const ServeProcess& server, const std::string& token, std::int64_t id) {
  httplib::Client http(server.url());
  const auto res = http.Get("/api/v1/jobs/" + std::to_string(id), bearer(token));
  REQUIRE(res);
  REQUIRE(res->status == 200);
  return json::parse(res->body);
}

std::string output_of(const ServeProcess& server, const std::string& token, std::int64_t id) {
  httplib::Client http(server.url());
  const auto res = http.Get("/api/v1/jobs/" + std::to_string(id) + "/output", bearer(token));
  REQUIRE(res);
  return res->body;
}

std::string slurm_queue(const SlurmCluster& cluster) {
  std::string out;
  cluster.run("squeue -h -o '%i %j %T' 2>&1", &out);
  return out;
}

std::vector<std::string> slurm_options(const Class& c, const std::vector<std::string>& more) {
  std::vector<std::string> a{"--executor", "slurm",           "--slurm-poll",
                             "0.5",        "--grade-program", c.stand_in().string()};
  a.insert(a.end(), more.begin(), more.end());
  return a;
}

}  // namespace

TEST_CASE("serve: each executor's options, and Slurm's commands missing, are one clear error") {
  TempDir tmp;
  write_file(tmp.path() / "roster.csv", "team\nalpha\n");
  const std::string serve = shell_quote(convlab_binary().string()) + " serve --roster " +
                            shell_quote((tmp.path() / "roster.csv").string()) + " --db " +
                            shell_quote((tmp.path() / "results.sqlite").string()) + " --port 0";
  std::string out;
  CHECK(run_command(serve + " --executor slurm --cpu-jobs 4", &out) == 1);
  CHECK(out.find("--cpu-jobs is for --executor local") != std::string::npos);
  CHECK(run_command(serve + " --partition gpu", &out) == 1);
  CHECK(out.find("--partition is for --executor slurm") != std::string::npos);
  CHECK(run_command(serve + " --executor pbs", &out) != 0);
  CHECK(out.find("pbs") != std::string::npos);
  CHECK(run_command("PATH=/nonexistent " + serve + " --executor slurm", &out) == 1);
  CHECK(out.find("sbatch not found") != std::string::npos);
  CHECK(out.find("use --executor local") != std::string::npos);
}

TEST_CASE("slurm: two teams' jobs run as Slurm jobs; a cancelled one is queued again once") {
  Class c;
  ServeProcess server(c.dir, slurm_options(c, {}));
  CHECK(server.log().find("every job a Slurm job") != std::string::npos);
  for (const char* team : {"alpha", "beta"}) c.login(server, team);
  const auto tokens = issued_tokens(c.dir);

  std::string out;
  REQUIRE(submit(c.home("alpha"), c.checkout("alpha"), "check m2 --no-wait", &out) == 0);
  const std::int64_t alpha_job = std::stoll(out.substr(out.rfind('\n', out.size() - 2) + 1));
  // beta's job runs beside alpha's (two CPUs) and its client follows it to the end.
  const int beta_rc = submit(c.home("beta"), c.checkout("beta"), "check m2", &out);
  INFO("beta:\n" << out << "\nserver:\n" << server.log());
  CHECK(beta_rc == 0);
  CHECK(out.find("submitted to Slurm as job") != std::string::npos);
  CHECK(out.find("grading beta, milestone m2 (stand-in grader)") != std::string::npos);
  CHECK(out.find("elementwise/cpu: passed") != std::string::npos);
  CHECK(out.find("finished: exit status 0") != std::string::npos);
  CHECK(out.find("alpha") == std::string::npos);
  CHECK(out.find(c.dir.string()) == std::string::npos);  // the server's folders stay there
  REQUIRE(c.runs_of("beta").size() == 1);

  // beta's report arrived; alpha cannot read it.
  httplib::Client http(server.url());
  const json beta_jobs = json::parse(http.Get("/api/v1/jobs", bearer(tokens.at("beta")))->body);
  REQUIRE(beta_jobs["jobs"].size() == 1);
  const std::string beta_id = std::to_string(beta_jobs["jobs"][0]["id"].get<int>());
  const auto report = http.Get("/api/v1/jobs/" + beta_id + "/report", bearer(tokens.at("beta")));
  REQUIRE(report->status == 200);
  CHECK(json::parse(report->body)["team"] == "beta");
  CHECK(http.Get("/api/v1/jobs/" + beta_id + "/report", bearer(tokens.at("alpha")))->status == 404);

  // alpha's job runs in Slurm, and the team is told where; cancel its Slurm job: the service
  // queues the job again.
  REQUIRE(wait_for([&] { return c.runs_of("alpha").size() == 1; }, 60));
  const std::string first = c.runs_of("alpha")[0];
  CHECK(slurm_queue(c.cluster).find(first + " convlab-job-" + std::to_string(alpha_job) +
                                    " RUNNING") != std::string::npos);
  CHECK(wait_for(
      [&] {
        return output_of(server, tokens.at("alpha"), alpha_job)
                   .find("Slurm job " + first + " started on ") != std::string::npos;
      },
      30));
  REQUIRE(c.cluster.run("scancel " + first, &out) == 0);
  REQUIRE(wait_for([&] { return c.runs_of("alpha").size() == 2; }, 60));
  const std::string second = c.runs_of("alpha")[1];
  CHECK(second != first);
  json job = job_of(server, tokens.at("alpha"), alpha_job);
  CHECK(job["state"] == "running");
  CHECK(job["attempts"] == 2);
  // Cancelled again: the job fails, with what Slurm said.
  REQUIRE(c.cluster.run("scancel " + second, &out) == 0);
  REQUIRE(wait_for(
      [&] { return job_of(server, tokens.at("alpha"), alpha_job)["state"] != "running"; }, 60));
  job = job_of(server, tokens.at("alpha"), alpha_job);
  INFO(job.dump(2));
  CHECK(job["state"] == "failed");
  CHECK(job["attempts"] == 2);
  const std::string error = job["error"];
  CHECK(error.find("Slurm job " + second + " ended CANCELLED") != std::string::npos);
  CHECK(error.find("started 2 times") != std::string::npos);
  const std::string alpha_out = output_of(server, tokens.at("alpha"), alpha_job);
  INFO(alpha_out);
  CHECK(alpha_out.find("Slurm job " + first + " ended CANCELLED") != std::string::npos);
  CHECK(alpha_out.find("queued again (attempt 2 of 2)") != std::string::npos);
  // The client says why, and exits 1.
  CHECK(submit(c.home("alpha"), c.checkout("alpha"), "output " + std::to_string(alpha_job), &out) ==
        1);
  CHECK(out.find("failed: Slurm job " + second) != std::string::npos);
  // Run twice, no more; nothing of the service's is left in Slurm.
  CHECK(c.runs_of("alpha").size() == 2);
  CHECK(slurm_queue(c.cluster).empty());
}

TEST_CASE("slurm: a restart cancels the Slurm jobs it followed and runs their jobs again once") {
  Class c;
  std::int64_t id = 0;
  int port = 0;
  {
    ServeProcess server(c.dir, slurm_options(c, {}));
    port = server.port();
    c.login(server, "gamma");
    std::string out;
    REQUIRE(submit(c.home("gamma"), c.checkout("gamma"), "check m2 --no-wait", &out) == 0);
    id = std::stoll(out.substr(out.rfind('\n', out.size() - 2) + 1));
    REQUIRE(wait_for([&] { return c.runs_of("gamma").size() == 1; }, 60));
    CHECK(server.stop(SIGTERM) == 0);
  }
  // The Slurm job went with the server.
  CHECK(wait_for([&] { return slurm_queue(c.cluster).empty(); }, 30));
  ServeProcess server(c.dir, slurm_options(c, {}), port);
  CHECK(server.log().find("1 job(s) were running when the server stopped") != std::string::npos);
  std::string out;
  CHECK(submit(c.home("gamma"), c.checkout("gamma"), "output " + std::to_string(id), &out) == 0);
  INFO(out);
  CHECK(out.find("queued again (attempt 2 of 2)") != std::string::npos);
  CHECK(out.find("elementwise/cpu: passed") != std::string::npos);
  CHECK(c.runs_of("gamma").size() == 2);
}

TEST_CASE("slurm: a partition Slurm refuses fails the job with sbatch's message") {
  Class c;
  ServeProcess server(c.dir, slurm_options(c, {"--partition", "no-such-partition"}));
  c.login(server, "beta");
  std::string out;
  CHECK(submit(c.home("beta"), c.checkout("beta"), "check m2", &out) == 1);
  INFO(out << "\nserver:\n" << server.log());
  CHECK(out.find("Slurm did not take the job; the service tries again") != std::string::npos);
  CHECK(out.find("Slurm refused the job 3 times") != std::string::npos);
  CHECK(out.find("invalid partition") != std::string::npos);
  CHECK(out.find("tell your course staff") != std::string::npos);
  CHECK(out.find(c.dir.string()) == std::string::npos);  // the server's folders stay there
  CHECK(server.log().find("job.sbatch: check the partition, account and gres") !=
        std::string::npos);
  CHECK(c.runs_of("beta").empty());
}

TEST_CASE("slurm: real m2 jobs of two teams; a grade's run is recorded by the service") {
  std::string why;
  const auto data = real_data_dir(&why);
  if (!data) skip(why);
  if (!fs::exists(source_dir() / "reference/solutions/m2/conv_cpu.cpp")) {
    skip("staff solutions (reference/solutions/) are not part of this tree");
  }
  Class c;
  ServeProcess server(c.dir, {"--executor", "slurm", "--slurm-poll", "0.5", "--data",
                              data->string(), "--cache", CONVLAB_TEST_CACHE, "--allow-degraded"});
  c.login(server, "alpha");
  c.login(server, "beta");
  const fs::path a_out = c.tmp.path() / "a.out", b_out = c.tmp.path() / "b.out";
  const auto background = [&](const std::string& team, const fs::path& file) {
    std::string line = "(";
    line += submit_line(c.home(team), c.checkout(team), "check m2");
    line += " > " + shell_quote(file.string()) + " 2>&1; echo $? >> ";
    line += shell_quote(file.string()) + ") & ";
    return line;
  };
  const auto t0 = std::chrono::steady_clock::now();
  REQUIRE(run_command(background("alpha", a_out) + background("beta", b_out) + "wait", nullptr) ==
          0);
  const double both_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const std::string a = read_file(a_out), b = read_file(b_out);
  INFO("alpha:\n" << a << "\nbeta:\n" << b << "\nserver:\n" << server.log());
  CHECK(a.ends_with("\n0\n"));
  CHECK(a.find("submitted to Slurm as job") != std::string::npos);
  CHECK(a.find("grading alpha, milestone m2") != std::string::npos);
  CHECK(a.find("elementwise/cpu: passed") != std::string::npos);
  CHECK(a.find("building job/submission") != std::string::npos);
  CHECK(a.find("beta") == std::string::npos);
  CHECK(b.ends_with("\n1\n"));  // the stub fails its check
  CHECK(b.find("grading beta, milestone m2") != std::string::npos);
  CHECK(b.find("alpha") == std::string::npos);
  MESSAGE("two m2 check jobs through Slurm at once: " << both_s << " s");

  // A grade: the node writes no database; the service ingests the report as the one writer.
  std::string out;
  CHECK(submit(c.home("beta"), c.checkout("beta"), "grade m2", &out) == 0);
  INFO(out);
  CHECK(out.find("Total: 0 / 30 points") != std::string::npos);
  // One grade, one row.
  CHECK(recorded_runs(c.dir / "results.sqlite") == std::vector<RecordedRun>{{"beta", "m2", 0.0}});
}

}  // namespace test_service_slurm
