/// @file
/// @brief The grader's subcommands; each is defined beside the part it drives.
#pragma once

namespace CLI {
class App;
}

namespace convlab::grader {

/// `convlab grade SUBMISSION --milestone ...` (grader/grade/grade_command.cpp).
void add_grade_command(CLI::App& app, int& exit_code);
/// `convlab grade-all DIR ...` (grader/class/grade_all_command.cpp).
void add_grade_all_command(CLI::App& app, int& exit_code);
/// `convlab ingest OUT --db FILE` (grader/class/ingest_command.cpp).
void add_ingest_command(CLI::App& app, int& exit_code);
/// `convlab leaderboard --db FILE ...` (grader/leaderboard/leaderboard_command.cpp).
void add_leaderboard_command(CLI::App& app, int& exit_code);
/// `convlab release --out DIR` (grader/release/release_command.cpp).
void add_release_command(CLI::App& app, int& exit_code);

}  // namespace convlab::grader
