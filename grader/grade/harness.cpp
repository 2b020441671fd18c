// The harness: how one check's two processes run (the team's in the sandbox, the trusted
// referee beside it, one socket between them) and how their ends map to one verdict.
#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <exception>
#include <fstream>
#include <thread>

#include "grader/grade/grading.hpp"
#include "grader/worker/protocol.hpp"
#include "reference/core/error.hpp"
#include "reference/core/format.hpp"
#include "reference/model/model.hpp"

namespace convlab::grader {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr std::size_t kStderrTailLines = 20;
constexpr std::size_t kSanitizerTailLines = 40;

// compute-sanitizer's first report (the faulty kernel, access and thread) and its summary: the
// later reports are mostly consequences (the teardown's calls failing after the error).
std::string first_sanitizer_report(const std::string& text, std::size_t max_lines) {
  std::vector<std::string> lines;
  std::string summary;
  std::size_t pos = 0;
  bool started = false;
  while (pos < text.size()) {
    std::size_t nl = text.find('\n', pos);
    if (nl == std::string::npos) nl = text.size();
    const std::string line = text.substr(pos, nl - pos);
    pos = nl + 1;
    if (line.find("ERROR SUMMARY") != std::string::npos) summary = line;
    if (!started && line.rfind("========= ", 0) == 0 &&
        line.find("COMPUTE-SANITIZER") == std::string::npos) {
      started = true;
    }
    if (started && lines.size() < max_lines) lines.push_back(line);
  }
  std::string out;
  for (const std::string& l : lines) out += l + "\n";
  if (!summary.empty()) out += (lines.empty() ? "" : "  ...\n") + summary + "\n";
  return out;
}

std::string tail_lines(const std::string& text, std::size_t lines) {
  std::size_t end = text.size();
  while (end > 0 && (text[end - 1] == '\n' || text[end - 1] == '\r')) --end;
  std::size_t pos = end;
  for (std::size_t n = 0; n < lines && pos > 0; ++n) {
    const std::size_t nl = text.rfind('\n', pos - 1);
    pos = nl == std::string::npos ? 0 : nl;
    if (nl == std::string::npos) break;
  }
  const std::size_t start = pos == 0 ? 0 : pos + 1;
  return text.substr(start, end - start);
}

std::string indent(const std::string& text) {
  std::string out = "  ";
  for (char ch : text) {
    out += ch;
    if (ch == '\n') out += "  ";
  }
  return out;
}

std::string log_name(const std::string& id) {
  std::string s = id;
  for (char& ch : s) {
    if (ch == '/' || ch == ' ' || ch == '*') ch = '_';
  }
  return s;
}

// The noise of the timed passes comes from the grade's seed, apart from the element-wise
// inputs' streams.
constexpr std::uint64_t kNoiseSeedSalt = 0x6e6f697365ull;  // "noise"

}  // namespace

void apply_failure(const Failure& f, CheckResult& c) {
  c.status = f.status;
  c.reason = f.reason;
  c.output = f.output;
}

const json& field(const json& doc, const char* key) {
  static const json null;
  const auto it = doc.find(key);
  return it == doc.end() ? null : *it;
}

std::string fmt(const char* format, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, format, v);
  return buf;
}

std::string points_text(double v) {
  return fmt("%g", v);
}

std::string accuracy(std::int64_t correct, std::int64_t n) {
  return format_accuracy(static_cast<double>(correct) / static_cast<double>(n));
}

