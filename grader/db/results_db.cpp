#include "grader/db/results_db.hpp"

#include <sqlite3.h>

#include <chrono>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <set>

#include "grader/db/sqlite.hpp"
#include "reference/core/error.hpp"

namespace convlab::grader {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using sqlite::Connection;
using sqlite::Insert;
using sqlite::SqliteError;
using sqlite::Statement;
using sqlite::Transaction;

namespace {

// Written into the SQLite header (PRAGMA application_id) so that `file` and this grader can
// tell a convlab results database from any other SQLite file: "CVLB".
constexpr int kApplicationId = 0x43564C42;

// SQLite's own wait on a lock, then our retry of the whole transaction with backoff.
constexpr auto kBusyTimeout = 5000ms;
constexpr auto kPatience = 120s;

struct Migration {
  int version;
  const char* sql;
  /// Run after `sql`, in the same transaction: what SQL alone cannot do (nullptr: nothing).
  void (*after)(Connection&) = nullptr;
};

void backfill_report_ids(Connection& conn);

// Applied in order, each once, all pending ones in one transaction. Never edit a released
// step: add a new one (files in the wild were made by the old text).
constexpr Migration kMigrations[] = {
    // v1: one row per grading run, one per check, and the file's own facts.
    {1, R"sql(
CREATE TABLE meta (
  key   TEXT PRIMARY KEY,
  value TEXT NOT NULL
);
INSERT INTO meta (key, value) VALUES
  ('application', 'convlab-results'),
  ('created_at', strftime('%Y-%m-%dT%H:%M:%SZ', 'now')),
  ('anonymize_key', lower(hex(randomblob(16))));
CREATE TABLE runs (
  id               INTEGER PRIMARY KEY,
  team             TEXT NOT NULL,
  milestone        TEXT NOT NULL,
  submission       TEXT NOT NULL,
  started_at       TEXT NOT NULL,
  duration_s       REAL NOT NULL,
  seed             TEXT NOT NULL,  -- a uint64, kept exact as decimal text
  score            REAL NOT NULL,
  max_score        REAL NOT NULL,
  op_time_s        REAL,           -- NULL unless the ranked check passed and was timed
  op_time_median_s REAL,
  reference_time_s REAL,
  speedup          REAL,
  ranked_variant   TEXT NOT NULL,
  ranked_model     TEXT NOT NULL,
  ranked_images    INTEGER NOT NULL,
  flags            TEXT NOT NULL,  -- JSON array of strings
  flagged          INTEGER NOT NULL CHECK (flagged IN (0, 1)),
  gpu_name         TEXT NOT NULL,
  gpu_driver       TEXT NOT NULL,
  cuda_driver      TEXT NOT NULL,
  hostname         TEXT NOT NULL,
  report_json      TEXT NOT NULL,
  recorded_at      TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%SZ', 'now'))
);
CREATE TABLE checks (
  id                INTEGER PRIMARY KEY,
  run_id            INTEGER NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
  position          INTEGER NOT NULL,  -- order in the report
  check_id          TEXT NOT NULL,
  name              TEXT NOT NULL,
  kind              TEXT NOT NULL,
  status            TEXT NOT NULL CHECK (status IN ('passed', 'failed', 'skipped')),
  reason            TEXT NOT NULL,
  score             REAL NOT NULL,
  max_score         REAL NOT NULL,
  output            TEXT NOT NULL,
  hidden            INTEGER NOT NULL CHECK (hidden IN (0, 1)),
  variant           TEXT NOT NULL,
  model             TEXT NOT NULL,
  images            INTEGER NOT NULL,
  expected_correct  INTEGER,
  correct           INTEGER,
  op_time_s         REAL,
  op_time_median_s  REAL,
  op_time_runs_s    TEXT NOT NULL,  -- JSON array of seconds
  reference_time_s  REAL,
  worst_error       REAL,
  wall_s            REAL NOT NULL,
  details_json      TEXT NOT NULL
);
)sql"},
    // v2: what the report had and v1's tables did not: the CPU and sandbox of a run, whether
    // it was partial (--only) or hit a grader error, the grader's version and framework hash,
    // each check's milestone; and indexes for the leaderboard's per-team best and a run's
    // checks.
    {2, R"sql(
ALTER TABLE runs ADD COLUMN cpu_name TEXT NOT NULL DEFAULT '';
ALTER TABLE runs ADD COLUMN sandbox_json TEXT NOT NULL DEFAULT '{}';
ALTER TABLE runs ADD COLUMN only_json TEXT NOT NULL DEFAULT '[]';
ALTER TABLE runs ADD COLUMN partial INTEGER NOT NULL DEFAULT 0 CHECK (partial IN (0, 1));
ALTER TABLE runs ADD COLUMN grader_error TEXT NOT NULL DEFAULT '';
ALTER TABLE runs ADD COLUMN grader_version TEXT NOT NULL DEFAULT '';
ALTER TABLE runs ADD COLUMN framework_hash TEXT NOT NULL DEFAULT '';
ALTER TABLE checks ADD COLUMN milestone TEXT NOT NULL DEFAULT '';
CREATE INDEX runs_by_team_time ON runs (milestone, team, op_time_s);
CREATE INDEX checks_by_run ON checks (run_id, position);
)sql"},
    // v3: a stable id per report, unique, so that a report ingested twice (a Slurm class's
    // report folders loaded again) is one row; whether the grade let the sandbox run degraded
    // and which features it lacked (NULL where the report does not say).
    {3, R"sql(
ALTER TABLE runs ADD COLUMN report_id TEXT;
ALTER TABLE runs ADD COLUMN allow_degraded INTEGER CHECK (allow_degraded IN (0, 1));
ALTER TABLE runs ADD COLUMN degraded_features TEXT;  -- JSON array of strings
)sql",
     backfill_report_ids},
    // v4: the submission service (convlab serve): each team's token, as its SHA-256 only; the
    // job queue, persistent so that a restart loses no job; each job's output in chunks, so a
    // client can follow it while it grows.
    {4, R"sql(
CREATE TABLE service_tokens (
  team      TEXT PRIMARY KEY,
  sha256    TEXT NOT NULL UNIQUE,
  issued_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%SZ', 'now'))
);
CREATE TABLE jobs (
  id           INTEGER PRIMARY KEY,
  team         TEXT NOT NULL,
  command      TEXT NOT NULL CHECK (command IN ('check', 'run', 'grade')),
  milestone    TEXT NOT NULL,
  args_json    TEXT NOT NULL,  -- JSON object: the validated arguments (variant, model, images)
  files_json   TEXT NOT NULL,  -- JSON object: path in the checkout -> content
  device       TEXT NOT NULL CHECK (device IN ('cpu', 'gpu')),
  state        TEXT NOT NULL CHECK (state IN ('queued', 'running', 'done', 'failed')),
  attempts     INTEGER NOT NULL DEFAULT 0,
  exit_code    INTEGER,
  error        TEXT NOT NULL DEFAULT '',
  report_json  TEXT,
  submitted_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%SZ', 'now')),
  started_at   TEXT,
  finished_at  TEXT
);
CREATE INDEX jobs_by_state ON jobs (state, device, id);
CREATE INDEX jobs_by_team ON jobs (team, id);
CREATE TABLE job_output (
  job_id INTEGER NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
  start  INTEGER NOT NULL,  -- byte offset of this chunk in the job's whole output
  chunk  BLOB NOT NULL,
  PRIMARY KEY (job_id, start)
);
)sql"},
    // v5: the service's deadlines. Each grade job links to the run it recorded, so that a
    // team's last grade submitted before its deadline is the run the leaderboard ranks; the
    // staff's extensions, one per team and milestone; a team's request to cancel a running job.
    {5, R"sql(
ALTER TABLE jobs ADD COLUMN run_id INTEGER REFERENCES runs (id);
ALTER TABLE jobs ADD COLUMN cancel_requested INTEGER NOT NULL DEFAULT 0
  CHECK (cancel_requested IN (0, 1));
CREATE INDEX jobs_counted ON jobs (milestone, team, command, id);
CREATE TABLE service_extensions (
  team       TEXT NOT NULL,
  milestone  TEXT NOT NULL,
  deadline   TEXT NOT NULL,  -- UTC, ISO 8601
  granted_by TEXT NOT NULL,
  granted_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%SZ', 'now')),
  PRIMARY KEY (team, milestone)
);
)sql"},
};

constexpr int kCurrentVersion = kMigrations[std::size(kMigrations) - 1].version;

// Rows recorded before v3 get the id their report has; then the index makes it unique. Two old
// rows with one report (none should exist) keep the first its id.
void backfill_report_ids(Connection& conn) {
  std::vector<std::pair<std::int64_t, std::string>> ids;
  {
    Statement st = conn.prepare("SELECT id, report_json FROM runs ORDER BY id");
    while (st.step()) {
      if (auto id = report_id(st.text(1))) ids.emplace_back(st.int64(0), *id);
    }
  }
  std::set<std::string> seen;
  Statement set = conn.prepare("UPDATE runs SET report_id = ?2 WHERE id = ?1");
  for (const auto& [row, id] : ids) {
    if (!seen.insert(id).second) continue;
    set.reset();
    set.bind(1, row).bind(2, id);
    set.run();
  }
  conn.exec("CREATE UNIQUE INDEX runs_by_report ON runs (report_id)");
}

// What v3 stores of a report's degraded-sandbox keys: allow_degraded (NULL when absent) and
// degraded_features (a JSON array of strings, NULL when absent).
struct Degraded {
  std::optional<bool> allow;
  std::optional<std::string> features;
};

Degraded degraded_of(const std::string& report_json) {
  Degraded d;
  const auto j = nlohmann::json::parse(report_json, nullptr, false);
  if (!j.is_object()) return d;
  if (auto a = j.find("allow_degraded"); a != j.end() && a->is_boolean()) d.allow = a->get<bool>();
  if (auto f = j.find("degraded_features"); f != j.end() && f->is_array()) {
    nlohmann::json names = nlohmann::json::array();
    for (const auto& e : *f) {
      if (e.is_string()) names.push_back(e);
    }
    d.features = names.dump();
  }
  return d;
}

CheckStatus parse_status(const std::string& s) {
  if (s == "passed") return CheckStatus::passed;
  if (s == "skipped") return CheckStatus::skipped;
  return CheckStatus::failed;
}

// What the file holds before we touch it.
struct Probe {
  int application_id = 0;
  int version = 0;
  std::int64_t objects = 0;  // tables, indexes... of any kind
};

// One statement, so one read snapshot: read one by one, the three could straddle another
// grader's creating commit and show a half-made file (no application id yet, tables already).
Probe probe(Connection& conn) {
  Probe p;
  Statement st = conn.prepare(
      "SELECT (SELECT application_id FROM pragma_application_id), "
      "(SELECT user_version FROM pragma_user_version), (SELECT count(*) FROM sqlite_schema)");
  if (st.step()) {
    p.application_id = static_cast<int>(st.int64(0));
    p.version = static_cast<int>(st.int64(1));
    p.objects = st.int64(2);
  }
  return p;
}

// True when the file is empty (a new database); throws for a file we must not touch.
bool check_ours(const Probe& p, const fs::path& file) {
  if (p.application_id == 0 && p.version == 0 && p.objects == 0) return true;
  if (p.application_id != kApplicationId || p.version < 1) {
    char id[16];
    std::snprintf(id, sizeof id, "0x%08x", static_cast<unsigned>(p.application_id));
    throw Error(file.string() +
                " is an SQLite database but not a convlab results database "
                "(application id " +
                id + ", " + std::to_string(p.objects) +
                " schema objects); give --db a new file name or the database convlab grade "
                "wrote, and leave this one as it is");
  }
  if (p.version > kCurrentVersion) {
    throw Error(file.string() + " was written by a newer convlab (results schema v" +
                std::to_string(p.version) + "; this convlab reads up to v" +
                std::to_string(kCurrentVersion) +
                "); use that newer convlab, or record into a new file");
  }
  return false;
}

std::vector<std::string> json_strings(const std::string& text) {
  const auto j = nlohmann::json::parse(text, nullptr, false);
  std::vector<std::string> out;
  if (!j.is_array()) return out;
  for (const auto& e : j) {
    if (e.is_string()) out.push_back(e.get<std::string>());
  }
  return out;
}

std::vector<double> json_numbers(const std::string& text) {
  const auto j = nlohmann::json::parse(text, nullptr, false);
  std::vector<double> out;
  if (!j.is_array()) return out;
  for (const auto& e : j) {
    if (e.is_number()) out.push_back(e.get<double>());
  }
  return out;
}

}  // namespace

