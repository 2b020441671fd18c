/// @file
/// @brief The service's HTTP API (cpp-httplib; TLS is a reverse proxy's job):
///   POST /api/v1/jobs               queue a job (job_request.hpp); 201 with its id and place
///   GET  /api/v1/jobs               the caller's jobs (a staff account: everyone's)
///   GET  /api/v1/jobs/ID            one job
///   GET  /api/v1/jobs/ID/output?from=N   its output from byte N (text; X-Convlab-Next,
///                                   X-Convlab-State, X-Convlab-Exit headers)
///   GET  /api/v1/jobs/ID/stream?from=N   the same, sent as it grows until the job ends: one
///                                   JSON event a line (state and queue place, output with
///                                   the offset to resume from, keepalives, the end)
///   GET  /api/v1/jobs/ID/report     its report.json
///   POST /api/v1/jobs/ID/cancel     cancels it: a queued job at once, a running one within a
///                                   second (409 when it has ended)
///   GET  /api/v1/deadlines          the caller's deadlines and the grade that counts on each
///   POST /api/v1/extensions         staff: {"team", "milestone", "until"} extends a deadline
///   POST /api/v1/page-link          a one-time link ("/login/KEY") that opens the team's pages
///   GET  /api/v1/health             "ok", without a token
/// Every other API call needs "Authorization: Bearer TOKEN". Errors are {"error": "..."}; a job
/// of another team is 404, as a job that does not exist. The pages (HTML, pages.hpp):
///   GET  /                          links to each milestone's leaderboard
///   GET  /leaderboard/M             the anonymised leaderboard, live (?format=text: as text)
///   GET  /login/KEY[?job=ID]        spends a page link: a session cookie, then /team (or
///                                   the job's page)
///   GET  /team                      the team's history: deadlines and jobs (session or token)
///   GET  /team/jobs/ID              one job of the team: its report and output
#pragma once

#include <chrono>
#include <filesystem>
#include <map>
#include <memory>
#include <string>

#include "grader/service/deadlines.hpp"
#include "grader/service/executor.hpp"
#include "grader/service/job_store.hpp"
#include "grader/service/roster.hpp"

namespace convlab::service {

/// How the API behaves.
struct ApiSettings {
  std::filesystem::path root;   ///< the framework tree (milestone data, file rules)
  std::filesystem::path db;     ///< the results database (the leaderboard pages read it)
  std::filesystem::path staging;  ///< where uploads are checked before they are queued
  bool gpu_jobs = false;        ///< some executor runs GPU jobs; else they are refused
  int max_in_flight = 2;        ///< queued + running jobs per team
  int max_per_hour = 30;        ///< jobs a team may submit per hour (0: no limit)
  int max_failed_logins = 10;   ///< per client address and minute; then 429
  /// A job's output stream silent this long sends a keepalive line, so that a proxy in front
  /// keeps it open (set it below the proxy's idle timeout).
  std::chrono::seconds keepalive{15};
  std::vector<Account> roster;
  /// milestone -> the instant after which its grade jobs are refused (staff extend it per
  /// team); a milestone without one takes grade jobs at any time.
  std::map<std::string, UnixTime> deadlines;
};

/// The HTTP server. Not copyable.
class Server {
 public:
  Server(JobStore& store, Executors& executors, ApiSettings settings);
  ~Server();
  /// Binds `host`:`port` (0: any free port) and returns the port. Throws Error when it cannot.
  int bind(const std::string& host, int port);
  /// Serves until stop().
  void listen();
  /// Makes listen() return.
  void stop();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace convlab::service
