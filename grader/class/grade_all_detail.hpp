/// @file
/// @brief What the local class grader (grade_all.cpp) and the Slurm one (slurm.cpp) share:
/// the checked plan of a class run, one team's `convlab grade` command line, judging how it
/// ended, and the summary files. Internal to grader/class.
#pragma once

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "grader/class/child_process.hpp"
#include "grader/class/grade_all.hpp"

namespace convlab::grader::detail {

/// A class run's checked inputs.
struct ClassPlan {
  std::filesystem::path submissions;                 ///< absolute, canonical
  std::filesystem::path out;                         ///< absolute, canonical, created
  std::vector<std::filesystem::path> class_folders;  ///< every team of the class
  std::vector<std::filesystem::path> folders;        ///< the teams graded now
  bool gpu = false;                                  ///< a GPU milestone
  std::vector<TeamOutcome> kept;  ///< --team: the other teams' rows of the summary there
};

/// Checks the options (milestone, folders, --team, --out) and creates --out. Throws Error.
ClassPlan plan_class(const GradeAllOptions& options);

/// A fresh outcome for the team in `folder` (its results in out/TEAM).
TeamOutcome new_outcome(const std::filesystem::path& folder, const std::filesystem::path& out);

/// The command line of one team's grade; argv[0] is what the log shows. Every other team of
/// the class (its submission and its results) is hidden from this team's checks.
std::vector<std::string> grade_argv(const GradeAllOptions& options, const TeamOutcome& team,
                                    const std::vector<std::filesystem::path>& class_folders,
                                    const std::filesystem::path& out);

/// Empties the team's results folder and starts its grade.log with the command, so that the
/// grade can be repeated by hand.
void start_team_folder(const TeamOutcome& team, const std::vector<std::string>& argv);

/// Fills `team` from how its `convlab grade` ended and the report it left (graded, error,
/// exit code; the report's figures).
void judge(TeamOutcome& team, const ChildExit& exit, double team_timeout_s);

/// One row of summary.json; team_from_json reads it back.
nlohmann::json team_json(const TeamOutcome& team);
TeamOutcome team_from_json(const nlohmann::json& row);

/// Adds the kept rows, sorts by team and writes summary.csv and summary.json into `out`.
void write_summary(ClassSummary& summary, std::vector<TeamOutcome> kept,
                   const std::filesystem::path& out);

/// Writes `text` to `path` through a temporary file and a rename, so that a reader (the one
/// writer, another node) never sees half of it. Throws Error.
void write_atomically(const std::filesystem::path& path, const std::string& text);

/// Whether request_grade_all_stop() was called since the run began.
bool stop_requested();
/// Forgets an earlier stop request (a run begins).
void clear_stop();

}  // namespace convlab::grader::detail