struct ResultsDb::Impl {
  Connection conn;
  int version = 0;

  Impl(const fs::path& file, bool create) : conn(file, create) {}
};

ResultsDb::ResultsDb(const fs::path& file, const ResultsDbOptions& options) {
  if (!options.create && !fs::exists(file)) {
    throw Error("no results database at " + file.string() +
                ": grade with `convlab grade ... --db " + file.string() +
                "` first, or check the path");
  }
  if (fs::is_directory(file)) {
    throw Error("--db " + file.string() + " is a directory; give a file name, e.g. " +
                (file / "results.sqlite").string());
  }
  const int target = options.migrate_to == 0 ? kCurrentVersion : options.migrate_to;
  if (target < 1 || target > kCurrentVersion) {
    throw Error("results schema v" + std::to_string(target) + " does not exist (this convlab " +
                "knows v1 to v" + std::to_string(kCurrentVersion) + ")");
  }

  impl_ = std::make_unique<Impl>(file, options.create);
  Connection& conn = impl_->conn;
  conn.set_busy_timeout(kBusyTimeout);
  // Per connection, outside any transaction (it is a no-op inside one).
  conn.exec("PRAGMA foreign_keys = ON");

  try {
    sqlite::with_busy_retry(conn, kPatience, [&] {
      Probe p = probe(conn);
      check_ours(p, file);
      // WAL: readers never block the writer and the writer never blocks readers; persistent
      // in the file once set. FULL sync: a recorded grade survives a power cut.
      {
        // Scoped: a statement left un-reset would pin a read snapshot under the write below.
        Statement wal = conn.prepare("PRAGMA journal_mode = WAL");
        if (!wal.step() || wal.text(0) != "wal") {
          throw Error("cannot switch " + file.string() +
                      " to WAL mode (is it on a network file system? keep the database on a "
                      "local disk)");
        }
      }
      conn.exec("PRAGMA synchronous = FULL");
      if (p.version >= target) {
        impl_->version = p.version;
        return;
      }
      // Another grader may have migrated between the probe and the lock: look again inside.
      Transaction tx(conn);
      p = probe(conn);
      check_ours(p, file);
      for (const Migration& m : kMigrations) {
        if (m.version > p.version && m.version <= target) {
          conn.exec(m.sql);
          if (m.after != nullptr) m.after(conn);
        }
      }
      const int version = std::max(p.version, target);
      conn.exec("PRAGMA user_version = " + std::to_string(version));
      conn.exec("PRAGMA application_id = " + std::to_string(kApplicationId));
      tx.commit();
      impl_->version = version;
    });
  } catch (const SqliteError& e) {
    if (e.code() == SQLITE_NOTADB) {
      throw Error(file.string() +
                  " is not a convlab results database (not an SQLite file); give --db a new "
                  "file name or the database convlab grade wrote");
    }
    if (e.code() == SQLITE_CORRUPT) {
      throw Error(file.string() + " is damaged (" + e.what() +
                  "); restore it from a backup, or grade again into a new file");
    }
    throw;
  }
}

