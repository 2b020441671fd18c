/// @file
/// @brief What a team may ask of the service: a job's JSON body checked against the milestone
/// data (commands, milestones, variants, models and image counts from an allow-list; files by
/// the grader's own rules), and the `convlab grade` command line that runs it.
#pragma once

#include <filesystem>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "grader/service/job_store.hpp"

namespace convlab::service {

/// The limits on one upload: the grader's per-file limit, and a count far above any
/// milestone's list of files.
constexpr std::size_t kMaxFiles = 64;
constexpr std::size_t kMaxFileBytes = 1u << 20;
/// The largest request body the server reads (JSON of every file, escaped).
constexpr std::size_t kMaxBodyBytes = 8u << 20;

/// A request the service refuses: an HTTP status and a message for the team.
class RequestError : public std::runtime_error {
 public:
  RequestError(int status, const std::string& message)
      : std::runtime_error(message), status_(status) {}
  int status() const { return status_; }

 private:
  int status_;
};

/// Parses and checks a job request of `team`: {"command": "check"|"run"|"grade",
/// "milestone": "m2", "variant": "...", "model": "...", "images": N, "files": {"student/...":
/// "text", ...}}. `root` is the framework tree (milestone data). Throws RequestError (400 for
/// a malformed body, 422 for a request the milestone does not allow).
JobSpec parse_job_request(const std::string& body, const std::string& team,
                          const std::filesystem::path& root);

/// Writes a job's files under `dir` (which must not exist yet).
void write_job_files(const std::map<std::string, std::string>& files,
                     const std::filesystem::path& dir);

/// What the grader's file rules say about files written in `dir` for `milestone`: one line per
/// refused file, or that no graded file is there. Empty when the upload is fine.
std::vector<std::string> upload_problems(const std::filesystem::path& dir,
                                         const std::string& milestone,
                                         const std::filesystem::path& root);

/// How the service runs every grade.
struct GradeSettings {
  /// Results database: `grade` jobs are recorded there; empty: the grade writes none (the
  /// service ingests its report).
  std::filesystem::path db;
  std::filesystem::path data;                ///< Fashion-MNIST folder (empty: the default)
  std::filesystem::path cache;               ///< framework cache (empty: the default)
  std::vector<std::filesystem::path> models;  ///< hidden models, for `grade` jobs
  bool allow_degraded = false;
};

/// The arguments after the program name of the `convlab grade` that runs `job`: the files in
/// `submission`, its report and logs into `out`. Check and run jobs are grades restricted to
/// the element-wise check or one network check (--only), recorded nowhere.
std::vector<std::string> grade_arguments(const JobInfo& job, const GradeSettings& settings,
                                         const std::filesystem::path& submission,
                                         const std::filesystem::path& out);

}  // namespace convlab::service
