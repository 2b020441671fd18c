// `convlab sweep`: options and dispatch.
#include <CLI/CLI.hpp>
#include <iostream>
#include <memory>

#include "reference/bench/sweep.hpp"
#include "reference/commands/commands.hpp"

namespace convlab {

void add_sweep_command(CLI::App& app, int& exit_code) {
  auto opt = std::make_shared<SweepOptions>();
  auto impl = std::make_shared<std::string>(CONVLAB_DEFAULT_IMPL);
  auto no_flush = std::make_shared<bool>(false);
  CLI::App* sweep = app.add_subcommand(
      "sweep",
      "Check and time every point of a variant's parameter grid (tile sizes, threads per block, "
      "outputs per thread) on a network description's layers, with cuDNN of its class beside "
      "them, and name the best point (needs a CUDA build and a GPU)");
  sweep
      ->add_option("--variant", opt->variant,
                   "a variant that declares a grid: " + sweep_variant_names())
      ->required();
  sweep
      ->add_option("--net", opt->net,
                   "network description: ece408, two-conv, lenet, vgg16, odd-shapes, random-layers "
                   "(datasets/nets) or the path of a .json file")
      ->capture_default_str();
  sweep->add_option("--batch", opt->batch, "images per call (default: the net's batch)");
  sweep->add_option("--runs", opt->runs, "timed runs per point and layer")->capture_default_str();
  if (solutions_available()) {
    sweep->add_option("--impl", *impl, "student: your grid in student/; solution: the staff one")
        ->check(CLI::IsMember({"student", "solution"}))
        ->capture_default_str();
  }
  sweep->add_option("--json", opt->json, "also write every figure as a bench JSON report");
  sweep->add_flag("--no-flush", *no_flush,
                  "keep the L2 cache warm between runs (default: flush it before every run)");
  sweep->callback([opt, impl, no_flush, &exit_code] {
    opt->impl = parse_impl(*impl);
    opt->flush_l2 = !*no_flush;
    exit_code = run_sweep(*opt, std::cout, std::cerr);
  });
}

}  // namespace convlab
