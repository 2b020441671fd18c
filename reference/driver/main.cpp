// convlab: the command students, the grader and instructors run.
#include <CLI/CLI.hpp>
#include <exception>
#include <iostream>
#include <new>

#include "reference/core/error.hpp"
#include "reference/driver/run_command.hpp"

int main(int argc, char** argv) {
  CLI::App app{
      "convlab: write the forward pass of a CNN convolution layer, on the CPU and in CUDA"};
  app.require_subcommand(1);
  app.set_version_flag("--version", CONVLAB_VERSION);

  convlab::RunOptions opt;
  std::string impl = CONVLAB_DEFAULT_IMPL;
  std::vector<std::string> model_dirs;
  CLI::App* run = app.add_subcommand(
      "run", "Run a milestone's convolution inside the network on the Fashion-MNIST test set");
  run->add_option("milestone", opt.milestone, "m1, m2, m3 or final")->required();
  run->add_option("model", opt.model, "model name or .safetensors file (default: the milestone's)");
  run->add_option("N", opt.images, "how many test images, 1 to 10000 (default 10000)");
  run->add_option("--variant", opt.variant, "GPU variant to run (m3, final), or all for a table");
  run->add_option("--impl", impl, "student: your code in student/; solution: the staff code")
      ->check(CLI::IsMember({"student", "solution"}))
      ->capture_default_str();
  run->add_option("--json", opt.json, "also write the results as JSON to this file");
  run->add_option("--data", opt.data,
                  "Fashion-MNIST directory (default: $CONVLAB_DATA, else "
                  "/usr/share/datasets/fashion-mnist)");
  run->add_option("--device", opt.device, "m1 only: cpu (m1.1) or gpu (m1.2)")
      ->check(CLI::IsMember({"cpu", "gpu"}));
  run->add_option("--models", model_dirs, "extra directory of .safetensors models");
  run->add_option("--runs", opt.runs, "timed calls of each conv layer; Op Time is the fastest")
      ->capture_default_str();

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  try {
    opt.impl = convlab::parse_impl(impl);
    for (const std::string& d : model_dirs) opt.model_dirs.emplace_back(d);
    return convlab::run_milestone(opt, std::cout, std::cerr);
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
