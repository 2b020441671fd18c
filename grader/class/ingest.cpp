#include "grader/class/ingest.hpp"

#include <algorithm>
#include <fstream>
#include <sstream>

#include "grader/class/report_reader.hpp"
#include "grader/db/results_db.hpp"
#include "reference/core/error.hpp"
#include "reference/core/files.hpp"
#include "reference/core/text.hpp"

namespace convlab::grader {

namespace fs = std::filesystem;

namespace {

// A report is a few hundred kilobytes at most (outputs are capped); a larger file is not one.
constexpr std::uintmax_t kMaxReportBytes = 64u << 20;

// Reads OUT/TEAM/report.json into `text`; an empty return means it was read, otherwise why not
// (folder.outcome is set to no_report when there is simply none).
std::string read_report(IngestedFolder& folder, std::string& text) {
  const fs::path file = folder.folder / "report.json";
  std::error_code ec;
  const fs::file_status st = fs::symlink_status(file, ec);
  if (ec || !fs::exists(st)) {
    folder.outcome = IngestOutcome::no_report;
    return "no report.json";
  }
  // A link could point at another team's report, or anywhere.
  if (!fs::is_regular_file(st)) return "report.json is not a regular file (a link?)";
  if (fs::file_size(file, ec) > kMaxReportBytes || ec) {
    return "report.json is larger than any grade report";
  }
  auto content = try_read_file(file);
  if (!content) return "cannot read report.json";
  text = *std::move(content);
  return "";
}

}  // namespace

int IngestSummary::count(IngestOutcome outcome) const {
  return static_cast<int>(std::count_if(folders.begin(), folders.end(),
                                        [&](const auto& f) { return f.outcome == outcome; }));
}

IngestSummary ingest_reports(const fs::path& out, const fs::path& db_file,
                             const std::vector<std::string>& teams) {
  std::error_code ec;
  if (!fs::is_directory(out, ec)) {
    throw Error("no such folder: " + out.string() +
                " (ingest takes the --out folder of grade-all: one subfolder per team)");
  }
  IngestSummary summary;
  if (teams.empty()) {
    for (const fs::directory_entry& e : fs::directory_iterator(out)) {
      const std::string name = e.path().filename().string();
      // Hidden folders are the grader's own (.slurm); links are not team folders.
      if (name.starts_with(".") || !e.is_directory() || e.is_symlink()) continue;
      summary.folders.push_back({name, e.path(), IngestOutcome::no_report, 0, ""});
    }
  } else {
    for (const std::string& team : teams) {
      const fs::path folder = out / team;
      if (team.empty() || team.starts_with(".") || team.find('/') != std::string::npos ||
          !fs::is_directory(fs::symlink_status(folder, ec))) {
        throw Error("no folder for team '" + team + "' in " + out.string());
      }
      summary.folders.push_back({team, folder, IngestOutcome::no_report, 0, ""});
    }
  }
  std::sort(summary.folders.begin(), summary.folders.end(),
            [](const auto& a, const auto& b) { return a.team < b.team; });

  ResultsDb db(db_file);
  for (IngestedFolder& f : summary.folders) {
    std::string text;
    f.outcome = IngestOutcome::rejected;
    f.reason = read_report(f, text);
    if (!f.reason.empty()) continue;
    GradeResult r;
    try {
      r = parse_report(text);
    } catch (const Error& e) {
      f.reason = std::string("not a grade report: ") + e.what();
      continue;
    }
    // A grade stores the folder's name without its control characters.
    if (r.team != strip_control_chars(f.team)) {
      f.reason = "report.json names team '" + r.team + "', not the folder's '" + f.team + "'";
      continue;
    }
    const Recorded rec = db.record_once(r, text);
    f.run_id = rec.id;
    f.outcome = rec.inserted ? IngestOutcome::added : IngestOutcome::already;
  }
  return summary;
}

std::string describe(const IngestedFolder& f) {
  switch (f.outcome) {
    case IngestOutcome::added:
      return "added as run " + std::to_string(f.run_id);
    case IngestOutcome::already:
      return "already there (run " + std::to_string(f.run_id) + ")";
    case IngestOutcome::rejected:
      return "rejected: " + f.reason;
    case IngestOutcome::no_report:
      return "no report.json";
  }
  return "";
}

}  // namespace convlab::grader
