/// @file
/// @brief The class-grading subcommands (the `convlab` executable, cli/, adds them).
#pragma once

namespace CLI {
class App;
}

namespace convlab::grader {

/// `convlab grade-all DIR ...` (grade_all_command.cpp).
void add_grade_all_command(CLI::App& app, int& exit_code);
/// `convlab ingest OUT --db FILE` (ingest_command.cpp).
void add_ingest_command(CLI::App& app, int& exit_code);

}  // namespace convlab::grader
