#include "grader/service/job_request.hpp"

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "grader/builder/build_submission.hpp"
#include "reference/core/error.hpp"
#include "reference/milestones/milestone.hpp"

namespace convlab::service {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// A path the team's checkout may hold under student/: relative, plain parts, no way out.
bool safe_path(const std::string& path) {
  if (path.size() > 255 || !path.starts_with("student/")) return false;
  std::size_t start = 0;
  while (start <= path.size()) {
    const std::size_t end = std::min(path.find('/', start), path.size());
    const std::string part = path.substr(start, end - start);
    if (part.empty() || part == "." || part == ".." || part.starts_with(".")) return false;
    for (const char c : part) {
      if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f || c == '\\') return false;
    }
    start = end + 1;
  }
  return true;
}

std::string optional_string(const json& body, const char* key) {
  if (!body.contains(key) || body[key].is_null()) return "";
  if (!body[key].is_string()) {
    throw RequestError(400, std::string("\"") + key + "\" must be a string");
  }
  return body[key].get<std::string>();
}

std::string list_text(const std::vector<std::string>& values) {
  std::string text;
  for (const std::string& v : values) text += (text.empty() ? "" : ", ") + v;
  return text.empty() ? "none" : text;
}

}  // namespace

JobSpec parse_job_request(const std::string& text, const std::string& team, const fs::path& root) {
  const json body = json::parse(text, nullptr, false);
  if (!body.is_object()) {
    throw RequestError(400, "the request body is not a JSON object; use `convlab submit`");
  }
  JobSpec spec;
  spec.team = team;
  spec.command = optional_string(body, "command");
  if (spec.command != "check" && spec.command != "run" && spec.command != "grade") {
    throw RequestError(422, "unknown command '" + spec.command + "': use check, run or grade");
  }
  spec.milestone = optional_string(body, "milestone");
  const std::vector<std::string> graded = graded_milestone_ids(root);
  if (std::find(graded.begin(), graded.end(), spec.milestone) == graded.end()) {
    throw RequestError(422, "unknown milestone '" + spec.milestone + "': use " + list_text(graded));
  }
  const Milestone ms = load_milestone(root, spec.milestone);
  spec.device = std::find(ms.devices.begin(), ms.devices.end(), "gpu") != ms.devices.end()
                    ? "gpu"
                    : "cpu";

  json args = json::object();
  const std::string variant = optional_string(body, "variant");
  if (!variant.empty()) {
    if (std::find(ms.variants.begin(), ms.variants.end(), variant) == ms.variants.end()) {
      throw RequestError(422, "milestone " + ms.id + " has no variant '" + variant +
                                  "': use " + list_text(ms.variants));
    }
    if (spec.command == "grade") {
      throw RequestError(422, "a grade runs every variant of the milestone: leave --variant out");
    }
    args["variant"] = variant;
  }
  const std::string model = optional_string(body, "model");
  const bool has_images = body.contains("images") && !body["images"].is_null();
  if (spec.command != "run" && (!model.empty() || has_images)) {
    throw RequestError(422, "only run takes a model and an image count");
  }
  if (spec.command == "run") {
    const std::string m = model.empty() ? ms.default_model : model;
    std::int64_t images = ms.default_images;
    if (has_images) {
      if (!body["images"].is_number_integer()) {
        throw RequestError(400, "\"images\" must be an integer");
      }
      images = body["images"].get<std::int64_t>();
    }
    std::vector<std::string> models, counts;
    bool listed = false;
    for (const Check& c : ms.checks) {
      if (std::find(models.begin(), models.end(), c.model) == models.end()) {
        models.push_back(c.model);
      }
      if (c.model == m) {
        counts.push_back(std::to_string(c.images));
        listed = listed || c.images == images;
      }
    }
    if (counts.empty()) {
      throw RequestError(422, "milestone " + ms.id + " has no model '" + m + "': use " +
                                  list_text(models));
    }
    if (!listed) {
      throw RequestError(422, "milestone " + ms.id + " checks " + m + " on " +
                                  list_text(counts) + " images only, not " +
                                  std::to_string(images));
    }
    args["model"] = m;
    args["images"] = images;
  }
  spec.args_json = args.dump();

  if (!body.contains("files") || !body["files"].is_object()) {
    throw RequestError(400, "\"files\" must be an object: path in your checkout -> content");
  }
  const json& files = body["files"];
  if (files.empty()) throw RequestError(422, "the upload holds no file");
  if (files.size() > kMaxFiles) {
    throw RequestError(413, "the upload holds " + std::to_string(files.size()) +
                                " files; at most " + std::to_string(kMaxFiles) + " are accepted");
  }
  for (const auto& [path, content] : files.items()) {
    if (!safe_path(path)) {
      throw RequestError(422, "the file name " +
                                  json(path).dump(-1, ' ', true, json::error_handler_t::replace) +
                                  " is refused: give a path inside student/, without '..', "
                                  "hidden parts, backslashes or control characters");
    }
    if (!content.is_string()) throw RequestError(400, "the content of " + path + " must be text");
    const std::string& bytes = content.get_ref<const std::string&>();
    if (bytes.size() > kMaxFileBytes) {
      throw RequestError(413, path + " is larger than 1 MiB: a source file is far smaller; "
                                     "upload your source only");
    }
    spec.files[path] = bytes;
  }
  return spec;
}

