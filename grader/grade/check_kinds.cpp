// Every check kind, once: a new kind is its own file and one line here.
#include "grader/grade/grading.hpp"
#include "reference/core/error.hpp"

namespace convlab::grader {

// Defined in check_<kind>.cpp, one per file.
const CheckKind& files_check();
const CheckKind& build_check();
const CheckKind& symbols_check();
const CheckKind& network_check();
const CheckKind& hidden_model_check();
const CheckKind& elementwise_check();
const CheckKind& memcheck_check();
const CheckKind& time_check();

const CheckKind& check_kind(const std::string& kind) {
  static const std::pair<const char*, const CheckKind*> kinds[] = {
      {"files", &files_check()},         {"build", &build_check()},
      {"symbols", &symbols_check()},     {"network", &network_check()},
      {"hidden", &hidden_model_check()}, {"elementwise", &elementwise_check()},
      {"memcheck", &memcheck_check()},   {"time", &time_check()},
  };
  for (const auto& [name, k] : kinds) {
    if (kind == name) return *k;
  }
  throw Error("no check kind '" + kind + "' (grader/grade/check_kinds.cpp lists them)");
}

const CheckKind& check_kind_of(const PlannedCheck& p) {
  return check_kind(p.check.hidden ? "hidden" : p.check.kind);
}

}  // namespace convlab::grader
