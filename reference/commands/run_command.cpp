// `convlab run`: plan, execute, report (run_steps.hpp), and the command's options.
#include "reference/commands/run_command.hpp"

#include <iostream>

#include "reference/commands/run_steps.hpp"

namespace convlab {

int run_milestone(const RunOptions& opt, bool fuse, std::ostream& out, std::ostream& err) {
  const RunPlan plan = plan_run(opt, fuse);
  const RunResult result = execute_run(plan, out);
  return report_run(plan, result, out, err);
}

int run_milestone(const RunOptions& opt, std::ostream& out, std::ostream& err) {
  return run_milestone(opt, /*fuse=*/true, out, err);
}

}  // namespace convlab

#include <CLI/CLI.hpp>

#include "reference/commands/commands.hpp"
#include "reference/milestones/cli_values.hpp"

namespace convlab {

void add_run_command(CLI::App& app, int& exit_code) {
  auto opt = std::make_shared<RunOptions>();
  auto impl = std::make_shared<std::string>(CONVLAB_DEFAULT_IMPL);
  auto model_dirs = std::make_shared<std::vector<std::string>>();
  auto no_fuse = std::make_shared<bool>(false);
  CLI::App* run = app.add_subcommand(
      "run", "Run a milestone's convolution inside the network on the Fashion-MNIST test set");
  run->add_option("milestone", opt->milestone, "m1, m2, m3 or final")->required();
  run->add_option("model", opt->model,
                  "model name or .safetensors file (default: the milestone's)");
  run->add_option("N", opt->images, "how many test images, 1 to 10000 (default 10000)");
  run->add_option("--variant", opt->variant,
                  "GPU variant to run (" + variants_by_milestone_help() + "), or all for a table")
      ->check(CLI::IsMember(variant_choices()));
  // Only where the staff solutions are built in: the student release has no such choice.
  if (solutions_available()) {
    run->add_option("--impl", *impl, "student: your code in student/; solution: the staff code")
        ->check(CLI::IsMember({"student", "solution"}))
        ->capture_default_str();
  }
  run->add_option("--json", opt->json, "also write the results as JSON to this file");
  run->add_option("--data", opt->data,
                  "Fashion-MNIST directory (default: $CONVLAB_DATA, else "
                  "/usr/share/datasets/fashion-mnist)");
  run->add_option("--device", opt->device, "m1 only: cpu (m1.1) or gpu (m1.2)")
      ->check(CLI::IsMember({"cpu", "gpu"}));
  run->add_option("--models", *model_dirs, "extra directory of .safetensors models");
  run->add_option("--runs", opt->runs, "timed calls of each conv layer; Op Time is the fastest")
      ->capture_default_str();
  run->add_flag("--profile", opt->profile,
                "GPU runs: after the results, print every kernel, memory copy and CUDA call with "
                "its time (the nvprof summary table)");
  run->add_option("--profile-json", opt->profile_json,
                  "also write the profile as JSON to this file (implies --profile)");
  run->add_flag("--no-fuse", *no_fuse,
                "time every conv layer alone, even where the variant also has a fused conv + tanh "
                "+ max-pool launcher");
  run->callback([opt, impl, model_dirs, no_fuse, &exit_code] {
    opt->impl = parse_impl(*impl);
    for (const std::string& d : *model_dirs) opt->model_dirs.emplace_back(d);
    exit_code = run_milestone(*opt, !*no_fuse, std::cout, std::cerr);
  });
}

}  // namespace convlab
