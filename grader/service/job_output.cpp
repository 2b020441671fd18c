#include "grader/service/job_output.hpp"

#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>

namespace convlab::service {
namespace fs = std::filesystem;

namespace {

// The bytes `log` gained since `offset`.
std::string read_from(const fs::path& log, std::int64_t& offset) {
  std::ifstream in(log, std::ios::binary);
  if (!in) return "";
  in.seekg(offset);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  offset += static_cast<std::int64_t>(text.size());
  return text;
}

}  // namespace

OutputForwarder::OutputForwarder(JobStore& store, std::int64_t job, fs::path log,
                                 const fs::path& job_dir)
    : store_(store), job_(job), log_(std::move(log)), job_dir_(job_dir.string() + "/") {}

void OutputForwarder::forward(bool last) {
  pending_ += read_from(log_, read_);
  // Whole lines only, so that the folder's path is never split across chunks. A line longer
  // than 64 KiB goes out as it is rather than wait.
  const bool all = last || pending_.size() > (64u << 10);
  const std::size_t end = all ? pending_.size() : pending_.rfind('\n') + 1;
  if (end == 0) return;  // no whole line yet (rfind's npos + 1 wraps to 0 too)
  std::string text = pending_.substr(0, end);
  pending_.erase(0, end);
  for (std::size_t at; (at = text.find(job_dir_)) != std::string::npos;) {
    text.replace(at, job_dir_.size(), "job/");
  }
  if (capped_ || text.empty()) return;
  if (kept_ + static_cast<std::int64_t>(text.size()) > kMaxOutputBytes) {
    text.resize(static_cast<std::size_t>(kMaxOutputBytes - kept_));
    text += "\n[convlab serve] output capped at 8 MiB; the rest is not kept\n";
    capped_ = true;
  }
  kept_ += static_cast<std::int64_t>(text.size());
  store_.append_output(job_, text);
}

int job_exit_code(const JobInfo& job, int grade_exit, const std::optional<std::string>& report) {
  if (grade_exit != 0 || job.command == "grade" || !report) return grade_exit;
  const auto j = nlohmann::json::parse(*report, nullptr, false);
  if (!j.is_object() || !j.contains("checks") || !j["checks"].is_array()) return grade_exit;
  for (const auto& c : j["checks"]) {
    if (c.value("status", "") == "failed") return 1;
  }
  return 0;
}

}  // namespace convlab::service