void write_job_files(const std::map<std::string, std::string>& files, const fs::path& dir) {
  fs::create_directories(dir);
  for (const auto& [path, content] : files) {
    const fs::path file = dir / path;
    fs::create_directories(file.parent_path());
    std::ofstream out(file, std::ios::binary);
    out << content;
    if (!out) throw Error("cannot write " + file.string());
  }
}

std::vector<std::string> upload_problems(const fs::path& dir, const std::string& milestone,
                                         const fs::path& root) {
  const Milestone ms = load_milestone(root, milestone);
  const grader::SubmissionFiles scan = grader::scan_submission(dir, ms.team_writes, root, ms.team_folders);
  std::vector<std::string> problems;
  for (const auto& [file, why] : scan.rejected) problems.push_back(file + ": " + why);
  if (problems.empty() && scan.accepted.empty()) {
    problems.push_back("none of the files milestone " + milestone +
                       " grades is in the upload: " + list_text(ms.team_writes));
  }
  return problems;
}

std::vector<std::string> grade_arguments(const JobInfo& job, const GradeSettings& settings,
                                         const fs::path& submission, const fs::path& out) {
  std::vector<std::string> argv{"grade",  submission.string(), "--milestone", job.milestone,
                                "--team", job.team,            "--out",       out.string()};
  const json args = json::parse(job.args_json, nullptr, false);
  const auto arg = [&](const char* key) -> std::string {
    if (!args.is_object() || !args.contains(key)) return "";
    return args[key].is_string() ? args[key].get<std::string>() : args[key].dump();
  };
  const std::string variant = arg("variant").empty() ? "*" : arg("variant");
  if (job.command == "check") {
    argv.insert(argv.end(), {"--only", "elementwise/" + variant});
  } else if (job.command == "run") {
    argv.insert(argv.end(), {"--only",
                             "network/" + variant + "/" + arg("model") + "/" + arg("images"),
                             "--as-run"});
  } else {
    if (!settings.db.empty()) argv.insert(argv.end(), {"--db", settings.db.string()});
    for (const fs::path& m : settings.models) argv.insert(argv.end(), {"--models", m.string()});
  }
  if (!settings.data.empty()) argv.insert(argv.end(), {"--data", settings.data.string()});
  if (!settings.cache.empty()) argv.insert(argv.end(), {"--cache", settings.cache.string()});
  if (settings.allow_degraded) argv.emplace_back("--allow-degraded");
  return argv;
}

}  // namespace convlab::service
