// The files check: only the milestone's files are graded; others are named and ignored.
#include "grader/grade/grading.hpp"

namespace convlab::grader {

using nlohmann::json;

namespace {

class FilesCheck final : public CheckKind {
 public:
  bool runs_team_code() const override { return false; }
  void run(Grading& g, PlannedCheck& p, CheckResult& c) const override;
};

void FilesCheck::run(Grading& g, PlannedCheck& /*p*/, CheckResult& c) const {
  const BuildResult& b = g.build_result();
  json rejected = json::array();
  for (const auto& [path, why] : b.files.rejected)
    rejected.push_back({{"path", path}, {"why", why}});
  c.details_json =
      json{{"accepted", b.files.accepted}, {"rejected", rejected}, {"missing", b.files.missing}}
          .dump();
  std::string out = "Graded files: ";
  for (std::size_t i = 0; i < b.files.accepted.size(); ++i) {
    out += (i > 0 ? ", " : "") + b.files.accepted[i];
  }
  if (b.files.accepted.empty()) out += "none";
  out += ".\n";
  for (const std::string& m : b.files.missing) {
    out += "Not in the submission (the untouched stub is graded, so its checks fail): " + m + "\n";
  }
  if (b.files.rejected.empty()) {
    c.status = CheckStatus::passed;
    c.reason = "ok";
  } else {
    c.status = CheckStatus::failed;
    c.reason = "forbidden_file";
    out += "Ignored (only the milestone's files are graded; hand in only those):\n";
    for (const auto& [path, why] : b.files.rejected) out += "  " + path + ": " + why + "\n";
  }
  c.output = out;
}

}  // namespace

const CheckKind& files_check() {
  static const FilesCheck kind;
  return kind;
}

}  // namespace convlab::grader
