// `convlab bench`: options and dispatch.
#include <CLI/CLI.hpp>

#include "reference/driver/commands.hpp"

namespace convlab {

void add_bench_command(CLI::App& app, int& exit_code) {
  (void)app;
  (void)exit_code;
}

}  // namespace convlab
