// `convlab bench`: options and dispatch.
#include <CLI/CLI.hpp>
#include <iostream>
#include <memory>

#include "reference/bench/bench.hpp"
#include "reference/commands/commands.hpp"
#include "reference/milestones/cli_values.hpp"

namespace convlab {

void add_bench_command(CLI::App& app, int& exit_code) {
  auto opt = std::make_shared<BenchOptions>();
  auto impl = std::make_shared<std::string>(CONVLAB_DEFAULT_IMPL);
  auto no_flush = std::make_shared<bool>(false);
  CLI::App* bench = app.add_subcommand(
      "bench",
      "Time each conv layer of a network description with a GPU variant and with cuDNN's "
      "fastest algorithm of its precision class, check the variant's output and place both under "
      "the layer's roofline (needs a CUDA build and a GPU; --from-json plots earlier reports "
      "without one)");
  bench
      ->add_option("--net", opt->net,
                   "network description: ece408, two-conv, lenet, vgg16, odd-shapes, random-layers "
                   "(datasets/nets) or the path of a .json file")
      ->capture_default_str();
  bench
      ->add_option("--variant", opt->variant,
                   "GPU variant to time (" + variant_names_help() + "), or all for every variant")
      ->check(CLI::IsMember(variant_choices()))
      ->capture_default_str();
  bench->add_option("--batch", opt->batch, "images per call (default: the net's batch)");
  bench->add_option("--runs", opt->runs, "timed runs per layer for the variant and for cuDNN")
      ->capture_default_str();
  // Only where the staff solutions are built in: the student release has no such choice.
  if (solutions_available()) {
    bench->add_option("--impl", *impl, "student: your code in student/; solution: the staff code")
        ->check(CLI::IsMember({"student", "solution"}))
        ->capture_default_str();
  }
  bench->add_option("--json", opt->json, "also write every figure as JSON to this file");
  CLI::Option* no_flush_flag =
      bench->add_flag("--no-flush", *no_flush,
                      "keep the L2 cache warm between runs (default: flush it before every run)");
  bench->add_option("--svg", opt->svg,
                    "also draw the roofline plot (layers as points, ours and cuDNN) to this SVG "
                    "file");
  bench->add_option("--markdown", opt->markdown,
                    "also write a Markdown page of the figures to this file: the machine, its "
                    "ceilings, the --svg plot and per net a table of layers and one of variants "
                    "(as docs/perf/GPU.md)");
  CLI::Option* from = bench->add_option(
      "--from-json", opt->from_json,
      "measure nothing: draw the --svg plot and the --markdown page from these bench --json "
      "reports (of one GPU)");
  // Options of a measurement mean nothing to a plot of earlier reports: refuse them.
  for (const char* name : {"--net", "--variant", "--batch", "--runs", "--json"}) {
    from->excludes(bench->get_option(name));
  }
  from->excludes(no_flush_flag);
  if (solutions_available()) from->excludes(bench->get_option("--impl"));
  bench->callback([opt, impl, no_flush, &exit_code] {
    opt->impl = parse_impl(*impl);
    opt->flush_l2 = !*no_flush;
    exit_code = run_bench(*opt, std::cout, std::cerr);
  });
}

}  // namespace convlab
