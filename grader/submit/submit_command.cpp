// `convlab submit`: sends the team's student/ files to the course's submission service
// (`convlab serve`) and follows the job there: login, check, run, grade, status, output.
#include <httplib.h>
#include <sys/stat.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <thread>

#include "reference/core/error.hpp"
#include "reference/core/files.hpp"
#include "reference/milestones/milestone.hpp"

namespace convlab::submit {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

struct SubmitArgs {
  std::string server, token, dir, milestone, variant, model;
  std::int64_t images = 0;
  std::int64_t job = 0;
  bool no_wait = false;
};

// The server could not be reached (as opposed to an answer that refuses).
class Unreachable : public Error {
 public:
  using Error::Error;
};

struct Config {
  std::string server, token;
};

fs::path config_file() {
  if (const char* xdg = std::getenv("XDG_CONFIG_HOME"); xdg != nullptr && *xdg != '\0') {
    return fs::path(xdg) / "convlab" / "submit.json";
  }
  const char* home = std::getenv("HOME");
  if (home == nullptr || *home == '\0') {
    throw Error("neither HOME nor XDG_CONFIG_HOME is set: cannot tell where to keep the login");
  }
  return fs::path(home) / ".config" / "convlab" / "submit.json";
}

Config load_config() {
  const fs::path file = config_file();
  const auto text = try_read_file(file);
  if (!text) {
    throw Error("not logged in: run `convlab submit login --server URL --token TOKEN` with the "
                "address and token your course staff gave you");
  }
  const json j = json::parse(*text, nullptr, false);
  if (!j.is_object() || !j.contains("server") || !j.contains("token") ||
      !j["server"].is_string() || !j["token"].is_string()) {
    throw Error(file.string() + " is damaged: run `convlab submit login` again");
  }
  return {j["server"].get<std::string>(), j["token"].get<std::string>()};
}

// A connection to the service, with the team's token on every call.
class Api {
 public:
  explicit Api(const Config& config) : config_(config), http_(config.server) {
    if (!http_.is_valid()) {
      throw Error("cannot use the server address '" + config.server +
                  "': give it as https://host[:port] (or http:// on a trusted network)");
    }
    // One connection for the whole follow: through a TLS proxy, each new one is a handshake.
    http_.set_keep_alive(true);
    http_.set_connection_timeout(10);
    http_.set_read_timeout(60);
    http_.set_write_timeout(60);
  }

  // The reply of a call; an unreachable server or an HTTP error is an Error with the server's
  // message.
  httplib::Result call(const std::string& method, const std::string& path,
                       const std::string& body = "") {
    const httplib::Headers headers{{"Authorization", "Bearer " + config_.token}};
    httplib::Result res = method == "POST"
                              ? http_.Post(path, headers, body, "application/json")
                              : http_.Get(path, headers);
    if (!res) {
      throw Unreachable("cannot reach the server " + config_.server + ": " +
                  httplib::to_string(res.error()) +
                  "; check the address (convlab submit login) and your network");
    }
    if (res->status >= 400) {
      const json j = json::parse(res->body, nullptr, false);
      const std::string message = j.is_object() && j.contains("error") && j["error"].is_string()
                                      ? j["error"].get<std::string>()
                                      : res->body;
      throw Error("the server refused (HTTP " + std::to_string(res->status) + "): " + message);
    }
    return res;
  }

  json get_json(const std::string& path) {
    const auto res = call("GET", path);
    const json j = json::parse(res->body, nullptr, false);
    if (j.is_discarded()) throw Error("the server sent something that is not JSON: " + res->body);
    return j;
  }