ResultsDb::~ResultsDb() = default;

int ResultsDb::current_schema_version() {
  return kCurrentVersion;
}

int ResultsDb::schema_version() const {
  return impl_->version;
}

const fs::path& ResultsDb::file() const {
  return impl_->conn.file();
}

std::optional<std::string> report_id(const std::string& report_json) {
  const auto j = nlohmann::json::parse(report_json, nullptr, false);
  if (!j.is_object() || !j.contains("schema")) return std::nullopt;
  // FNV-1a, 64 bits: cheap and stable. It is not collision-proof, so a match is trusted only
  // when the stored report is the same document (record_once compares them).
  std::uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : j.dump()) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, "fnv1a64:%016llx", static_cast<unsigned long long>(h));
  return std::string(buf);
}

std::int64_t ResultsDb::record(const GradeResult& r, const std::string& report_json) {
  return record_once(r, report_json).id;
}

Recorded ResultsDb::record_once(const GradeResult& r, const std::string& report_json) {
  if (impl_->version != kCurrentVersion) {
    throw Error("this handle on " + file().string() + " was opened at schema v" +
                std::to_string(impl_->version) +
                " and cannot record; open it at the current "
                "schema (the default)");
  }
  if (r.team.empty() || r.milestone.empty()) {
    throw Error("a grade needs a team and a milestone to be recorded; give --team");
  }
  Connection& conn = impl_->conn;
  const std::string flags = nlohmann::json(r.flags).dump();
  const std::optional<std::string> id = report_id(report_json);
  const Degraded degraded = degraded_of(report_json);
  return sqlite::with_busy_retry(conn, kPatience, [&]() -> Recorded {
    Transaction tx(conn);
    if (id) {
      Statement same = conn.prepare("SELECT id, report_json FROM runs WHERE report_id = ?1");
      same.bind(1, *id);
      if (same.step()) {
        const auto stored = nlohmann::json::parse(same.text(1), nullptr, false);
        if (stored != nlohmann::json::parse(report_json, nullptr, false)) {
          throw Error("run " + std::to_string(same.int64(0)) + " in " + file().string() +
                      " has the report id " + *id + " of another report (team " + r.team +
                      "); this report was not recorded: record it into a new file and tell "
                      "the convlab maintainers");
        }
        return {same.int64(0), false};
      }
    }
    const std::int64_t run_id =
        Insert("runs")
            .set("team", r.team)
            .set("milestone", r.milestone)
            .set("submission", r.submission)
            .set("started_at", r.started_at)
            .set("duration_s", r.duration_s)
            .set("seed", std::to_string(r.seed))
            .set("score", r.score)
            .set("max_score", r.max_score)
            .set("op_time_s", r.op_time_s)
            .set("op_time_median_s", r.op_time_median_s)
            .set("reference_time_s", r.reference_time_s)
            .set("speedup", r.speedup)
            .set("ranked_variant", r.ranked_variant)
            .set("ranked_model", r.ranked_model)
            .set("ranked_images", r.ranked_images)
            .set("flags", flags)
            .set("flagged", !r.flags.empty())
            .set("gpu_name", r.machine.gpu_name)
            .set("gpu_driver", r.machine.gpu_driver)
            .set("cuda_driver", r.machine.cuda_driver)
            .set("hostname", r.machine.hostname)
            .set("report_json", report_json)
            .set("cpu_name", r.machine.cpu_name)
            .set("sandbox_json", r.sandbox_json.empty() ? std::string("{}") : r.sandbox_json)
            .set("only_json", nlohmann::json(r.only).dump())
            .set("partial", r.partial)
            .set("grader_error", r.grader_error)
            .set("grader_version", r.grader_version)
            .set("framework_hash", r.framework_hash)
            .set("report_id", id)
            .set("allow_degraded", degraded.allow)
            .set("degraded_features", degraded.features)
            .run(conn);

    std::int64_t position = 0;
    for (const CheckResult& c : r.checks) {
      Insert("checks")
          .set("run_id", run_id)
          .set("position", position++)
          .set("check_id", c.id)
          .set("name", c.name)
          .set("kind", c.kind)
          .set("status", std::string(status_name(c.status)))
          .set("reason", c.reason)
          .set("score", c.score)
          .set("max_score", c.max_score)
          .set("output", c.output)
          .set("hidden", c.hidden)
          .set("variant", c.variant)
          .set("model", c.model)
          .set("images", c.images)
          .set("expected_correct", c.expected_correct)
          .set("correct", c.correct)
          .set("op_time_s", c.op_time_s)
          .set("op_time_median_s", c.op_time_median_s)
          .set("op_time_runs_s", nlohmann::json(c.op_time_runs_s).dump())
          .set("reference_time_s", c.reference_time_s)
          .set("worst_error", c.worst_error)
          .set("wall_s", c.wall_s)
          .set("details_json", c.details_json.empty() ? std::string("{}") : c.details_json)
          .set("milestone", c.milestone)
          .run(conn);
    }
    tx.commit();
    return {run_id, true};
  });
}

