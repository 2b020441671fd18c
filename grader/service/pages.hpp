/// @file
/// @brief The service's own HTML pages, beside the live leaderboard (which is the leaderboard's
/// page, leaderboard_html): a team's history of jobs, one job with its output and report, the
/// index and the pages that say why something is refused. Self-contained like the leaderboard
/// (its style sheet, no script, nothing external); every text from a team is escaped.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "grader/service/job_store.hpp"

namespace convlab::service {

/// One milestone's deadline as a team's page shows it.
struct DeadlineRow {
  std::string milestone;
  std::string deadline;                     ///< "2026-03-01 23:59:00 UTC", or "" when there is none
  bool extended = false;                    ///< an extension of this team's
  bool passed = false;                      ///< grade jobs are closed
  std::optional<std::int64_t> counted_job;  ///< the team's grade that counts
};

/// What a team's history page shows.
struct TeamPage {
  std::string account;                          ///< the team (or the staff account) that is looking
  bool staff = false;                           ///< a staff account: the jobs are every team's
  std::vector<JobInfo> jobs;                    ///< newest first
  std::map<std::string, std::int64_t> counted;  ///< milestone -> the job that counts (its team)
  std::vector<DeadlineRow> deadlines;
  /// milestone -> the team's anonymous label on that leaderboard, where it is ranked.
  std::map<std::string, std::string> labels;
};

/// The history page: deadlines, then every job (state, exit status, the one that counts),
/// each linking to its own page. Reloads every 10 s while a job is queued or running.
std::string team_page_html(const TeamPage& page);

/// One job's page: its state, its report (the team's view: hidden models unnamed) as a table
/// of checks, and its output. Reloads every 5 s while the job is queued or running.
std::string job_page_html(const JobInfo& job, bool counts, const std::string& output,
                          const std::optional<std::string>& report_json);

/// The service's front page: the leaderboard of each milestone in `milestones`, and how a team
/// opens its own page.
std::string index_page_html(const std::vector<std::string>& milestones);

/// A page that says what went wrong (`title`) and what to do (`text`).
std::string message_page_html(const std::string& title, const std::string& text);

}  // namespace convlab::service
