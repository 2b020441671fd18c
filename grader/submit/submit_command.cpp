// `convlab submit`: sends the team's student/ files to the course's submission service
// (`convlab serve`) and follows the job there: login, check, run, grade, status, output.
#include <httplib.h>
#include <pthread.h>
#include <signal.h>
#include <sys/stat.h>

#include <CLI/CLI.hpp>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <functional>
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

// The server is too busy for what was asked (503): another way may still work.
class Busy : public Error {
 public:
  using Error::Error;
};

struct Config {
  std::string server, token;
};

// Ctrl-C (SIGINT) or SIGTERM while a job is followed: a thread waits for them (they are blocked
// in every thread meanwhile), marks the interrupt and runs `on_signal`, which cuts the
// connection so that the follow returns at once. A second one ends the process.
class Interrupt {
 public:
  explicit Interrupt(std::function<void()> on_signal) : on_signal_(std::move(on_signal)) {
    sigemptyset(&set_);
    sigaddset(&set_, SIGINT);
    sigaddset(&set_, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &set_, &old_);
    watcher_ = std::thread([this] {
      int sig = 0;
      sigwait(&set_, &sig);
      if (done_) return;
      fired_ = true;
      on_signal_();
      sigwait(&set_, &sig);
      if (done_) return;
      std::_Exit(128 + sig);
    });
  }
  ~Interrupt() {
    done_ = true;
    pthread_kill(watcher_.native_handle(), SIGINT);  // wakes the watcher's sigwait
    watcher_.join();
    pthread_sigmask(SIG_SETMASK, &old_, nullptr);
  }
  Interrupt(const Interrupt&) = delete;
  Interrupt& operator=(const Interrupt&) = delete;

  bool fired() const { return fired_; }

 private:
  std::function<void()> on_signal_;
  sigset_t set_{}, old_{};
  std::atomic<bool> fired_{false}, done_{false};
  std::thread watcher_;
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
    if (res->status >= 400) refused(res->status, res->body);
    return res;
  }

  // GETs `path` and hands the body of a 200 reply to `receive` as it arrives; `receive`
  // returns false to stop. An HTTP error is an Error with the server's message (Busy for
  // 503). Returns false when the connection failed or broke before the reply's end.
  bool stream(const std::string& path,
              const std::function<bool(const char*, std::size_t)>& receive) {
    const httplib::Headers headers{{"Authorization", "Bearer " + config_.token}};
    int status = 0;
    std::string error_body;
    const httplib::Result res = http_.Get(
        path, headers,
        [&](const httplib::Response& r) {
          status = r.status;
          return true;
        },
        [&](const char* data, std::size_t n) {
          if (status != 200) {
            error_body.append(data, n);
            return true;
          }
          return receive(data, n);
        });
    if (status >= 400) refused(status, error_body);
    return static_cast<bool>(res);
  }

  [[noreturn]] static void refused(int status, const std::string& body) {
    const json j = json::parse(body, nullptr, false);
    const std::string message = j.is_object() && j.contains("error") && j["error"].is_string()
                                    ? j["error"].get<std::string>()
                                    : body;
    const std::string text = "the server refused (HTTP " + std::to_string(status) + "): " + message;
    if (status == 503) throw Busy(text);
    throw Error(text);
  }

  const std::string& server() const { return config_.server; }
  /// Cuts the connection in use (from another thread): the call in progress returns.
  void stop() { http_.stop(); }

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
  // A variant's own folder (student/final/best/): every regular file in it; the server checks them.
  for (const std::string& folder : ms.team_folders) {
    std::error_code ec;
    for (fs::recursive_directory_iterator it(root / folder, ec), end; !ec && it != end;
         it.increment(ec)) {
      if (!fs::is_regular_file(it->symlink_status())) continue;
      const std::string rel = it->path().lexically_relative(root).generic_string();
      files[rel] = read_file(it->path(), "your file");
    }
  }
  if (files.empty()) {
    throw Error("none of the files of milestone " + milestone + " is in " + root.string() +
                "/student: run this in your checkout");
  }
  return files;
}

