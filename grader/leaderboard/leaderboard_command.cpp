// `convlab leaderboard --db FILE`: the board from the results database, as a table, CSV and
// HTML.
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>

#include "grader/leaderboard/commands.hpp"
#include "grader/leaderboard/leaderboard.hpp"
#include "reference/core/error.hpp"
#include "reference/milestones/milestone.hpp"

namespace convlab::grader {

namespace fs = std::filesystem;

namespace {

struct LeaderboardOptions {
  std::string db;
  std::string milestone = "final";
  std::optional<std::string> html, csv, labels, rule, json;
  bool anonymize = false;
};

// Written beside the target and renamed over it, so a web server never serves half a page.
void write_file(const fs::path& path, const std::string& text, const std::string& what) {
  const fs::path tmp = path.string() + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << text;
    out.close();
    if (!out) {
      std::error_code ec;
      fs::remove(tmp, ec);
      throw Error("cannot write the " + what + " to " + path.string() +
                  ": check that its directory exists and is writable");
    }
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec) {
    fs::remove(tmp, ec);
    throw Error("cannot write the " + what + " to " + path.string() + ": " + ec.message());
  }
}

int run_leaderboard(const LeaderboardOptions& opt) {
#ifndef CONVLAB_HAVE_SQLITE
  (void)opt;
  (void)write_file;
  throw Error(
      "this convlab was built without SQLite, so it has no results database: install "
      "libsqlite3-dev (apt-get install libsqlite3-dev), configure the build again and rebuild");
#else
  const fs::path root = convlab_root();
  load_milestone(root, opt.milestone);  // an unknown milestone: the list of valid ones
  const RankingRule rule = load_ranking_rule(root, opt.milestone, opt.rule);

  ResultsDbOptions db_options;
  db_options.create = false;
  const ResultsDb db(opt.db, db_options);
  std::optional<std::string> key;
  if (opt.anonymize) key = db.anonymize_key();
  const std::vector<TeamBest> teams = db.best_per_team(opt.milestone);
  const Leaderboard board = rank_teams(opt.milestone, teams, rule, key);

  std::cout << leaderboard_text(board);
  if (opt.csv) {
    write_file(*opt.csv, leaderboard_csv(board), "CSV leaderboard");
    std::cout << "CSV written to " << *opt.csv << "\n";
  }
  if (opt.html) {
    write_file(*opt.html, leaderboard_html(board), "HTML leaderboard");
    std::cout << "HTML page written to " << *opt.html << "\n";
  }
  if (opt.json) {
    nlohmann::json rows = nlohmann::json::array();
    for (const LeaderboardRow& r : board.rows) {
      rows.push_back({{"rank", r.rank},
                      {"team", r.team},
                      {"op_time_s", r.best.op_time_s},
                      {"reference_time_s", r.best.reference_time_s ? nlohmann::json(*r.best.reference_time_s)
                                                                  : nlohmann::json(nullptr)},
                      {"stddevs_from_median", r.stddevs_from_median},
                      {"points", r.points}});
    }
    const nlohmann::json doc{{"milestone", board.milestone},
                             {"reference", board.rule.cpu ? "CPU library convolution"
                                                                   : "cuDNN"},
                             {"median_s", board.median_s},
                             {"stddev_s", board.stddev_s},
                             {"anonymized", board.anonymized},
                             {"rows", rows}};
    write_file(*opt.json, doc.dump(2) + "\n", "JSON leaderboard");
    std::cout << "JSON written to " << *opt.json << "\n";
  }
  if (opt.labels) {
    // Which label is whose, for the instructor to tell each team its own. Both boards sort
    // by time and then by real name, so their rows line up.
    const Leaderboard named = rank_teams(opt.milestone, teams, rule);
    const Leaderboard labelled = rank_teams(opt.milestone, teams, rule, db.anonymize_key());
    std::string csv = "team,label\n";
    for (std::size_t i = 0; i < named.rows.size(); ++i) {
      std::string name = named.rows[i].team;
      if (name.find_first_of(",\"\r\n") != std::string::npos) {
        std::string quoted = "\"";
        for (char c : name) quoted += c == '"' ? std::string("\"\"") : std::string(1, c);
        name = quoted + "\"";
      }
      csv += name + "," + labelled.rows[i].team + "\n";
    }
    write_file(*opt.labels, csv, "label list");
    std::cout << "Team labels written to " << *opt.labels
              << " (instructors only: it maps the anonymous labels back to names)\n";
  }
  return 0;
#endif
}

}  // namespace

void add_leaderboard_command(CLI::App& app, int& exit_code) {
  auto opt = std::make_shared<LeaderboardOptions>();
  CLI::App* cmd = app.add_subcommand(
      "leaderboard",
      "Rank teams by their best correct time in the results database: a table, and CSV and "
      "HTML pages");
  cmd->add_option("--db", opt->db, "the results database that convlab grade --db wrote")
      ->required();
  cmd->add_option("--milestone", opt->milestone, "the milestone to rank (a graded one)")
      ->check(CLI::IsMember(graded_milestone_ids()))
      ->capture_default_str();
  cmd->add_option("--json", opt->json, "also write the board as JSON to this file");
  cmd->add_option("--html", opt->html, "also write the board as one self-contained HTML page");
  cmd->add_option("--csv", opt->csv, "also write the board as CSV");
  cmd->add_flag("--anonymize", opt->anonymize,
                "replace team names by stable anonymous labels (the view for students)");
  cmd->add_option("--labels", opt->labels,
                  "write which anonymous label belongs to which team (CSV, for instructors)");
  cmd->add_option("--rule", opt->rule,
                  "points by stddev_from_median (the original) or threshold (default: the "
                  "milestone's checks.json)")
      ->check(CLI::IsMember({"stddev_from_median", "threshold"}));
  cmd->callback([opt, &exit_code] { exit_code = run_leaderboard(*opt); });
}

}  // namespace convlab::grader