std::optional<Failure> judge_verification(const json& doc, const PlannedCheck& p) {
  const json v = doc.value("verification", json());
  if (!v.is_object() || v.value("calls", 0) < 1) {
    return Failure{"no_result", "The timed runs returned no checked call."};
  }
  if (v.value("failed", 0) == 0) return std::nullopt;
  const json f = v.value("first_failure", json::object());
  std::string text =
      "A timed call computed a wrong output: " + std::to_string(v.value("failed", 0)) + " of " +
      std::to_string(v.value("calls", 0)) + " timed calls differ from the library convolution " +
      "on the same input";
  if (f.is_object()) {
    text += " (first: " + std::to_string(f.value("mismatches", 0)) + " wrong outputs, e.g. " +
            f.value("at", std::string("?")) + " = " + f.value("got", json()).dump() +
            ", expected " + f.value("want", json()).dump() + ")";
  }
  text +=
      ". Each timed run gets new inputs (the test images under fresh noise), and every call "
      "must compute the convolution of its own input, write every output and be finished when "
      "it returns: no results kept from an earlier call, no work left running.";
  if (p.check.hidden) text = "A timed call computed a wrong output.";
  return Failure{"mismatch", text};
}

fs::path Grading::images_file(std::int64_t n) {
  const std::lock_guard lock(shared_mutex_);
  if (auto it = image_files_.find(n); it != image_files_.end()) return it->second;
  if (n < 1 || n > test_.count) {
    throw Error("a check asks for " + std::to_string(n) + " images; the test set has " +
                std::to_string(test_.count));
  }
  const fs::path f = work_ / ("images-" + std::to_string(n) + ".idx.gz");
  test_.write_images(f, n);
  image_files_[n] = f;
  return f;
}

std::int64_t Grading::model_classes(const fs::path& file) {
  const std::lock_guard lock(shared_mutex_);
  if (auto it = classes_.find(file.string()); it != classes_.end()) return it->second;
  const std::int64_t n = load_model(file).classes();
  classes_[file.string()] = n;
  return n;
}

namespace {

// Runs the two processes at once: the team's on a thread of its own, the referee here. Once
// every process of the team's run has ended, one byte on `team_gone` tells the referee.
void run_both(const SandboxSpec& team, const SandboxSpec& referee, int team_gone,
              WorkerOutcome& w) {
  std::exception_ptr team_error;
  std::thread team_thread([&] {
    try {
      w.run = run_sandboxed(team);
    } catch (...) {
      team_error = std::current_exception();
    }
    const char byte = 'g';
    while (::write(team_gone, &byte, 1) < 0 && errno == EINTR) {
    }
  });
  try {
    w.referee = run_sandboxed(referee);
  } catch (...) {
    team_thread.join();
    throw;
  }
  team_thread.join();
  if (team_error) std::rethrow_exception(team_error);
}

// The referee's result document, or why there is none.
void read_document(WorkerOutcome& w) {
  if (w.referee.channel_truncated) {
    w.doc_problem = "its result passed the size limit";
  } else if (w.referee.channel.empty()) {
    w.doc_problem = "it wrote no result (" + w.referee.describe() + ")";
  } else {
    try {
      json doc = json::parse(w.referee.channel);
      if (!doc.is_object() || doc.value("schema", "") != kCheckSchema || !doc.contains("status") ||
          !doc["status"].is_string()) {
        w.doc_problem = "its result is not a convlab-check document";
      } else {
        w.doc = std::move(doc);
      }
    } catch (const json::exception&) {
      w.doc_problem = "its result is not valid JSON";
    }
  }
}

}  // namespace