// Prints a job's output from byte `from` on, asking for it again and again; returns its exit
// status, or nullopt when `interrupt` fired first. For a server that streams no more (too many
// streams open).
std::optional<int> follow_by_polling(Api& api, std::int64_t id, std::int64_t from,
                                     const Interrupt& interrupt) {
  const std::string base = "/api/v1/jobs/" + std::to_string(id);
  std::string last_position;
  // A server that restarts queues the job again: keep following it for a while.
  constexpr int kPatience = 60;
  int unreachable = 0;
  for (;;) {
    if (interrupt.fired()) return std::nullopt;
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

// The exit status of a job that ended as the stream's last event says.
int end_status(std::int64_t id, const json& end) {
  if (end.value("state", "") == "failed") {
    std::cerr << "convlab submit: job " << id << " failed: " << end.value("error", "") << "\n";
    return 1;
  }
  const int code = end["exit_code"].is_number_integer() ? end["exit_code"].get<int>() : 1;
  return code < 0 || code > 255 ? 1 : code;
}

// Prints a job's output as the server streams it, each piece as it arrives; returns the job's
// exit status, or nullopt when `interrupt` fired first. A stream that breaks off (the server
// restarts, the network drops) is taken up again where it stopped.
std::optional<int> follow(Api& api, std::int64_t id, const Interrupt& interrupt) {
  const std::string base = "/api/v1/jobs/" + std::to_string(id);
  std::int64_t from = 0;
  int last_position = -1;
  // A server that restarts queues the job again: keep following it for a while.
  constexpr int kPatience = 60;
  int unreachable = 0;
  for (;;) {
    std::optional<json> end;
    std::string pending, bad;
    bool got_event = false;
    const auto event = [&](const std::string& line) {
      const json e = json::parse(line, nullptr, false);
      if (!e.is_object()) {
        bad = line;
        return false;
      }
      got_event = true;
      if (e.contains("output") && e["output"].is_string()) {
        std::cout << e["output"].get<std::string>() << std::flush;
        from = e.value("next", from);
      } else if (e.value("end", false)) {
        end = e;
      } else if (e.value("state", "") == "queued") {
        const int position = e.value("position", 0);
        if (position != last_position) {
          std::cerr << "waiting in the queue: position " << position << "\n";
          last_position = position;
        }
      }
      return true;
    };
    bool connected = false;
    try {
      connected = api.stream(
          base + "/stream?from=" + std::to_string(from), [&](const char* data, std::size_t n) {
            if (interrupt.fired()) return false;
            pending.append(data, n);
            for (std::size_t nl; (nl = pending.find('\n')) != std::string::npos;) {
              if (!event(pending.substr(0, nl))) return false;
              pending.erase(0, nl + 1);
            }
            return true;
          });
    } catch (const Busy& e) {
      std::cerr << "convlab submit: " << e.what() << "\nconvlab submit: asking for the output "
                << "every 0.4 s instead\n";
      return follow_by_polling(api, id, from, interrupt);
    }
    if (interrupt.fired()) return std::nullopt;
    if (!bad.empty()) {
      throw Error("the server sent a stream this convlab does not read (" + bad.substr(0, 80) +
                  "): update convlab");
    }
    if (end) return end_status(id, *end);
    // The stream broke off before the job's end: take it up again where it stopped.
    if (connected && got_event) continue;
    if (got_event) unreachable = 0;
    if (++unreachable > kPatience) {
      throw Unreachable("lost the server " + api.server() + " for " + std::to_string(kPatience) +
                        " s; the job goes on there: follow it later with `convlab submit "
                        "output " +
                        std::to_string(id) + "`");
    }
    if (unreachable == 1) {
      std::cerr << "convlab submit: lost the server; trying again for " << kPatience
                << " s (the job goes on there)\n";
    }
    for (int i = 0; i < 10 && !interrupt.fired(); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  }
}

// Asks the server to cancel job `id`; says what became of it. Returns false when the server
// refused or could not be reached.
bool cancel_job(const Config& config, std::int64_t id) {
  try {
    Api api(config);
    const auto res = api.call("POST", "/api/v1/jobs/" + std::to_string(id) + "/cancel");
    const json j = json::parse(res->body, nullptr, false);
    const bool running = j.is_object() && j.value("cancel", "") == "cancelling";
    std::cerr << "convlab submit: job " << id
              << (running ? " is being stopped on the server" : " cancelled before it started")
              << "\n";
    return true;
  } catch (const Error& e) {
    std::cerr << "convlab submit: could not cancel job " << id << ": " << e.what() << "\n";
    return false;
  }
}

// Follows job `id`; Ctrl-C either cancels it on the server (`cancel_on_interrupt`: the job
// this command submitted) or only stops following it.
int follow_or_cancel(Api& api, const Config& config, std::int64_t id, bool cancel_on_interrupt) {
  std::optional<int> code;
  {
    Interrupt interrupt([&api] { api.stop(); });
    code = follow(api, id, interrupt);
  }
  if (code) return *code;
  std::cerr << "\n";
  if (cancel_on_interrupt) {
    if (!cancel_job(config, id)) {
      std::cerr << "convlab submit: the job may go on; stop it with `convlab submit cancel " << id
                << "`\n";
    }
  } else {
    std::cerr << "convlab submit: stopped following job " << id
              << "; it goes on (`convlab submit cancel " << id << "` stops it)\n";
  }
  return 130;
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
            << " jobs queued or running at once";
  if (job.value("limit_per_hour", 0) > 0) {
    std::cerr << ", and submit " << job["limit_per_hour"]
              << " an hour: " << job.value("jobs_last_hour", 0) << " so far";
  }
  std::cerr << ")\n";
  if (job.contains("deadline") && job["deadline"].is_string()) {
    std::cerr << "your last grade of " << a.milestone << " submitted before "
              << job["deadline"].get<std::string>()
              << (job.value("extended", false) ? " (your extension)" : "")
              << " is the one that counts\n";
  }
  if (a.no_wait) {
    std::cout << id << "\n";
    return 0;
  }
  return follow_or_cancel(api, config, id, true);
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
    if (job.value("counts", false)) std::cout << " (the grade that counts)";
    std::cout << "  " << job.value("submitted_at", "") << "\n";
  }
  const json d = api.get_json("/api/v1/deadlines");
  for (const json& row : d.value("deadlines", json::array())) {
    std::cout << "milestone " << row.value("milestone", "?") << ": ";
    if (row["deadline"].is_string()) {
      std::cout << "grades close " << row["deadline"].get<std::string>()
                << (row.value("extended", false) ? " (extended for your team)" : "")
                << (row.value("passed", false) ? ", passed" : "");
    } else {
      std::cout << "no deadline";
    }
    if (row["counted_job"].is_number_integer()) {
      std::cout << "; the grade that counts: job " << row["counted_job"].get<std::int64_t>();
    }
    std::cout << "\n";
  }
  return 0;
}

// A link that opens the team's pages (`job` > 0: that job's) in a browser; the token stays out
// of the URL.
int history(std::int64_t job) {
  const Config config = load_config();
  Api api(config);
  const auto res = api.call("POST", "/api/v1/page-link");
  const json j = json::parse(res->body, nullptr, false);
  if (!j.is_object() || !j.contains("url") || !j["url"].is_string()) {
    throw Error("the server sent no link: is it a convlab submission service?");
  }
  std::cout << "Your team's jobs, reports and deadlines, in your browser (the link works once, "
               "within "
            << j.value("expires_in_s", 0) / 60 << " minutes):\n  " << config.server
            << j["url"].get<std::string>() << (job > 0 ? "?job=" + std::to_string(job) : "")
            << "\n";
  return 0;
}

int ranking(const std::string& milestone) {
  const Config config = load_config();
  Api api(config);
  std::cout << api.call("GET", "/leaderboard/" + milestone + "?format=text")->body
            << "The page: " << config.server << "/leaderboard/" << milestone << "\n";
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

  CLI::App* history_cmd = cmd->add_subcommand(
      "history", "A link that opens your team's jobs, reports and deadlines in a browser");
  history_cmd->add_option("id", a->job, "open this job's page (default: the list of jobs)");
  history_cmd->callback([a, &exit_code] { exit_code = history(a->job); });

  CLI::App* ranking_cmd =
      cmd->add_subcommand("ranking", "The class's leaderboard (anonymised) for a milestone");
  ranking_cmd->add_option("milestone", a->milestone, "m2, m3 or final (default: final)")
      ->check(CLI::IsMember(graded_milestone_ids()));
  ranking_cmd->callback(
      [a, &exit_code] { exit_code = ranking(a->milestone.empty() ? "final" : a->milestone); });

  CLI::App* output_cmd = cmd->add_subcommand("output", "Follow a job's output to its end");
  output_cmd->add_option("id", a->job, "the job's number")->required();
  output_cmd->callback([a, &exit_code] {
    const Config config = load_config();
    Api api(config);
    exit_code = follow_or_cancel(api, config, a->job, false);
  });

  CLI::App* cancel_cmd = cmd->add_subcommand("cancel", "Stop a job of your team's");
  cancel_cmd->add_option("id", a->job, "the job's number")->required();
  cancel_cmd->callback([a, &exit_code] { exit_code = cancel_job(load_config(), a->job) ? 0 : 1; });
}

}  // namespace convlab::submit
