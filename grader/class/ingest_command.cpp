// `convlab ingest OUT --db FILE`: one line per team folder, then the counts.
#include <CLI/CLI.hpp>
#include <iostream>
#include <memory>

#include "grader/class/commands.hpp"
#include "reference/core/error.hpp"
#ifdef CONVLAB_HAVE_SQLITE
#include "grader/class/ingest.hpp"
#endif

namespace convlab::grader {

namespace {

/// Exit status when some report was rejected (the others were ingested).
constexpr int kExitRejected = 4;

struct IngestArgs {
  std::string out, db;
  std::vector<std::string> teams;
};

int run_ingest(const IngestArgs& a) {
#ifdef CONVLAB_HAVE_SQLITE
  const IngestSummary s = ingest_reports(a.out, a.db, a.teams);
  for (const IngestedFolder& f : s.folders) std::cout << f.team << ": " << describe(f) << "\n";
  const int rejected = s.count(IngestOutcome::rejected);
  std::cout << "Ingested " << a.out << " into " << a.db << ": " << s.count(IngestOutcome::added)
            << " added, " << s.count(IngestOutcome::already) << " already there, " << rejected
            << " rejected, " << s.count(IngestOutcome::no_report) << " without a report.\n";
  if (rejected > 0) {
    std::cout << "A rejected report is not a grade report of its folder's team: grade that "
                 "team again (grade-all --team NAME) rather than edit the file.\n";
    return kExitRejected;
  }
  return 0;
#else
  (void)a;
  throw Error(
      "convlab ingest needs the results database, and this convlab was built without SQLite: "
      "install libsqlite3-dev and configure again");
#endif
}

}  // namespace

void add_ingest_command(CLI::App& app, int& exit_code) {
  auto a = std::make_shared<IngestArgs>();
  CLI::App* cmd = app.add_subcommand(
      "ingest",
      "Load the report folders of a graded class (OUT/TEAM/report.json) into the results "
      "database; a report already there is not added again. The team is the folder's name. "
      "Exit status: 0, 4 when some report was rejected (the others are loaded), 1 on bad input");
  cmd->add_option("OUT", a->out, "The --out folder of grade-all: one subfolder per team")
      ->required();
  cmd->add_option("--db", a->db, "The results database (SQLite; created if missing)")->required();
  cmd->add_option("--team", a->teams, "Only this team's folder (repeatable)");
  cmd->callback([a, &exit_code] { exit_code = run_ingest(*a); });
}

}  // namespace convlab::grader