// The team's process sees its program's linking closure (and, on the GPU, its one GPU's
// device nodes and the driver's libraries): no framework tree, grader, staff code, toolkit or
// other team to read or to load at run time.
const std::vector<fs::path>& Grading::team_view(const std::vector<std::string>& prefix) const {
  const std::string key = prefix.empty() ? "" : prefix.front();
  if (auto it = team_views_.find(key); it != team_views_.end()) return it->second;
  std::vector<fs::path> programs = {build_.worker};
  std::vector<fs::path> extra(kPlainDevices.begin(), kPlainDevices.end());
  if (!prefix.empty()) {
    // compute-sanitizer loads its own libraries from its folder.
    const fs::path tool = fs::canonical(prefix.front());
    programs.push_back(tool);
    extra.push_back(tool.parent_path());
  }
  std::vector<std::string> dlopened;
  if (cuda_build_) {
    dlopened = kCudaDriverLibraries;
    if (!gpu_) {
      const auto v = env_.find("CUDA_VISIBLE_DEVICES");
      gpu_ = assign_gpu(v == env_.end() ? "" : v->second);
    }
    extra.insert(extra.end(), gpu_->nodes.begin(), gpu_->nodes.end());
  }
  const auto ld = env_.find("LD_LIBRARY_PATH");
  std::vector<fs::path> view =
      linking_closure(programs, dlopened, ld == env_.end() ? "" : ld->second);
  view.insert(view.end(), extra.begin(), extra.end());
  // The loader's cache, which only names the libraries' paths, so that dlopen finds the
  // driver where the loader would.
  view.emplace_back("/etc/ld.so.cache");
  return team_views_[key] = std::move(view);
}

// The team's process: the team's code and its harness only, in the sandbox.
SandboxSpec Grading::team_spec(double wall_s, const std::vector<std::string>& prefix,
                               int fd) const {
  SandboxSpec team;
  team.argv = prefix;
  team.argv.push_back("./convlab-team");
  team.env = env_;
  team.inputs.emplace_back(build_.worker, "convlab-team");
  team.hide_paths = hide_;
  team.limits.wall_s = wall_s;
  // The team's code may use every core: the CPU-time and process (thread) limits scale.
  const double cores = std::max(1u, std::thread::hardware_concurrency());
  team.limits.cpu_s = std::max(600.0, wall_s * cores);
  team.limits.max_processes = std::max(256, static_cast<int>(4 * cores));
  team.keep_private_dir = opt_.keep_work;
  team.uses_gpu = cuda_build_;
  team.visible_paths = team_view(prefix);
  team.system_folders = false;
  if (cuda_build_) {
    team.env["CUDA_VISIBLE_DEVICES"] = gpu_->visible_devices;
    if (gpu_->visible_devices.empty()) team.env.erase("CUDA_VISIBLE_DEVICES");
  }
  team.pass_fd = fd;
  return team;
}

// The referee: trusted code from the framework build, outside the team's namespaces. It
// outlives the team's limit, so that it can report a team that was killed.
SandboxSpec Grading::referee_spec(const std::vector<std::string>& args, double wall_s,
                                  int fd) const {
  SandboxSpec referee;
  referee.argv = {build_.referee.string()};
  referee.argv.insert(referee.argv.end(), args.begin(), args.end());
  referee.env = env_;
  referee.use_namespaces = false;
  referee.drop_privileges = false;
  referee.limits.wall_s = wall_s + 60.0;
  referee.limits.cpu_s = 0;
  referee.limits.max_processes = 0;
  referee.limits.max_file_bytes = 0;
  referee.limits.max_memory_bytes = 0;  // trusted; it holds the whole test set's tensors
  referee.uses_gpu = cuda_build_;
  referee.pass_fd = fd;
  return referee;
}

void Grading::keep_logs(const std::string& log_id, const WorkerOutcome& w, bool with_team) const {
  if (opt_.keep_work && !w.run.private_dir.empty()) {
    say("  " + log_id + ": sandbox folder kept: " + w.run.private_dir.string());
  }
  if (with_team) {
    if (!w.run.stdout_text.empty()) {
      std::ofstream(logs_ / (log_name(log_id) + ".stdout.txt")) << w.run.stdout_text;
    }
    if (!w.run.stderr_text.empty()) {
      std::ofstream(logs_ / (log_name(log_id) + ".stderr.txt")) << w.run.stderr_text;
    }
  }
  if (!w.referee.stderr_text.empty()) {
    std::ofstream(logs_ / (log_name(log_id) + ".referee.txt")) << w.referee.stderr_text;
  }
}

