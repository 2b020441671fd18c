// The build check: the team's files compile against a pristine copy of the framework.
#include <algorithm>

#include "grader/grade/grading.hpp"

namespace convlab::grader {

using nlohmann::json;

namespace {

class BuildCheck final : public CheckKind {
 public:
  bool runs_team_code() const override { return false; }
  void run(Grading& g, PlannedCheck& p, CheckResult& c) const override;
};

void BuildCheck::run(Grading& g, PlannedCheck& /*p*/, CheckResult& c) const {
  const BuildResult& b = g.build_result();
  c.wall_s = b.wall_s;
  c.details_json = json{{"reason", b.reason}, {"log_file", "logs/build.log"}}.dump();
  // A forbidden symbol is found after a build that compiled.
  const bool compiled = b.ok || b.reason == "forbidden_symbol";
  if (compiled) {
    c.status = CheckStatus::passed;
    c.reason = "ok";
    c.output = "Your files compiled.";
  } else if (b.reason == "framework_build_failed") {
    c.status = CheckStatus::skipped;
    c.reason = "framework_build_failed";
    c.output =
        "The grader could not build its own copy of the framework, so your code was not "
        "graded. This is not your fault: tell the course staff.";
    g.result().grader_error =
        "the pristine framework did not build; see " + (g.logs_dir() / "build.log").string();
  } else {
    c.status = CheckStatus::failed;
    c.reason = b.reason == "timeout"             ? "timeout"
               : b.reason == "forbidden_include" ? "forbidden_include"
                                                 : "build_failed";
    std::string log = b.log;
    if (log.size() > 8000) {
      log = log.substr(0, 5000) + "\n[...]\n" + log.substr(log.size() - 2500);
    }
    std::string out = b.reason == "timeout" ? "The build ran past its time limit.\n"
                                            : "Your files did not compile.\n";
    for (const std::string& line : b.forbidden) out += line + "\n";
    out += "\nCompiler output:\n" + log +
           "\nBuild the same files yourself (cmake --build --preset " +
           std::string(std::any_of(g.specs().begin(), g.specs().end(),
                                   [](const MilestoneSpec& spec) { return spec.gpu; })
                           ? "default"
                           : "cpu") +
           ") and fix the first error first.";
    c.output = out;
  }
}

}  // namespace

const CheckKind& build_check() {
  static const BuildCheck kind;
  return kind;
}

}  // namespace convlab::grader
