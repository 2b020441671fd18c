/// @file
/// @brief The grade subcommand (the `convlab` executable, cli/, adds it).
#pragma once

namespace CLI {
class App;
}

namespace convlab::grader {

/// `convlab grade SUBMISSION --milestone ...` (grade_command.cpp).
void add_grade_command(CLI::App& app, int& exit_code);

}  // namespace convlab::grader
