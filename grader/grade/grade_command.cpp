// `convlab grade`: grades one submission and prints a summary table.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <memory>

#include "grader/grade/commands.hpp"
#include "grader/grade/grade.hpp"
#include "grader/grade/report.hpp"
#include "grader/leaderboard/leaderboard.hpp"
#include "reference/core/error.hpp"
#include "reference/milestones/milestone.hpp"

namespace convlab::grader {

namespace {

// What the ranked time would earn: the threshold rule's points from this time alone, and the
// class rule's terms, which need the class's times ("" without a ranked time or a rule).
std::string ranking_note(const GradeResult& r) {
  if (!r.op_time_s || *r.op_time_s <= 0.0) return "";
  RankingRule threshold, by_class;
  try {
    threshold = load_ranking_rule(convlab_root(), r.milestone, "threshold");
    by_class = load_ranking_rule(convlab_root(), r.milestone, "stddev_from_median");
  } catch (const Error&) {
    return "";  // a milestone without both rules' numbers is not ranked by them
  }
  char line[512];
  std::snprintf(line, sizeof line,
                "Ranking: this time earns %.1f of %g points under the threshold rule (all at or "
                "under %g ms, none at or over %g ms). The class rule gives %g at the class "
                "median and %g per standard deviation from it: `convlab leaderboard` computes "
                "it from the class's times.\n",
                ranking_points(threshold, 0.0, *r.op_time_s), threshold.points, threshold.full_ms,
                threshold.zero_ms, by_class.points / 2.0, by_class.points_per_stddev);
  return line;
}

}  // namespace

void add_grade_command(CLI::App& app, int& exit_code) {
  struct Args {
    GradeOptions options;
    std::string submission, out, db, data, cache;
    std::vector<std::string> models, hide;
    std::uint64_t seed = 0;
    int runs = 0;
    double time_limit = 0.0;
    std::string json;
  };
  auto a = std::make_shared<Args>();
  CLI::App* cmd = app.add_subcommand(
      "grade",
      "Grade one submission: build its student/ files against a pristine framework, run every "
      "check of a milestone in a sandbox, write report.json, results.json (Gradescope) and logs");
  cmd->add_option("submission", a->submission,
                  "folder holding the team's student/ files (or the files themselves)")
      ->required();
  std::vector<std::string> milestones = graded_milestone_ids();
  std::string names;
  for (const std::string& m : milestones) names += m + ", ";
  milestones.emplace_back("all");
  cmd->add_option("--milestone", a->options.milestone, names + "or all")
      ->required()
      ->check(CLI::IsMember(milestones));
  cmd->add_option("--team", a->options.team, "team name (default: the submission folder's name)");
  cmd->add_option("--out", a->out,
                  "folder for report.json, results.json and logs/ "
                  "(default: ./grade-TEAM)");
  cmd->add_option("--db", a->db, "results database (SQLite) to add this run to");
  cmd->add_option("--models", a->models,
                  "folder of hidden .safetensors models with expected counts (repeatable)");
  cmd->add_option("--data", a->data,
                  "Fashion-MNIST folder (default: $CONVLAB_DATA, else "
                  "/usr/share/datasets/fashion-mnist)");
  CLI::Option* seed =
      cmd->add_option("--seed", a->seed, "seed of the element-wise inputs (default: drawn now)");
  CLI::Option* runs =
      cmd->add_option("--runs", a->runs,
                      "timed runs of the ranked check; Op Time is the fastest (default: the "
                      "milestone's, 3)");
  cmd->add_option("--check-jobs", a->options.check_jobs,
                  "untimed checks run at once; the timed run is always alone on an idle machine, "
                  "and a check that fails for time or GPU memory beside others runs again alone "
                  "(default: a quarter of the cores, 2 to 4)")
      ->check(CLI::Range(1, 64));
  CLI::Option* time_limit = cmd->add_option(
      "--time-limit", a->time_limit,
      "wall-clock limit of each check in seconds (default: the milestone's time_limit_s)");
  cmd->add_option("--build-memory", a->options.build_memory_mib,
                  "memory limit of each compiler, assembler or linker of the team's build, in "
                  "MiB (default 4096)")
      ->check(CLI::Range(256, 65536));
  cmd->add_option("--hide", a->hide,
                  "a path the checks may not read, besides the data set, --models, --db and the "
                  "staff solutions (repeatable)");
  cmd->add_option("--cache", a->cache,
                  "where the pristine framework is built once (default: $CONVLAB_CACHE, else "
                  "~/.cache/convlab)");
  cmd->add_option("--only", a->options.only,
                  "run only checks whose id matches this glob (repeatable; files, build and "
                  "symbols always run; the grade is then partial)");
  cmd->add_flag("--allow-degraded", a->options.allow_degraded,
                "grade even where this machine lacks an isolation feature (namespaces, an "
                "unprivileged user, a memory limit...); report.json records which");
  cmd->add_flag("--keep-work", a->options.keep_work,
                "keep the build folder and each check's sandbox folder");
  cmd->add_option("--json", a->json, "also write the report (report.json's content) to this file");
  cmd->add_flag("--as-run", a->options.time_networks,
                "time each network check and print it as `convlab run` does (Op Time, "
                "Correctness) instead of the table: the submission service's run jobs");
  cmd->callback([a, seed, runs, time_limit, &exit_code] {
    GradeOptions& o = a->options;
    o.submission = a->submission;
    if (!a->out.empty()) o.out = a->out;
    if (!a->db.empty()) o.db = a->db;
    if (!a->data.empty()) o.data = a->data;
    if (!a->cache.empty()) o.cache = a->cache;
    for (const std::string& m : a->models) o.model_dirs.emplace_back(m);
    for (const std::string& h : a->hide) o.hide_paths.emplace_back(h);
    if (*time_limit) o.time_limit_s = a->time_limit;
    if (*seed) o.seed = a->seed;
    if (*runs) o.runs = a->runs;
    const GradeResult r =
        grade_submission(o, [&](const std::string& line) { std::cout << line << std::endl; });
    std::cout << "\n"
              << (o.time_networks ? run_lines(r) : summary_table(r) + ranking_note(r))
              << std::flush;
    if (!a->json.empty()) {
      std::ofstream f(a->json);
      f << report_json(r) << "\n";
      if (!f) throw Error("cannot write the JSON report to " + a->json);
    }
    // 0: the grade is complete (or --only's choice), whatever the score; 2: the grader could
    // not complete it; kExitIncomplete: checks of the plan could not run here.
    exit_code = !r.grader_error.empty() ? 2 : r.incomplete ? kExitIncomplete : 0;
  });
}

}  // namespace convlab::grader
