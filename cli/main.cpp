// convlab: the command students, the grader and instructors run. Its subcommands are whatever the
// parts of this tree registered (cli/CMakeLists.txt).
#include <CLI/CLI.hpp>
#include <exception>
#include <iostream>
#include <new>

#include "reference/core/error.hpp"

namespace convlab {
// Adds every registered subcommand (generated: registered_commands.cpp).
void add_registered_commands(CLI::App& app, int& exit_code);
}  // namespace convlab

int main(int argc, char** argv) {
  CLI::App app{
      "convlab: write the forward pass of a CNN convolution layer, on the CPU and in CUDA"};
  app.require_subcommand(1);
  app.set_version_flag("--version", CONVLAB_VERSION);

  // Each subcommand runs from its CLI11 callback, inside parse(), and sets exit_code.
  int exit_code = 0;
  convlab::add_registered_commands(app, exit_code);

  try {
    app.parse(argc, argv);
    return exit_code;
  } catch (const CLI::ParseError& e) {
    // --help and --version exit 0; every bad argument exits 1, as documented (CLI11's own
    // codes, 100 and up, mean nothing to a script).
    return app.exit(e) == 0 ? 0 : 1;
  } catch (const convlab::Error& e) {
    std::cout << std::flush;
    std::cerr << "\nconvlab: error: " << e.what() << std::endl;
    return 1;
  } catch (const std::bad_alloc&) {
    std::cerr << "\nconvlab: error: out of memory; try a smaller N" << std::endl;
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "\nconvlab: internal error: " << e.what()
              << "\nPlease report this with the command you ran." << std::endl;
    return 2;
  }
}
