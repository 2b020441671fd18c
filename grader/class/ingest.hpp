/// @file
/// @brief `convlab ingest OUT --db FILE`: loads the report folders of a class (OUT/TEAM/
/// report.json, as `convlab grade` and the tasks of `grade-all --slurm` write them) into the
/// results database, idempotently: a report already there is not added again. The one writer
/// of a class graded on a cluster, whose tasks never open the database themselves.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace convlab::grader {

/// What became of one team folder.
enum class IngestOutcome {
  added,      ///< its report is a new run
  already,    ///< the same report was already in the database
  rejected,   ///< its report.json is not a valid grade report of this team (reason says why)
  no_report,  ///< the folder holds no report.json (its grade did not get that far)
};

/// One team folder's result.
struct IngestedFolder {
  std::string team;              ///< the folder's name: the team the report counts for
  std::filesystem::path folder;  ///< OUT/TEAM
  IngestOutcome outcome = IngestOutcome::no_report;
  std::int64_t run_id = 0;  ///< added or already: the run's id
  std::string reason;       ///< rejected: why
};

/// Every team folder's result, sorted by team.
struct IngestSummary {
  std::vector<IngestedFolder> folders;
  /// Folders with this outcome.
  int count(IngestOutcome outcome) const;
};

/// Ingests OUT/TEAM/report.json for every team folder of `out` (every non-hidden subfolder; or
/// only `teams` when not empty). The team is the folder's name: a report that names another
/// team, is not a regular file (a link), or is not a valid grade report is rejected and the
/// others are still ingested. Throws Error when `out` is not a folder, a team of `teams` has no
/// folder, or the database cannot be opened.
IngestSummary ingest_reports(const std::filesystem::path& out, const std::filesystem::path& db,
                             const std::vector<std::string>& teams = {});

/// "added as run 12", "already there (run 7)", "rejected: ...", "no report.json".
std::string describe(const IngestedFolder& folder);

}  // namespace convlab::grader
