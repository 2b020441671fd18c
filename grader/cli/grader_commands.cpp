// Registers the grader's subcommands; each part that is built adds its own.
#include <CLI/CLI.hpp>

#include "grader/cli/commands.hpp"
#include "reference/driver/commands.hpp"

namespace convlab {

void add_grader_commands(CLI::App& app, int& exit_code) {
#ifdef CONVLAB_HAVE_GRADE_CLI
  grader::add_grade_command(app, exit_code);
#endif
#ifdef CONVLAB_HAVE_CLASS_CLI
  grader::add_grade_all_command(app, exit_code);
#endif
#ifdef CONVLAB_HAVE_INGEST_CLI
  grader::add_ingest_command(app, exit_code);
#endif
#ifdef CONVLAB_HAVE_LEADERBOARD_CLI
  grader::add_leaderboard_command(app, exit_code);
#endif
#ifdef CONVLAB_HAVE_RELEASE_CLI
  grader::add_release_command(app, exit_code);
#endif
  (void)app;
  (void)exit_code;
}

}  // namespace convlab