WorkerOutcome Grading::run_worker(const std::string& log_id, const std::vector<std::string>& args,
                                  double wall_s, const std::vector<std::string>& prefix,
                                  bool with_team, bool hidden) {
  // One socket between the two: the referee gets one end, the team's process the other, and
  // each sees the other's end as the end of the socket.
  int ends[2] = {-1, -1};
  if (with_team && ::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, ends) != 0) {
    throw Error(std::string("cannot create the harness's socket: ") + std::strerror(errno));
  }
  SandboxSpec team;
  {
    const std::lock_guard lock(shared_mutex_);  // team_view's cache
    team = team_spec(wall_s, prefix, ends[1]);
  }
  SandboxSpec referee = referee_spec(args, wall_s, ends[0]);
  WorkerOutcome w;
  if (with_team) {
    int gone[2] = {-1, -1};
    if (::pipe2(gone, O_CLOEXEC) != 0) {
      throw Error(std::string("cannot create the referee's pipe: ") + std::strerror(errno));
    }
    referee.extra_fds.push_back(gone[0]);
    referee.env[kTeamGoneFdEnv] = std::to_string(kFirstExtraFd);
    try {
      run_both(team, referee, gone[1], w);
    } catch (...) {
      ::close(gone[0]);
      ::close(gone[1]);
      throw;
    }
    ::close(gone[0]);
    ::close(gone[1]);
  } else {
    w.referee = run_sandboxed(referee);
    w.run = w.referee;
  }
  {
    const std::lock_guard lock(shared_mutex_);
    last_run_ = w.run;
    last_limits_ = team.limits;
  }
  keep_logs(log_id, w, with_team && !hidden);
  read_document(w);
  return w;
}

// The referee is the grader's own code: when it fails, the check is the grader's problem.
std::optional<Failure> Grading::referee_failure(const WorkerOutcome& w) const {
  std::string why;
  if (!w.doc) {
    why = "the referee " + w.doc_problem;
  } else if (w.status() == "referee_error") {
    why = "the referee failed: " + w.message();
  } else {
    return std::nullopt;
  }
  return Failure{"grader_error",
                 "The grader could not complete this check (" + why +
                     "). This is not your code's fault: tell the course staff.",
                 CheckStatus::skipped};
}

std::string Grading::run_command(const PlannedCheck& p, std::int64_t images) const {
  const Milestone& ms = p.spec->milestone;
  const std::string model =
      p.check.hidden ? "two-conv" : (p.check.model.empty() ? ms.default_model : p.check.model);
  std::string cmd = "convlab run " + ms.id + " " + model + " " + std::to_string(images);
  if (p.gpu && p.check.variant != ms.default_variant) cmd += " --variant " + p.check.variant;
  return cmd;
}

std::string Grading::debug_advice(const PlannedCheck& p) const {
  const std::string cmd = run_command(p, 100);
  if (p.gpu) {
    return "Run it yourself: `" + cmd + "`, then under compute-sanitizer: `compute-sanitizer " +
           "--tool memcheck build/default/reference/driver/" + cmd +
           "`; it names the kernel and the faulty access (build with the debug preset to get "
           "source lines).";
  }
  return "Run it yourself: `" + cmd +
         "`, then with the asan preset (cmake --preset asan && cmake --build --preset asan; "
         "build/asan/reference/driver/" +
         cmd + "): AddressSanitizer names the line of the faulty access.";
}

namespace {

// A failure's text with the last lines of the run's output; hidden checks show no output of
// the run: the team's code could print the model with it.
struct WithTail {
  const SandboxResult& r;
  bool hidden = false;
  bool sanitizer = false;

