#include "grader/class/report_reader.hpp"

#include <nlohmann/json.hpp>

#include "grader/grade/report.hpp"
#include "reference/core/error.hpp"

namespace convlab::grader {

using nlohmann::json;

namespace {

// Typed reads of one object's fields; the path names the field in errors ("checks[3].score").
class Fields {
 public:
  Fields(const json& j, std::string path) : j_(j), path_(std::move(path)) {
    if (!j_.is_object()) throw Error(where("") + " is not an object");
  }

  std::string text(const char* key) const {
    const json& v = need(key);
    if (!v.is_string()) throw Error(where(key) + " is not a string");
    return v.get<std::string>();
  }
  double number(const char* key) const {
    const json& v = need(key);
    if (!v.is_number()) throw Error(where(key) + " is not a number");
    return v.get<double>();
  }
  std::int64_t integer(const char* key) const {
    const json& v = need(key);
    if (!v.is_number_integer()) throw Error(where(key) + " is not an integer");
    return v.get<std::int64_t>();
  }
  bool boolean(const char* key) const {
    const json& v = need(key);
    if (!v.is_boolean()) throw Error(where(key) + " is not true or false");
    return v.get<bool>();
  }
  std::optional<double> optional_number(const char* key) const {
    const json& v = need(key);
    if (v.is_null()) return std::nullopt;
    if (!v.is_number()) throw Error(where(key) + " is neither a number nor null");
    return v.get<double>();
  }
  std::optional<std::int64_t> optional_integer(const char* key) const {
    const json& v = need(key);
    if (v.is_null()) return std::nullopt;
    if (!v.is_number_integer()) throw Error(where(key) + " is neither an integer nor null");
    return v.get<std::int64_t>();
  }
  std::vector<std::string> strings(const char* key) const {
    const json& v = need(key);
    if (!v.is_array()) throw Error(where(key) + " is not an array");
    std::vector<std::string> out;
    for (const json& e : v) {
      if (!e.is_string()) throw Error(where(key) + " holds something that is not a string");
      out.push_back(e.get<std::string>());
    }
    return out;
  }
  std::vector<double> numbers(const char* key) const {
    const json& v = need(key);
    if (!v.is_array()) throw Error(where(key) + " is not an array");
    std::vector<double> out;
    for (const json& e : v) {
      if (!e.is_number()) throw Error(where(key) + " holds something that is not a number");
      out.push_back(e.get<double>());
    }
    return out;
  }
  // An embedded object kept as text, as the grade holds it ("{}" for an empty one).
  std::string embedded(const char* key) const {
    const json& v = need(key);
    // report.cpp keeps a text it could not parse as a string, rather than lose it.
    if (v.is_string()) return v.get<std::string>();
    if (!v.is_object()) throw Error(where(key) + " is not an object");
    return v.dump();
  }
  const json& need(const char* key) const {
    const auto it = j_.find(key);
    if (it == j_.end()) throw Error(where(key) + " is missing");
    return *it;
  }
  std::string where(const char* key) const {
    // Appended piece by piece: GCC 12 at -O3 warns (-Wrestrict) on `"." + std::string(key)`.
    std::string w = path_;
    if (*key != '\0') {
      if (!w.empty()) w.push_back('.');
      w.append(key);
    }
    if (w.empty()) return "the report";
    w.insert(0, "field ");
    return w;
  }

 private:
  const json& j_;
  std::string path_;
};

CheckStatus status_of(const std::string& s, const std::string& where) {
  if (s == "passed") return CheckStatus::passed;
  if (s == "failed") return CheckStatus::failed;
  if (s == "skipped") return CheckStatus::skipped;
  throw Error(where + " is '" + s + "', not passed, failed or skipped");
}

}  // namespace

GradeResult parse_report(const std::string& text) {
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {
    throw Error(std::string("not valid JSON (") + e.what() + ")");
  }
  const Fields f(j, "");
  if (f.text("schema") != kReportSchema) {
    throw Error("schema is '" + f.text("schema") + "', not " + kReportSchema);
  }
  GradeResult r;
  r.grader_version = f.text("grader_version");
  r.framework_hash = f.text("framework_hash");
  r.team = f.text("team");
  r.milestone = f.text("milestone");
  r.submission = f.text("submission");
  r.started_at = f.text("started_at");
  r.duration_s = f.number("duration_s");
  const json& seed = f.need("seed");
  if (!seed.is_number_unsigned() && !(seed.is_number_integer() && seed.get<std::int64_t>() >= 0)) {
    throw Error("field seed is not a non-negative integer");
  }
  r.seed = seed.get<std::uint64_t>();
  r.score = f.number("score");
  r.max_score = f.number("max_score");
  r.op_time_s = f.optional_number("op_time_s");
  r.op_time_median_s = f.optional_number("op_time_median_s");
  r.reference_time_s = f.optional_number("reference_time_s");
  r.speedup = f.optional_number("speedup");
  r.ranked_variant = f.text("ranked_variant");
  r.ranked_model = f.text("ranked_model");
  r.ranked_images = f.integer("ranked_images");
  r.flags = f.strings("flags");
  r.partial = f.boolean("partial");
  r.only = f.strings("only");
  r.grader_error = f.text("grader_error");
  const Fields m(f.need("machine"), "machine");
  r.machine.gpu_name = m.text("gpu_name");
  r.machine.gpu_driver = m.text("gpu_driver");
  r.machine.cuda_driver = m.text("cuda_driver");
  r.machine.cpu_name = m.text("cpu_name");
  r.machine.hostname = m.text("hostname");
  r.sandbox_json = f.embedded("sandbox");

  const json& checks = f.need("checks");
  if (!checks.is_array()) throw Error("field checks is not an array");
  for (std::size_t i = 0; i < checks.size(); ++i) {
    const Fields c(checks[i], "checks[" + std::to_string(i) + "]");
    CheckResult k;
    k.id = c.text("id");
    k.name = c.text("name");
    k.kind = c.text("kind");
    k.milestone = c.text("milestone");
    k.status = status_of(c.text("status"), c.where("status"));
    k.reason = c.text("reason");
    k.score = c.number("score");
    k.max_score = c.number("max_score");
    k.output = c.text("output");
    k.hidden = c.boolean("hidden");
    k.variant = c.text("variant");
    k.model = c.text("model");
    k.images = c.integer("images");
    k.expected_correct = c.optional_integer("expected_correct");
    k.correct = c.optional_integer("correct");
    k.op_time_s = c.optional_number("op_time_s");
    k.op_time_median_s = c.optional_number("op_time_median_s");
    k.op_time_runs_s = c.numbers("op_time_runs_s");
    k.reference_time_s = c.optional_number("reference_time_s");
    k.worst_error = c.optional_number("worst_error");
    k.wall_s = c.number("wall_s");
    k.details_json = c.embedded("details");
    r.checks.push_back(std::move(k));
  }
  return r;
}

}  // namespace convlab::grader