 private:
  Config config_;
  httplib::Client http_;
};

int login(const SubmitArgs& a) {
  if (!a.server.starts_with("http://") && !a.server.starts_with("https://")) {
    throw Error("--server " + a.server + ": give the address as https://host[:port]");
  }
  if (a.token.empty()) throw Error("--token is empty: give the token your course staff sent");
  Config config{a.server, a.token};
  while (config.server.ends_with("/")) config.server.pop_back();
  Api api(config);
  const json me = api.get_json("/api/v1/jobs");
  const fs::path file = config_file();
  fs::create_directories(file.parent_path());
  {
    const mode_t old = umask(077);
    std::ofstream out(file, std::ios::trunc);
    umask(old);
    out << json{{"server", config.server}, {"token", config.token}}.dump(2) << "\n";
    if (!out) throw Error("cannot write " + file.string());
  }
  fs::permissions(file, fs::perms::owner_read | fs::perms::owner_write);
  std::cout << "logged in to " << config.server << " as team " << me.value("team", "?")
            << " (saved in " << file.string() << ")\n";
  if (config.server.starts_with("http://") && config.server.find("://127.") == std::string::npos &&
      config.server.find("://localhost") == std::string::npos) {
    std::cerr << "warning: http:// sends your token unencrypted; use the https:// address if "
                 "your course has one\n";
  }
  return 0;
}

// The checkout: --dir, else the nearest folder upwards that holds student/.
fs::path checkout(const std::string& dir) {
  if (!dir.empty()) {
    if (!fs::is_directory(fs::path(dir) / "student")) {
      throw Error("--dir " + dir + " has no student/ folder: give your checkout's top folder");
    }
    return dir;
  }
  for (fs::path p = fs::current_path(); !p.empty(); p = p.parent_path()) {
    if (fs::is_directory(p / "student")) return p;
    if (p == p.root_path()) break;
  }
  throw Error("no student/ folder here or above: run this inside your checkout, or give --dir");
}

json collect_files(const fs::path& root, const std::string& milestone) {
  const Milestone ms = load_milestone(convlab_root(), milestone);
  if (!ms.graded()) throw Error("milestone " + milestone + " has no code of yours to send");
  json files = json::object();
  for (const std::string& rel : ms.team_writes) {
    const fs::path file = root / rel;
    if (!fs::exists(file)) continue;
    if (!fs::is_regular_file(fs::symlink_status(file))) {
      throw Error(file.string() + " is not a regular file: keep your source there itself");
    }
    files[rel] = read_file(file, "your file");
  }
  if (files.empty()) {
    throw Error("none of the files of milestone " + milestone + " is in " + root.string() +
                "/student: run this in your checkout");
  }
  return files;
}

// Prints a job's output as it grows; returns its exit status.
int follow(Api& api, std::int64_t id) {
  const std::string base = "/api/v1/jobs/" + std::to_string(id);
  std::int64_t from = 0;
  std::string last_position;
  // A server that restarts queues the job again: keep following it for a while.
  constexpr int kPatience = 60;
  int unreachable = 0;
  for (;;) {
    std::optional<httplib::Result> reply;
    try {
      reply.emplace(api.call("GET", base + "/output?from=" + std::to_string(from)));
      unreachable = 0;
    } catch (const Unreachable&) {
      if (++unreachable > kPatience) throw;
      if (unreachable == 1) {
        std::cerr << "convlab submit: lost the server; trying again for " << kPatience
                  << " s (the job goes on there)\n";
      }
      std::this_thread::sleep_for(std::chrono::seconds(1));
      continue;
    }
    const httplib::Result& res = *reply;
    std::cout << res->body << std::flush;
    const std::string next = res->get_header_value("X-Convlab-Next");
    if (next.empty() || next.find_first_not_of("0123456789") != std::string::npos) {
      throw Error("the server is not a convlab submission service (no output offset)");
    }
    from = std::stoll(next);
    const std::string state = res->get_header_value("X-Convlab-State");
    if (state == "done" || state == "failed") {
      if (!res->body.empty()) continue;  // more may follow what this call returned
      const json job = api.get_json(base);
      if (state == "failed") {
        std::cerr << "convlab submit: job " << id << " failed: " << job.value("error", "")
                  << "\n";
        return 1;
      }
      const int code = job["exit_code"].is_number_integer() ? job["exit_code"].get<int>() : 1;
      return code < 0 || code > 255 ? 1 : code;
    }
    if (state == "queued") {
      const std::string position = res->get_header_value("X-Convlab-Position");
      if (position != last_position) {
        std::cerr << "waiting in the queue: position " << position << "\n";
        last_position = position;
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(state == "queued" ? 1000 : 400));
  }
}

int submit_job(const SubmitArgs& a, const std::string& command) {
  Config config = load_config();
  const fs::path root = checkout(a.dir);
  json body = {{"command", command},
               {"milestone", a.milestone},
               {"files", collect_files(root, a.milestone)}};
  if (!a.variant.empty()) body["variant"] = a.variant;
  if (!a.model.empty()) body["model"] = a.model;
  if (a.images != 0) body["images"] = a.images;
  std::string text;
  try {
    text = body.dump();
  } catch (const json::type_error&) {
    throw Error("a file of yours is not UTF-8 text: send source files only");
  }
  Api api(config);
  const auto res = api.call("POST", "/api/v1/jobs", text);
  const json job = json::parse(res->body, nullptr, false);
  const std::int64_t id = job.value("id", std::int64_t{0});
  std::cerr << "job " << id << ": " << command << " " << a.milestone;
  if (job.value("state", "") == "queued") {
    std::cerr << " queued, position " << job.value("position", 0);
  } else {
    std::cerr << " started";
  }
  std::cerr << " (your team may have " << job.value("limit_in_flight", 0)
            << " jobs queued or running at once)\n";
  if (a.no_wait) {
    std::cout << id << "\n";
    return 0;
  }
  return follow(api, id);
}

int status() {
  Api api(load_config());
  const json j = api.get_json("/api/v1/jobs");
  std::cout << "team " << j.value("team", "?") << ": " << j["jobs"].size() << " job(s)\n";
  for (const json& job : j["jobs"]) {
    std::cout << "  " << job.value("id", 0) << "  " << job.value("command", "") << " "
              << job.value("milestone", "") << "  " << job.value("state", "");
    if (job.contains("position")) std::cout << " (position " << job["position"] << ")";
    if (job["exit_code"].is_number_integer()) std::cout << ", exit " << job["exit_code"];
    if (!job.value("error", "").empty()) std::cout << ", " << job["error"].get<std::string>();
    std::cout << "  " << job.value("submitted_at", "") << "\n";
  }
  return 0;
}

}  // namespace

void add_submit_command(CLI::App& app, int& exit_code) {
  auto a = std::make_shared<SubmitArgs>();
  CLI::App* cmd = app.add_subcommand(
      "submit",
      "Run your code on the course's machines (GPUs included): send your student/ files to "
      "the course's submission service, which checks, runs or grades them, and follow the "
      "output here (docs/student.md)");
  cmd->require_subcommand(1);

  CLI::App* login_cmd = cmd->add_subcommand("login", "Save the server address and your token");
  login_cmd->add_option("--server", a->server, "the address your course staff gave you")
      ->required();
  login_cmd->add_option("--token", a->token, "your team's token")->required();
  login_cmd->callback([a, &exit_code] { exit_code = login(*a); });

  const auto job_command = [&](const std::string& name, const std::string& help) {
    CLI::App* c = cmd->add_subcommand(name, help);
    c->add_option("milestone", a->milestone, "m2, m3 or final")->required();
    c->add_option("--dir", a->dir, "your checkout (default: here or above)");
    c->add_flag("--no-wait", a->no_wait, "print the job's id and return (follow it with "
                                         "`convlab submit output ID`)");
    c->callback([a, name, &exit_code] { exit_code = submit_job(*a, name); });
    return c;
  };
  CLI::App* check = job_command("check", "Compare your convolution with the reference, output "
                                         "by output (the grader's element-wise check)");
  check->add_option("--variant", a->variant, "final: which variant (default: all of them)");
  CLI::App* run = job_command("run", "Run your convolution in the network on one of the "
                                     "milestone's model and image counts (a graded check)");
  run->add_option("model", a->model, "model (default: the milestone's)");
  run->add_option("N", a->images, "test images (default: the milestone's)");
  run->add_option("--variant", a->variant, "final: which variant (default: all of them)");
  job_command("grade", "Grade your code for the record: every check of the milestone");

  CLI::App* status_cmd = cmd->add_subcommand("status", "Your team's jobs, newest first");
  status_cmd->callback([&exit_code] { exit_code = status(); });

  CLI::App* output_cmd = cmd->add_subcommand("output", "Follow a job's output to its end");
  output_cmd->add_option("id", a->job, "the job's number")->required();
  output_cmd->callback([a, &exit_code] {
    Api api(load_config());
    exit_code = follow(api, a->job);
  });
}

}  // namespace convlab::submit