std::optional<StoredRun> ResultsDb::load_run(std::int64_t id) const {
  Connection& conn = impl_->conn;
  Statement run = conn.prepare(R"sql(
SELECT team, milestone, submission, started_at, duration_s, seed, score, max_score, op_time_s,
  op_time_median_s, reference_time_s, speedup, ranked_variant, ranked_model, ranked_images,
  flags, gpu_name, gpu_driver, cuda_driver, hostname, report_json, recorded_at, cpu_name,
  sandbox_json, only_json, partial, grader_error, grader_version, framework_hash, report_id,
  allow_degraded, degraded_features
FROM runs WHERE id = ?1)sql");
  run.bind(1, id);
  if (!run.step()) return std::nullopt;
  StoredRun s;
  s.id = id;
  GradeResult& r = s.result;
  r.team = run.text("team");
  r.milestone = run.text("milestone");
  r.submission = run.text("submission");
  r.started_at = run.text("started_at");
  r.duration_s = run.real("duration_s");
  r.seed = std::stoull(run.text("seed"));
  r.score = run.real("score");
  r.max_score = run.real("max_score");
  r.op_time_s = run.optional_real("op_time_s");
  r.op_time_median_s = run.optional_real("op_time_median_s");
  r.reference_time_s = run.optional_real("reference_time_s");
  r.speedup = run.optional_real("speedup");
  r.ranked_variant = run.text("ranked_variant");
  r.ranked_model = run.text("ranked_model");
  r.ranked_images = run.int64("ranked_images");
  r.flags = json_strings(run.text("flags"));
  r.machine.gpu_name = run.text("gpu_name");
  r.machine.gpu_driver = run.text("gpu_driver");
  r.machine.cuda_driver = run.text("cuda_driver");
  r.machine.hostname = run.text("hostname");
  s.report_json = run.text("report_json");
  s.recorded_at = run.text("recorded_at");
  r.machine.cpu_name = run.text("cpu_name");
  r.sandbox_json = run.text("sandbox_json");
  r.only = json_strings(run.text("only_json"));
  r.partial = run.int64("partial") != 0;
  r.grader_error = run.text("grader_error");
  r.grader_version = run.text("grader_version");
  r.framework_hash = run.text("framework_hash");
  s.report_id = run.text("report_id");
  if (!run.is_null("allow_degraded")) s.allow_degraded = run.int64("allow_degraded") != 0;
  if (!run.is_null("degraded_features")) {
    s.degraded_features = json_strings(run.text("degraded_features"));
  }

  Statement chk = conn.prepare(R"sql(
SELECT check_id, name, kind, status, reason, score, max_score, output, hidden, variant, model,
  images, expected_correct, correct, op_time_s, op_time_median_s, op_time_runs_s,
  reference_time_s, worst_error, wall_s, details_json, milestone
FROM checks WHERE run_id = ?1 ORDER BY position)sql");
  chk.bind(1, id);
  while (chk.step()) {
    CheckResult c;
    c.id = chk.text("check_id");
    c.name = chk.text("name");
    c.kind = chk.text("kind");
    c.status = parse_status(chk.text("status"));
    c.reason = chk.text("reason");
    c.score = chk.real("score");
    c.max_score = chk.real("max_score");
    c.output = chk.text("output");
    c.hidden = chk.int64("hidden") != 0;
    c.variant = chk.text("variant");
    c.model = chk.text("model");
    c.images = chk.int64("images");
    c.expected_correct = chk.optional_int64("expected_correct");
    c.correct = chk.optional_int64("correct");
    c.op_time_s = chk.optional_real("op_time_s");
    c.op_time_median_s = chk.optional_real("op_time_median_s");
    c.op_time_runs_s = json_numbers(chk.text("op_time_runs_s"));
    c.reference_time_s = chk.optional_real("reference_time_s");
    c.worst_error = chk.optional_real("worst_error");
    c.wall_s = chk.real("wall_s");
    c.details_json = chk.text("details_json");
    c.milestone = chk.text("milestone");
    r.checks.push_back(std::move(c));
  }
  return s;
}

