/// @file
/// @brief The leaderboard subcommand (the `convlab` executable, cli/, adds it).
#pragma once

namespace CLI {
class App;
}

namespace convlab::grader {

/// `convlab leaderboard --db FILE ...` (leaderboard_command.cpp).
void add_leaderboard_command(CLI::App& app, int& exit_code);

}  // namespace convlab::grader
