/// @file
/// @brief The framework's `convlab` subcommands: each registers its options on the app and,
/// when chosen, stores its exit code in `exit_code`. The `convlab` executable (cli/) composes
/// them with the grader's; each is registered with convlab_command().
#pragma once

namespace CLI {
class App;
}

namespace convlab {

/// `convlab run`: a milestone's convolution in the network (reference/commands/run_command.cpp).
void add_run_command(CLI::App& app, int& exit_code);
/// `convlab check`: the team's convolution against the library one, output by output
/// (reference/commands/check_command.cpp).
void add_check_command(CLI::App& app, int& exit_code);
/// `convlab variants`: the variant declarations as a table or JSON
/// (reference/commands/variants_command.cpp).
void add_variants_command(CLI::App& app, int& exit_code);
/// `convlab bench`: per-layer timings of a network description against cuDNN
/// (reference/commands/bench_command.cpp, on reference/bench/).
void add_bench_command(CLI::App& app, int& exit_code);
/// `convlab sweep`: every point of a variant's parameter grid, checked and timed
/// (reference/commands/sweep_command.cpp, on reference/bench/sweep.cpp).
void add_sweep_command(CLI::App& app, int& exit_code);

}  // namespace convlab
