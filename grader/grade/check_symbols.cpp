// The symbols check: no forbidden include or call (cuDNN, cuBLAS, the library convolution,
// the staff solutions) in the team's code.
#include "grader/grade/grading.hpp"

namespace convlab::grader {

using nlohmann::json;

namespace {

class SymbolsCheck final : public CheckKind {
 public:
  bool runs_team_code() const override { return false; }
  void run(Grading& g, PlannedCheck& p, CheckResult& c) const override;
};

void SymbolsCheck::run(Grading& g, PlannedCheck& /*p*/, CheckResult& c) const {
  const BuildResult& b = g.build_result();
  c.details_json = json{{"forbidden", b.forbidden}}.dump();
  if (b.reason == "forbidden_symbol" || b.reason == "forbidden_include") {
    c.status = CheckStatus::failed;
    c.reason = b.reason;
    std::string out = "Your code uses what it may not:\n";
    for (const std::string& line : b.forbidden) out += "  " + line + "\n";
    out +=
        "Write the convolution yourself; cuDNN, cuBLAS, the library convolution and the "
        "staff solutions are off limits.";
    c.output = out;
  } else if (b.ok) {
    c.status = CheckStatus::passed;
    c.reason = "ok";
    c.output = "No forbidden include or call.";
  } else {
    c.status = b.reason == "framework_build_failed" ? CheckStatus::skipped : CheckStatus::failed;
    c.reason = b.reason == "framework_build_failed" ? "framework_build_failed" : "build_failed";
    c.output = "Not checked: the build did not finish.";
  }
}

}  // namespace

const CheckKind& symbols_check() {
  static const SymbolsCheck kind;
  return kind;
}

}  // namespace convlab::grader