  std::string operator()(std::string text, bool stdout_too) const {
    if (hidden) return text;
    const std::string err = tail_lines(r.stderr_text, kStderrTailLines);
    const std::string out =
        tail_lines(r.stdout_text, sanitizer ? kSanitizerTailLines : kStderrTailLines);
    if (!err.empty()) text += "\n\nLast lines of stderr:\n" + indent(err);
    if ((stdout_too || err.empty()) && !out.empty()) {
      text += "\n\nLast lines of stdout:\n" + indent(out);
    }
    return text;
  }
};

// The end of a run the sandbox stopped (timeout, output or memory limit, signal), if it did.
std::optional<Failure> stopped_run(const SandboxResult& r, const WithTail& with_tail,
                                   const std::string& cmd, const std::string& debug_advice) {
  switch (r.outcome) {
    case Outcome::start_failed:
      return Failure{"grader_error",
                     "The check could not start (" + r.start_error +
                         "). This is not your code's fault: tell the course staff."};
    case Outcome::timed_out:
      return Failure{"timeout",
                     with_tail("The run " + r.describe() + ". Run `" + cmd +
                                   "` yourself: if it takes long, look for a loop that never "
                                   "ends or a launch that does far more work than it needs.",
                               false)};
    case Outcome::output_limit:
      return Failure{"output_limit",
                     with_tail("The run " + r.describe() +
                                   ". Remove the printing from your convolution (a printf in a "
                                   "kernel runs once per thread).",
                               true)};
    case Outcome::memory_limit:
      return Failure{"memory_limit",
                     with_tail("The run " + r.describe() + ". Run `" + cmd +
                                   "` under /usr/bin/time -v and look at its maximum resident "
                                   "size: allocate only what the convolution needs.",
                               false)};
    case Outcome::signaled:
      return Failure{"crash",
                     with_tail("The run was " + r.describe() + ". " + debug_advice, false)};
    case Outcome::exited:
      break;
  }
  return std::nullopt;
}

// What the referee's document says of the team's code, if it says something went wrong.
std::optional<Failure> reported_failure(const WorkerOutcome& w, const WithTail& with_tail,
                                        const std::string& cmd, const std::string& debug_advice) {
  const SandboxResult& r = w.run;
  const std::string status = w.status();
  const std::string message = w.message();
  if (status == "not_implemented") return Failure{"not_implemented", message};
  if (status == "no_gpu") {
    return Failure{"no_gpu", "No usable GPU for this check: " + message, CheckStatus::skipped};
  }
  if (status == "cuda_error") {
    return Failure{"cuda_error",
                   with_tail("A CUDA call failed: " + message + "\n" + debug_advice, false)};
  }
  if (status == "error") {
    return Failure{"error", with_tail("Your code reported an error: " + message + "\nRun `" + cmd +
                                          "` to see it yourself.",
                                      false)};
  }
  if (status == "team_lost") {
    return Failure{"exit_code",
                   with_tail("Your code's process stopped serving the check before it was "
                             "over (" +
                                 message + "; it " + r.describe() +
                                 "). Do not call exit() or abort(), and do not touch file "
                                 "descriptors you did not open; run `" +
                                 cmd + "` to see what happens.",
                             false)};
  }
  if (status == "input_written") {
    return Failure{"input_written",
                   with_tail("Your code changed an input it was given: " + message +
                                 ". Write only y; copy x or k first if your kernel needs a "
                                 "scratch space.",
                             false)};
  }
  if (status == "gpu_memory") {
    return Failure{"gpu_memory",
                   with_tail("The GPU ran out of memory while your code was running, so the "
                             "check could not be completed (" +
                                 message +
                                 "). Your code shares the GPU with the grader: allocate only "
                                 "what the convolution needs and free it (cudaFree).",
                             false)};
  }
  if (status != "ok") {
    return Failure{"no_result", "The harness reported an unknown status '" + status + "'."};
  }
  if (r.exit_code != 0) {
    return Failure{"exit_code",
                   with_tail("The run " + r.describe() +
                                 " after reporting its result: something in your code ends the "
                                 "process (exit() in a destructor or at exit?).",
                             false)};
  }
  return std::nullopt;
}

}  // namespace

