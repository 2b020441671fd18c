// `convlab grade`, `grade-all`, `leaderboard`, `release`: options and dispatch only.
#include <CLI/CLI.hpp>

#include "reference/driver/commands.hpp"

namespace convlab {

void add_grader_commands(CLI::App& app, int& exit_code) {
  (void)app;
  (void)exit_code;
}

}  // namespace convlab
