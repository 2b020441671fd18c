#include "grader/service/job_store.hpp"

#include <chrono>
#include <limits>
#include <nlohmann/json.hpp>

#include "grader/db/results_db.hpp"
#include "grader/db/sqlite.hpp"

namespace convlab::service {
using grader::sqlite::Connection;
using grader::sqlite::Statement;
using grader::sqlite::Transaction;
using namespace std::chrono_literals;

namespace {

constexpr const char* kNow = "strftime('%Y-%m-%dT%H:%M:%SZ', 'now')";
constexpr const char* kColumns =
    "id, team, command, milestone, device, args_json, state, attempts, exit_code, error, "
    "submitted_at, started_at, finished_at, report_json IS NOT NULL AS has_report, run_id";

JobInfo read_job(const Statement& st) {
  JobInfo j;
  j.id = st.int64("id");
  j.team = st.text("team");
  j.command = st.text("command");
  j.milestone = st.text("milestone");
  j.device = st.text("device");
  j.args_json = st.text("args_json");
  j.state = st.text("state");
  j.attempts = static_cast<int>(st.int64("attempts"));
  if (auto code = st.optional_int64("exit_code")) j.exit_code = static_cast<int>(*code);
  j.error = st.text("error");
  j.submitted_at = st.text("submitted_at");
  j.started_at = st.text("started_at");
  j.finished_at = st.text("finished_at");
  j.has_report = st.int64("has_report") != 0;
  j.run_id = st.optional_int64("run_id");
  return j;
}

// Every write retries while a grade child process holds the database's write lock.
template <typename Body>
auto write(Connection& conn, Body&& body) {
  return grader::sqlite::with_busy_retry(conn, 120s, [&] {
    Transaction tx(conn);
    auto result = body();
    tx.commit();
    return result;
  });
}

// Runs `f` when it goes out of scope (after the transaction, whatever its outcome).
template <typename F>
struct Finally {
  F f;
  ~Finally() { f(); }
};
template <typename F>
Finally<F> finally(F f) {
  return {std::move(f)};
}

std::int64_t output_end(Connection& conn, std::int64_t id) {
  Statement st = conn.prepare(
      "SELECT coalesce(max(start + length(CAST(chunk AS BLOB))), 0) FROM job_output "
      "WHERE job_id = ?1");
  st.bind(1, id);
  return st.step() ? st.int64(0) : 0;
}

void append_locked(Connection& conn, std::int64_t id, const std::string& text) {
  if (text.empty()) return;
  Statement st = conn.prepare("INSERT INTO job_output (job_id, start, chunk) VALUES (?1, ?2, ?3)");
  st.bind(1, id).bind(2, output_end(conn, id)).bind(3, text);
  st.run();
}

}  // namespace

struct JobStore::Impl {
  Connection conn;
  explicit Impl(const std::filesystem::path& db) : conn(db, false) {
    conn.set_busy_timeout(5000ms);
    conn.exec("PRAGMA foreign_keys = ON");
  }
};

JobStore::JobStore(const std::filesystem::path& db) {
  // Creates the file or migrates it to the schema that has the service's tables.
  { grader::ResultsDb migrate(db); }
  impl_ = std::make_unique<Impl>(db);
}

JobStore::~JobStore() = default;

std::optional<std::string> JobStore::team_of_digest(const std::string& digest) {
  const std::lock_guard lock(mutex_);
  Statement st = impl_->conn.prepare("SELECT team FROM service_tokens WHERE sha256 = ?1");
  st.bind(1, digest);
  if (!st.step()) return std::nullopt;
  return st.text(0);
}

bool JobStore::has_token(const std::string& team) {
  const std::lock_guard lock(mutex_);
  Statement st = impl_->conn.prepare("SELECT 1 FROM service_tokens WHERE team = ?1");
  st.bind(1, team);
  return st.step();
}

void JobStore::set_token(const std::string& team, const std::string& digest) {
  const std::lock_guard lock(mutex_);
  write(impl_->conn, [&] {
    Statement st = impl_->conn.prepare(
        std::string("INSERT INTO service_tokens (team, sha256) VALUES (?1, ?2) "
                    "ON CONFLICT (team) DO UPDATE SET sha256 = ?2, issued_at = ") +
        kNow);
    st.bind(1, team).bind(2, digest);
    st.run();
    return 0;
  });
}

std::int64_t JobStore::enqueue(const JobSpec& job) {
  int count = 0;
  return *enqueue_within(job, std::numeric_limits<int>::max(), &count);
}

std::optional<std::int64_t> JobStore::enqueue_within(const JobSpec& job, int limit,
                                                     int* in_flight) {
  const Admission a = admit(job, limit, 0);
  *in_flight = a.in_flight;
  return a.id;
}

JobStore::Admission JobStore::admit(const JobSpec& job, int max_in_flight, int max_per_hour) {
  nlohmann::json files = nlohmann::json::object();
  for (const auto& [path, content] : job.files) files[path] = content;
  const std::string files_json = files.dump();
  const std::lock_guard lock(mutex_);
  const auto changed_on_return = finally([this] { changed(); });
  return write(impl_->conn, [&] {
    Admission a;
    {
      Statement count = impl_->conn.prepare(
          "SELECT count(*) FROM jobs WHERE team = ?1 AND state IN ('queued', 'running')");
      count.bind(1, job.team);
      a.in_flight = count.step() ? static_cast<int>(count.int64(0)) : 0;
    }
    {
      Statement hour = impl_->conn.prepare(
          "SELECT count(*), strftime('%Y-%m-%dT%H:%M:%SZ', min(submitted_at), '+1 hour') "
          "FROM jobs WHERE team = ?1 AND submitted_at > "
          "strftime('%Y-%m-%dT%H:%M:%SZ', 'now', '-1 hour')");
      hour.bind(1, job.team);
      if (hour.step()) {
        a.last_hour = static_cast<int>(hour.int64(0));
        a.hour_frees_at = hour.text(1);
      }
    }
    if (a.in_flight >= max_in_flight || (max_per_hour > 0 && a.last_hour >= max_per_hour)) {
      return a;
    }
    Statement st = impl_->conn.prepare(
        "INSERT INTO jobs (team, command, milestone, device, args_json, files_json, state) "
        "VALUES (?1, ?2, ?3, ?4, ?5, ?6, 'queued')");
    st.bind(1, job.team).bind(2, job.command).bind(3, job.milestone).bind(4, job.device);
    st.bind(5, job.args_json).bind(6, files_json);
    st.run();
    a.id = impl_->conn.last_insert_rowid();
    return a;
  });
}

int JobStore::in_flight(const std::string& team) {
  const std::lock_guard lock(mutex_);
  Statement st = impl_->conn.prepare(
      "SELECT count(*) FROM jobs WHERE team = ?1 AND state IN ('queued', 'running')");
  st.bind(1, team);
  return st.step() ? static_cast<int>(st.int64(0)) : 0;
}

int JobStore::position(std::int64_t id) {
  const std::lock_guard lock(mutex_);
  Statement st = impl_->conn.prepare(
      "SELECT count(*) FROM jobs AS q, jobs AS me WHERE me.id = ?1 AND me.state = 'queued' "
      "AND q.state = 'queued' AND q.device = me.device AND q.id <= me.id");
  st.bind(1, id);
  return st.step() ? static_cast<int>(st.int64(0)) : 0;
}

std::optional<JobInfo> JobStore::get(std::int64_t id) {
  const std::lock_guard lock(mutex_);
  Statement st = impl_->conn.prepare(std::string("SELECT ") + kColumns + " FROM jobs WHERE id = ?1");
  st.bind(1, id);
  if (!st.step()) return std::nullopt;
  return read_job(st);
}

std::vector<JobInfo> JobStore::list(const std::string& team, int limit) {
  const std::lock_guard lock(mutex_);
  Statement st = impl_->conn.prepare(std::string("SELECT ") + kColumns +
                                     " FROM jobs WHERE ?1 = '' OR team = ?1 ORDER BY id DESC "
                                     "LIMIT ?2");
  st.bind(1, team).bind(2, limit);
  std::vector<JobInfo> out;
  while (st.step()) out.push_back(read_job(st));
  return out;
}

std::optional<std::string> JobStore::report(std::int64_t id) {
  const std::lock_guard lock(mutex_);
  Statement st = impl_->conn.prepare("SELECT report_json FROM jobs WHERE id = ?1");
  st.bind(1, id);
  if (!st.step() || st.is_null(0)) return std::nullopt;
  return st.text(0);
}

std::optional<std::pair<JobInfo, std::map<std::string, std::string>>> JobStore::claim(
    const std::string& device) {
  const std::lock_guard lock(mutex_);
  const auto changed_on_return = finally([this] { changed(); });
  return write(impl_->conn,
               [&]() -> std::optional<std::pair<JobInfo, std::map<std::string, std::string>>> {
                 std::int64_t id = 0;
                 {
                   Statement st = impl_->conn.prepare(
                       "SELECT id FROM jobs WHERE state = 'queued' AND device = ?1 "
                       "ORDER BY id LIMIT 1");
                   st.bind(1, device);
                   if (!st.step()) return std::nullopt;
                   id = st.int64(0);
                 }
                 {
                   Statement st = impl_->conn.prepare(
                       std::string("UPDATE jobs SET state = 'running', attempts = attempts + 1, "
                                   "started_at = ") +
                       kNow + " WHERE id = ?1");
                   st.bind(1, id);
                   st.run();
                 }
                 Statement st = impl_->conn.prepare(std::string("SELECT ") + kColumns +
                                                    ", files_json FROM jobs WHERE id = ?1");
                 st.bind(1, id);
                 st.step();
                 std::map<std::string, std::string> files;
                 const auto j = nlohmann::json::parse(st.text("files_json"), nullptr, false);
                 if (j.is_object()) {
                   for (const auto& [path, content] : j.items()) {
                     if (content.is_string()) files[path] = content.get<std::string>();
                   }
                 }
                 return std::make_pair(read_job(st), files);
               });
}

void JobStore::append_output(std::int64_t id, const std::string& text) {
  if (text.empty()) return;
  {
    const std::lock_guard lock(mutex_);
    write(impl_->conn, [&] {
      append_locked(impl_->conn, id, text);
      return 0;
    });
  }
  changed();
}

OutputSlice JobStore::output(std::int64_t id, std::int64_t from) {
  const std::lock_guard lock(mutex_);
  Statement st = impl_->conn.prepare(
      "SELECT start, chunk FROM job_output WHERE job_id = ?1 "
      "AND start + length(CAST(chunk AS BLOB)) > ?2 ORDER BY start");
  st.bind(1, id).bind(2, from);
  OutputSlice out;
  out.next = std::max<std::int64_t>(from, 0);
  while (st.step()) {
    const std::int64_t start = st.int64(0);
    std::string chunk = st.text(1);
    if (start < out.next) chunk.erase(0, static_cast<std::size_t>(out.next - start));
    out.text += chunk;
    out.next = start + static_cast<std::int64_t>(st.text(1).size());
  }
  return out;
}

void JobStore::finish(std::int64_t id, const std::string& state, std::optional<int> exit_code,
                      const std::string& error, const std::optional<std::string>& report_json) {
  const std::lock_guard lock(mutex_);
  const auto changed_on_return = finally([this] { changed(); });
  write(impl_->conn, [&] {
    Statement st = impl_->conn.prepare(
        std::string("UPDATE jobs SET state = ?2, exit_code = ?3, error = ?4, report_json = ?5, "
                    "finished_at = ") +
        kNow + " WHERE id = ?1");
    st.bind(1, id).bind(2, state).bind(3, exit_code ? std::optional<std::int64_t>(*exit_code)
                                                    : std::nullopt);
    st.bind(4, error).bind(5, report_json);
    st.run();
    // The run a grade job recorded: the one its report names. A check or run job records none.
    if (const auto rid = report_json ? grader::report_id(*report_json) : std::nullopt) {
      Statement link = impl_->conn.prepare(
          "UPDATE jobs SET run_id = (SELECT r.id FROM runs r WHERE r.report_id = ?2 "
          "AND r.team = jobs.team AND r.milestone = jobs.milestone) "
          "WHERE id = ?1 AND command = 'grade'");
      link.bind(1, id).bind(2, *rid);
      link.run();
    }
    return 0;
  });
}

void JobStore::requeue(std::int64_t id, const std::string& note, bool counted) {
  const std::lock_guard lock(mutex_);
  write(impl_->conn, [&] {
    append_locked(impl_->conn, id, note);
    Statement st = impl_->conn.prepare(
        "UPDATE jobs SET state = 'queued', started_at = NULL, attempts = attempts - ?2 "
        "WHERE id = ?1 AND state = 'running'");
    st.bind(1, id).bind(2, static_cast<std::int64_t>(counted ? 0 : 1));
    st.run();
    return 0;
  });
}

int JobStore::recover_interrupted() {
  const std::lock_guard lock(mutex_);
  const auto changed_on_return = finally([this] { changed(); });
  return write(impl_->conn, [&] {
    struct Running {
      std::int64_t id;
      int attempts;
      bool cancelled;
    };
    std::vector<Running> running;
    {
      Statement st = impl_->conn.prepare(
          "SELECT id, attempts, cancel_requested FROM jobs WHERE state = 'running'");
      while (st.step()) {
        running.push_back({st.int64(0), static_cast<int>(st.int64(1)), st.int64(2) != 0});
      }
    }
    for (const auto& [id, attempts, cancelled] : running) {
      // A job the team cancelled is not run again.
      const bool again = attempts < kMaxAttempts && !cancelled;
      const std::string why = cancelled ? "cancelled" : "interrupted by restarts";
      append_locked(
          impl_->conn, id,
          cancelled ? std::string("\n[convlab serve] the server stopped while this job "
                                  "was being cancelled; it stays cancelled\n")
          : again   ? "\n[convlab serve] the server stopped while this job ran; it is "
                      "queued again (attempt " +
                        std::to_string(attempts + 1) + " of " + std::to_string(kMaxAttempts) + ")\n"
                  : "\n[convlab serve] the server stopped while this job ran; it was "
                    "started " +
                        std::to_string(attempts) + " times, the most a job gets: submit it anew\n");
      Statement st = impl_->conn.prepare(
          again ? std::string("UPDATE jobs SET state = 'queued', started_at = NULL WHERE id = ?1")
                : std::string("UPDATE jobs SET state = 'failed', error = ?2, finished_at = ") +
                      kNow + " WHERE id = ?1");
      st.bind(1, id);
      if (!again) st.bind(2, why);
      st.run();
    }
    return static_cast<int>(running.size());
  });
}

std::map<std::string, std::int64_t> JobStore::counted_jobs(const std::string& team) {
  const std::lock_guard lock(mutex_);
  Statement st = impl_->conn.prepare(
      "SELECT milestone, max(id) FROM jobs WHERE team = ?1 AND command = 'grade' "
      "AND run_id IS NOT NULL GROUP BY milestone");
  st.bind(1, team);
  std::map<std::string, std::int64_t> out;
  while (st.step()) out[st.text(0)] = st.int64(1);
  return out;
}

void JobStore::set_extension(const std::string& team, const std::string& milestone,
                             const std::string& deadline, const std::string& granted_by) {
  const std::lock_guard lock(mutex_);
  write(impl_->conn, [&] {
    Statement st = impl_->conn.prepare(
        std::string("INSERT INTO service_extensions (team, milestone, deadline, granted_by) "
                    "VALUES (?1, ?2, ?3, ?4) ON CONFLICT (team, milestone) DO UPDATE SET "
                    "deadline = ?3, granted_by = ?4, granted_at = ") +
        kNow);
    st.bind(1, team).bind(2, milestone).bind(3, deadline).bind(4, granted_by);
    st.run();
    return 0;
  });
}

std::map<std::string, std::string> JobStore::extensions(const std::string& team) {
  const std::lock_guard lock(mutex_);
  Statement st =
      impl_->conn.prepare("SELECT milestone, deadline FROM service_extensions WHERE team = ?1");
  st.bind(1, team);
  std::map<std::string, std::string> out;
  while (st.step()) out[st.text(0)] = st.text(1);
  return out;
}

void JobStore::changed() {
  {
    const std::lock_guard lock(change_mutex_);
    ++generation_;
  }
  change_.notify_all();
}

std::uint64_t JobStore::generation() {
  const std::lock_guard lock(change_mutex_);
  return generation_;
}

std::uint64_t JobStore::wait_for_change(std::uint64_t seen, std::chrono::milliseconds timeout) {
  std::unique_lock lock(change_mutex_);
  change_.wait_for(lock, timeout, [&] { return generation_ != seen; });
  return generation_;
}

std::string JobStore::cancel(std::int64_t id) {
  const std::lock_guard lock(mutex_);
  const auto changed_on_return = finally([this] { changed(); });
  return write(impl_->conn, [&]() -> std::string {
    std::string state;
    {
      Statement st = impl_->conn.prepare("SELECT state FROM jobs WHERE id = ?1");
      st.bind(1, id);
      if (!st.step()) return "";
      state = st.text(0);
    }
    if (state == "queued") {
      append_locked(impl_->conn, id, "[convlab serve] cancelled by the team before it started\n");
      Statement st = impl_->conn.prepare(
          std::string("UPDATE jobs SET state = 'failed', error = 'cancelled', finished_at = ") +
          kNow + " WHERE id = ?1");
      st.bind(1, id);
      st.run();
      return "cancelled";
    }
    if (state == "running") {
      Statement st = impl_->conn.prepare("UPDATE jobs SET cancel_requested = 1 WHERE id = ?1");
      st.bind(1, id);
      st.run();
      return "cancelling";
    }
    return state;
  });
}

bool JobStore::cancel_requested(std::int64_t id) {
  const std::lock_guard lock(mutex_);
  Statement st = impl_->conn.prepare("SELECT cancel_requested FROM jobs WHERE id = ?1");
  st.bind(1, id);
  return st.step() && st.int64(0) != 0;
}

}  // namespace convlab::service