std::optional<Failure> Grading::failure_of(const WorkerOutcome& w, const PlannedCheck& p,
                                           bool sanitizer) const {
  const SandboxResult& r = w.run;
  const std::string cmd = run_command(p, p.check.images > 0 ? p.check.images : 100);
  const WithTail with_tail{r, p.check.hidden, sanitizer};
  if (auto f = stopped_run(r, with_tail, cmd, debug_advice(p))) return f;
  if (auto f = referee_failure(w)) return f;
  if (sanitizer && r.exit_code == 99) {
    std::string text =
        "compute-sanitizer memcheck found invalid memory accesses in the run. Its report names "
        "the kernel, the access and the thread; fix the bounds check in that kernel. " +
        debug_advice(p);
    const std::string report = first_sanitizer_report(r.stdout_text + r.stderr_text, 30);
    if (!p.check.hidden && !report.empty()) {
      text += "\n\nThe first error compute-sanitizer reported:\n" + indent(report);
    }
    return Failure{"memory_error", text};
  }
  if (w.doc) return reported_failure(w, with_tail, cmd, debug_advice(p));
  if (sanitizer && r.exit_code == 0) return std::nullopt;  // memcheck may not pass the channel on
  if (r.exit_code != 0) {
    return Failure{"exit_code",
                   with_tail("The run " + r.describe() +
                                 " before the harness could report a result. Do not call exit() "
                                 "or abort() in your code; run `" +
                                 cmd + "` to see what happens.",
                             false)};
  }
  return Failure{"no_result",
                 with_tail("The run exited without a usable result (" + w.doc_problem +
                               "). Your code must not write to file descriptor 3 or close it, and "
                               "must return normally.",
                           false)};
}

std::optional<Failure> Grading::gpu_unavailable(const PlannedCheck& p) {
  if (!p.gpu) return std::nullopt;
  if (!gpu_problem_) {
    say("probing the GPU");
    const WorkerOutcome w = run_worker("gpu-info", {"info"}, 60.0, {}, false);
    if (w.doc && w.status() == "ok" && w.doc->contains("gpu")) {
      const json& g = field(*w.doc, "gpu");
      result_.machine.gpu_name = g.value("name", "");
      result_.machine.gpu_driver = g.value("driver", "");
      result_.machine.cuda_driver = g.value("cuda_driver", "");
      gpu_problem_ = "";
      say("GPU: " + result_.machine.gpu_name);
    } else if (w.doc) {
      gpu_problem_ = w.message().empty() ? w.status() : w.message();
    } else {
      gpu_problem_ = "the GPU probe " + w.run.describe();
    }
#ifndef CONVLAB_HAVE_CUDA
    gpu_problem_ = "this grader was built without CUDA";
#endif
  }
  if (gpu_problem_->empty()) return std::nullopt;
  return Failure{"no_gpu",
                 "Not run: no usable GPU on the grading machine (" + *gpu_problem_ +
                     "). A GPU check never passes without a GPU; the course staff must grade "
                     "this milestone on a machine with an NVIDIA GPU.",
                 CheckStatus::skipped};
}

WorkerOutcome Grading::run_network(const PlannedCheck& p, const std::string& log_id,
                                   NetworkPasses passes) {
  std::vector<std::string> args = {"network",
                                   "--model",
                                   p.model_file.string(),
                                   "--images",
                                   images_file(p.check.images).string(),
                                   "--variant",
                                   p.check.variant};
  if (passes != NetworkPasses::count) {
    const int runs = opt_.runs.value_or(p.spec->timed_runs);
    args.insert(args.end(), {"--runs", std::to_string(runs), "--reference", "--noise-seed",
                             std::to_string(result_.seed ^ kNoiseSeedSalt)});
  }
  if (passes == NetworkPasses::timed) args.emplace_back("--timed-only");
  return run_worker(log_id, args, time_limit(p), {}, true, p.check.hidden);
}

}  // namespace convlab::grader