std::vector<TeamBest> ResultsDb::best_per_team(const std::string& milestone) const {
  Connection& conn = impl_->conn;
  // A team that graded through the submission service is ranked by its last grade submitted
  // there (the service took it only before the team's deadline), whatever its time. Any other
  // team: its run with the smallest op time; ties go to the earlier run. A run counts only
  // when it is a whole grade: not cut short by --only, not stopped by a grader error.
  Statement best = conn.prepare(R"sql(
WITH counted AS (
  SELECT j.team, j.run_id FROM jobs j
  WHERE j.milestone = ?1 AND j.command = 'grade' AND j.run_id IS NOT NULL
    AND j.id = (SELECT max(k.id) FROM jobs k
                WHERE k.milestone = j.milestone AND k.team = j.team AND k.command = 'grade'
                  AND k.run_id IS NOT NULL))
SELECT r.id, r.team, r.op_time_s, r.op_time_median_s, r.reference_time_s, r.gpu_name,
  r.started_at, r.flagged, r.flags, r.ranked_variant, r.ranked_model, r.ranked_images,
  r.id IN (SELECT run_id FROM counted) AS submitted
FROM runs r
WHERE r.milestone = ?1 AND r.op_time_s IS NOT NULL AND r.partial = 0 AND r.grader_error = ''
  AND (r.id IN (SELECT run_id FROM counted)
       OR (r.team NOT IN (SELECT team FROM counted)
           AND r.id = (SELECT b.id FROM runs b
                       WHERE b.milestone = r.milestone AND b.team = r.team
                         AND b.op_time_s IS NOT NULL AND b.partial = 0 AND b.grader_error = ''
                       ORDER BY b.op_time_s, b.id LIMIT 1)))
ORDER BY r.op_time_s, r.id)sql");
  Statement variants = conn.prepare(R"sql(
SELECT variant, min(op_time_s) FROM checks
WHERE run_id = ?1 AND kind = 'network' AND status = 'passed' AND model = ?2 AND images = ?3
  AND op_time_s IS NOT NULL AND milestone IN ('', ?4)
GROUP BY variant ORDER BY min(position))sql");
  std::vector<TeamBest> out;
  best.bind(1, milestone);
  while (best.step()) {
    TeamBest t;
    t.run_id = best.int64(0);
    t.team = best.text(1);
    t.op_time_s = best.real(2);
    t.op_time_median_s = best.optional_real(3);
    t.reference_time_s = best.optional_real(4);
    t.gpu_name = best.text(5);
    t.graded_at = best.text(6);
    t.flagged = best.int64(7) != 0;
    t.flags = json_strings(best.text(8));
    t.ranked_variant = best.text(9);
    t.ranked_model = best.text(10);
    t.ranked_images = best.int64(11);
    t.submitted = best.int64(12) != 0;
    variants.reset();
    variants.bind(1, t.run_id).bind(2, t.ranked_model).bind(3, t.ranked_images).bind(4, milestone);
    while (variants.step()) t.variants.emplace_back(variants.text(0), variants.real(1));
    out.push_back(std::move(t));
  }
  return out;
}

std::optional<std::int64_t> ResultsDb::find_report(const std::string& id) const {
  Statement st = impl_->conn.prepare("SELECT id FROM runs WHERE report_id = ?1");
  st.bind(1, id);
  if (!st.step()) return std::nullopt;
  return st.int64(0);
}

std::int64_t ResultsDb::run_count() const {
  Statement st = impl_->conn.prepare("SELECT count(*) FROM runs");
  return st.step() ? st.int64(0) : 0;
}

std::int64_t ResultsDb::check_count() const {
  Statement st = impl_->conn.prepare("SELECT count(*) FROM checks");
  return st.step() ? st.int64(0) : 0;
}

std::string ResultsDb::anonymize_key() const {
  Statement st = impl_->conn.prepare("SELECT value FROM meta WHERE key = 'anonymize_key'");
  if (!st.step() || st.text(0).empty()) {
    throw Error(file().string() +
                " has no anonymize_key in its meta table; it was not made "
                "by convlab grade, or was edited by hand");
  }
  return st.text(0);
}

}  // namespace convlab::grader
