#include "grader/class/slurm_commands.hpp"

#include <map>
#include <sstream>

#include "grader/class/child_process.hpp"
#include "reference/core/error.hpp"
#include "reference/core/text.hpp"

namespace convlab::grader {

namespace fs = std::filesystem;

namespace {

bool all_digits(const std::string& s) {
  return !s.empty() && s.find_first_not_of("0123456789") == std::string::npos;
}

// "12_3" -> job 12, task 3; "12" -> job 12, task -1; false for anything else (a step
// "12.batch", a pending range "12_[1-3]").
bool parse_job_id(const std::string& id, SlurmTaskState& t) {
  const auto underscore = id.find('_');
  t.job = id.substr(0, underscore);
  if (!all_digits(t.job)) return false;
  if (underscore == std::string::npos) {
    t.task = -1;
    return true;
  }
  const std::string task = id.substr(underscore + 1);
  if (!all_digits(task)) return false;
  t.task = std::stoi(task);
  return true;
}

std::string joined(const std::set<std::string>& ids) {
  std::string text;
  for (const std::string& j : ids) {
    if (!text.empty()) text += ',';
    text += j;
  }
  return text;
}

bool says_invalid_job(const std::string& output) {
  return output.find("Invalid job id") != std::string::npos;
}

}  // namespace

std::string slurm_task_id(const std::string& job, int task) {
  return task < 0 ? job : job + "_" + std::to_string(task);
}

std::string parse_sbatch_job(const std::string& output) {
  std::istringstream in(output);
  for (std::string line; std::getline(in, line);) {
    line = trim(line);
    const std::string id = line.substr(0, line.find(';'));
    if (all_digits(id)) return id;
  }
  return "";
}

std::vector<SlurmTaskState> parse_squeue(const std::string& output) {
  std::vector<SlurmTaskState> out;
  std::istringstream in(output);
  for (std::string line; std::getline(in, line);) {
    std::istringstream words(line);
    SlurmTaskState t;
    std::string task;
    if (!(words >> t.job >> task >> t.state) || !all_digits(t.job)) continue;
    if (all_digits(task)) {
      t.task = std::stoi(task);
    } else if (task != "N/A") {
      continue;
    }
    words >> t.node;  // empty while pending
    if (t.node == "(null)") t.node.clear();
    out.push_back(std::move(t));
  }
  return out;
}

std::vector<SlurmTaskState> parse_scontrol(const std::string& output) {
  std::vector<SlurmTaskState> out;
  std::istringstream in(output);
  for (std::string line; std::getline(in, line);) {
    std::map<std::string, std::string> kv;
    std::istringstream words(line);
    for (std::string w; words >> w;) {
      const auto eq = w.find('=');
      if (eq != std::string::npos) kv.emplace(w.substr(0, eq), w.substr(eq + 1));
    }
    SlurmTaskState t;
    if (kv.contains("ArrayJobId")) {
      // An array task; a range ("2-3%2") is tasks not yet started, not one task.
      if (!all_digits(kv["ArrayJobId"]) || !all_digits(kv["ArrayTaskId"])) continue;
      t.job = kv["ArrayJobId"];
      t.task = std::stoi(kv["ArrayTaskId"]);
    } else {
      if (!all_digits(kv["JobId"])) continue;
      t.job = kv["JobId"];
    }
    t.state = kv["JobState"];
    t.reason = kv["Reason"];
    t.exit_code = kv["ExitCode"];
    t.node = kv["NodeList"] == "(null)" ? "" : kv["NodeList"];
    out.push_back(std::move(t));
  }
  return out;
}

std::vector<SlurmTaskState> parse_sacct(const std::string& output) {
  std::vector<SlurmTaskState> out;
  std::istringstream in(output);
  for (std::string line; std::getline(in, line);) {
    std::vector<std::string> cells;
    std::istringstream fields(trim(line));
    for (std::string cell; std::getline(fields, cell, '|');) cells.push_back(cell);
    SlurmTaskState t;
    if (cells.size() < 3 || !parse_job_id(cells[0], t)) continue;
    t.state = cells[1].substr(0, cells[1].find(' '));
    t.exit_code = cells[2];
    if (cells.size() > 3 && cells[3] != "None assigned") t.node = cells[3];
    out.push_back(std::move(t));
  }
  return out;
}

bool is_cluster_failure(const std::string& state) {
  static const std::set<std::string> lost{"NODE_FAIL", "PREEMPTED", "BOOT_FAIL",
                                          "CANCELLED", "DEADLINE",  "REVOKED"};
  return lost.contains(state);
}

bool is_between_states(const std::string& state) {
  static const std::set<std::string> between{
      "PENDING",  "RUNNING",   "CONFIGURING", "COMPLETING",   "SUSPENDED",  "REQUEUED",
      "RESIZING", "SIGNALING", "STAGE_OUT",   "REQUEUE_HOLD", "REQUEUE_FED"};
  return between.contains(state);
}

void require_slurm_commands(const std::string& leave_out) {
  for (const char* tool : {"sbatch", "squeue", "scontrol", "scancel"}) {
    if (!find_program(tool)) {
      throw Error(std::string(tool) +
                  " not found: Slurm's commands are needed here (run this on a login node of "
                  "the cluster); without Slurm, " +
                  leave_out);
    }
  }
}

void check_sbatch_path(const fs::path& p, const std::string& what) {
  if (p.string().find_first_of(" \t\n\r'\"") != std::string::npos) {
    throw Error(what + " " + p.string() +
                " holds a space or a quote, which a Slurm batch script cannot take; choose a "
                "path without them");
  }
}

std::string shell_quote(const std::string& s) {
  if (!s.empty() && s.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                        "0123456789-_./=:+,@") == std::string::npos) {
    return s;
  }
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

std::string sbatch(const fs::path& script, const std::vector<std::string>& options) {
  std::vector<std::string> argv{"sbatch", "--parsable"};
  argv.insert(argv.end(), options.begin(), options.end());
  argv.push_back(script.string());
  const CommandOutput r = run_captured(argv, kSlurmCommandTimeout);
  const std::string job = parse_sbatch_job(r.output);
  if (!r.ok() || job.empty()) {
    throw Error("sbatch did not take the job (" + r.exit.describe() + "): " + trim(r.output) +
                "\nThe script is " + script.string() + ": check the partition, account and gres");
  }
  return job;
}

QueueLook squeue(const std::set<std::string>& jobs) {
  QueueLook look;
  if (jobs.empty()) {
    look.ok = true;
    return look;
  }
  const CommandOutput sq = run_captured(
      {"squeue", "-h", "-r", "-j", joined(jobs), "-o", "%F %K %T %N"}, kSlurmCommandTimeout);
  // "Invalid job id": every job asked about has left the controller.
  look.ok = sq.ok() || says_invalid_job(sq.output);
  if (!look.ok) {
    look.error = trim(sq.output).empty() ? sq.exit.describe() : trim(sq.output);
    return look;
  }
  if (sq.ok()) look.queued = parse_squeue(sq.output);
  return look;
}

EndLook job_end(const std::string& job) {
  EndLook look;
  const CommandOutput sc =
      run_captured({"scontrol", "-o", "show", "job", job}, kSlurmCommandTimeout);
  if (sc.ok()) {
    look.ok = true;
    look.ended = parse_scontrol(sc.output);
    return look;
  }
  // Any other failure: ask again later rather than take a running job for a lost one.
  if (!says_invalid_job(sc.output)) return look;
  look.ok = true;
  // Purged from the controller: the accounting may still know it (an error where the cluster
  // keeps none, and the job is out of sight).
  if (!find_program("sacct")) return look;
  const CommandOutput sa =
      run_captured({"sacct", "-n", "-X", "-P", "-j", job, "-o", "JobID,State,ExitCode,NodeList"},
                   kSlurmCommandTimeout);
  if (sa.ok()) look.ended = parse_sacct(sa.output);
  return look;
}

bool scancel(const std::string& job) {
  return run_captured({"scancel", job}, kSlurmCommandTimeout).ok();
}

}  // namespace convlab::grader
