/// @file
/// @brief The release subcommand (the `convlab` executable, cli/, adds it).
#pragma once

namespace CLI {
class App;
}

namespace convlab::grader {

/// `convlab release --out DIR` (release_command.cpp).
void add_release_command(CLI::App& app, int& exit_code);

}  // namespace convlab::grader
