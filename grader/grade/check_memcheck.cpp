// The memcheck check: compute-sanitizer's memcheck over a short network run of a GPU variant,
// staged so that every tensor has its own exactly sized buffer.
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <sstream>

#include "grader/grade/grading.hpp"

namespace convlab::grader {

namespace fs = std::filesystem;

namespace {

std::optional<fs::path> find_program(const std::string& name, const std::vector<fs::path>& extra) {
  std::vector<fs::path> dirs;
  const char* env = std::getenv("PATH");
  std::stringstream path(env != nullptr ? env : "");
  for (std::string d; std::getline(path, d, ':');) {
    if (!d.empty()) dirs.emplace_back(d);
  }
  dirs.insert(dirs.end(), extra.begin(), extra.end());
  for (const fs::path& d : dirs) {
    const fs::path p = d / name;
    if (::access(p.c_str(), X_OK) == 0) return p;
  }
  return std::nullopt;
}

class MemcheckCheck final : public CheckKind {
 public:
  void run(Grading& g, PlannedCheck& p, CheckResult& c) const override;
};

void MemcheckCheck::run(Grading& g, PlannedCheck& p, CheckResult& c) const {
  auto sanitizer = find_program("compute-sanitizer", {"/usr/local/cuda/bin"});
  if (sanitizer) {
    // The toolkit's bin/compute-sanitizer is a script that starts the program in its own
    // folder: that program is run directly, so the team's view needs no shell or toolkit bin.
    std::error_code ec;
    const std::filesystem::path real = std::filesystem::canonical(*sanitizer, ec)
                                           .parent_path()
                                           .parent_path() /
                                       "compute-sanitizer" / "compute-sanitizer";
    if (!ec && std::filesystem::is_regular_file(real, ec)) sanitizer = real;
  }
  if (!sanitizer) {
    c.status = CheckStatus::skipped;
    c.reason = "skipped";
    c.output =
        "Not run: compute-sanitizer is not installed on the grading machine (it comes "
        "with the CUDA toolkit). Run it yourself: `compute-sanitizer --tool memcheck "
        "build/default/reference/driver/" +
        g.run_command(p, p.check.images) + "`.";
    return;
  }
  // Staged: the team's process copies into exactly sized buffers of its own, so the
  // sanitizer sees each tensor's bounds.
  const WorkerOutcome w = g.run_worker(
      p.check.id,
      {"network", "--model", p.model_file.string(), "--images",
       g.images_file(p.check.images).string(), "--variant", p.check.variant, "--staged"},
      g.time_limit(p), {sanitizer->string(), "--tool", "memcheck", "--error-exitcode", "99"}, true,
      p.check.hidden);
  c.wall_s = w.run.wall_s;
  if (auto f = g.failure_of(w, p, true)) {
    apply_failure(*f, c);
    return;
  }
  c.status = CheckStatus::passed;
  c.reason = "ok";
  c.score = c.max_score;
  c.output = "compute-sanitizer memcheck found no invalid memory access in " +
             std::to_string(p.check.images) + " images.";
}

}  // namespace

const CheckKind& memcheck_check() {
  static const MemcheckCheck kind;
  return kind;
}

}  // namespace convlab::grader
