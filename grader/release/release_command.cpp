// `convlab release --out DIR [--force]`: writes the student starter kit.
#include <CLI/CLI.hpp>
#include <iostream>

#include "grader/release/commands.hpp"
#include "grader/release/release.hpp"
#include "reference/milestones/milestone.hpp"

namespace convlab::grader {

namespace {

struct ReleaseArgs {
  std::string out;
  bool force = false;
};

int run_release(const ReleaseArgs& args) {
  ReleaseOptions options;
  options.root = convlab_root();
  options.out = args.out;
  options.force = args.force;
  const ReleaseResult r =
      make_release(options, [](const std::string& line) { std::cerr << line << "\n"; });

  std::cout << "Left out:\n";
  for (const auto& [path, why] : r.plan.left_out)
    std::cout << "  " << path << "  (" << why << ")\n";
  std::cout << "Public models: ";
  for (std::size_t i = 0; i < r.plan.public_models.size(); ++i) {
    std::cout << (i ? ", " : "") << r.plan.public_models[i];
  }
  std::cout << "\nRelease: " << r.plan.files.size() << " files, " << r.bytes / 1024 << " KiB in "
            << options.out.string() << "; manifest " << r.manifest.string() << " (check: cd "
            << options.out.string() << " && sha256sum -c RELEASE)\n";
  if (!r.plan.refused_models.empty()) {
    std::cerr << "warning: refused to copy " << r.plan.refused_models.size()
              << " model file(s) that are not public models:\n";
    for (const std::string& m : r.plan.refused_models) std::cerr << "  " << m << "\n";
    std::cerr << "Keep hidden models outside the framework tree and pass them to the grader "
                 "with --models DIR (docs/instructor.md, 'Hidden models').\n";
  }
  return 0;
}

}  // namespace

void add_release_command(CLI::App& app, int& exit_code) {
  auto args = std::make_shared<ReleaseArgs>();
  CLI::App* cmd = app.add_subcommand(
      "release",
      "Write the student starter kit: the framework without the staff solutions, staff tools, "
      "instructor guide or hidden models, with a RELEASE manifest (SHA-256 of every file)");
  cmd->add_option("--out", args->out, "Folder to write the starter kit to (new or empty)")
      ->required();
  cmd->add_flag("--force", args->force,
                "Replace the contents of a non-empty --out folder (a .git folder in it stays)");
  cmd->callback([args, &exit_code] { exit_code = run_release(*args); });
}

}  // namespace convlab::grader
