#include "grader/db/sqlite.hpp"

#include <sqlite3.h>

#include <algorithm>
#include <random>
#include <thread>

namespace convlab::grader::sqlite {

bool SqliteError::busy() const {
  return code_ == SQLITE_BUSY || code_ == SQLITE_LOCKED;
}

Connection::Connection(const std::filesystem::path& file, bool create) : file_(file) {
  const int flags = SQLITE_OPEN_READWRITE | (create ? SQLITE_OPEN_CREATE : 0);
  const int rc = sqlite3_open_v2(file.c_str(), &db_, flags, nullptr);
  if (rc != SQLITE_OK) {
    const std::string msg = db_ != nullptr ? sqlite3_errmsg(db_) : sqlite3_errstr(rc);
    sqlite3_close(db_);
    db_ = nullptr;
    throw SqliteError("cannot open the results database " + file.string() + ": " + msg +
                          "; check the path and that its directory is writable",
                      rc & 0xff);
  }
  // Extended codes tell SQLITE_BUSY_SNAPSHOT and friends apart in messages; code() masks them.
  sqlite3_extended_result_codes(db_, 1);
}

Connection::~Connection() {
  // Statements and transactions are RAII objects that die first; close_v2 is safe regardless.
  sqlite3_close_v2(db_);
}

void Connection::fail(int rc, std::string_view what) const {
  throw SqliteError(
      "results database " + file_.string() + ": " + std::string(what) + ": " + sqlite3_errmsg(db_),
      rc & 0xff);
}

void Connection::exec(std::string_view sql) {
  const std::string s(sql);
  char* err = nullptr;
  const int rc = sqlite3_exec(db_, s.c_str(), nullptr, nullptr, &err);
  if (rc != SQLITE_OK) {
    const std::string msg = err != nullptr ? err : sqlite3_errstr(rc);
    sqlite3_free(err);
    throw SqliteError("results database " + file_.string() + ": " + msg, rc & 0xff);
  }
}

Statement Connection::prepare(std::string_view sql) {
  return Statement(*this, sql);
}

std::int64_t Connection::last_insert_rowid() const {
  return sqlite3_last_insert_rowid(db_);
}

void Connection::set_busy_timeout(std::chrono::milliseconds timeout) {
  sqlite3_busy_timeout(db_, static_cast<int>(timeout.count()));
}

Statement::Statement(Connection& conn, std::string_view sql) : conn_(&conn) {
  const int rc =
      sqlite3_prepare_v2(conn.handle(), sql.data(), static_cast<int>(sql.size()), &stmt_, nullptr);
  if (rc != SQLITE_OK) conn.fail(rc, "cannot prepare '" + std::string(sql.substr(0, 60)) + "'");
}

Statement::Statement(Statement&& other) noexcept : conn_(other.conn_), stmt_(other.stmt_) {
  other.stmt_ = nullptr;
}

Statement::~Statement() {
  sqlite3_finalize(stmt_);
}

Statement& Statement::bind(int i, std::int64_t v) {
  const int rc = sqlite3_bind_int64(stmt_, i, v);
  if (rc != SQLITE_OK) conn_->fail(rc, "bind");
  return *this;
}

Statement& Statement::bind(int i, double v) {
  const int rc = sqlite3_bind_double(stmt_, i, v);
  if (rc != SQLITE_OK) conn_->fail(rc, "bind");
  return *this;
}

Statement& Statement::bind(int i, std::string_view v) {
  const int rc = sqlite3_bind_text64(stmt_, i, v.data(), v.size(), SQLITE_TRANSIENT, SQLITE_UTF8);
  if (rc != SQLITE_OK) conn_->fail(rc, "bind");
  return *this;
}

Statement& Statement::bind_null(int i) {
  const int rc = sqlite3_bind_null(stmt_, i);
  if (rc != SQLITE_OK) conn_->fail(rc, "bind");
  return *this;
}

bool Statement::step() {
  const int rc = sqlite3_step(stmt_);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  const std::string msg = "results database " + conn_->file().string() + ": cannot run '" +
                          std::string(sqlite3_sql(stmt_)).substr(0, 60) +
                          "': " + sqlite3_errmsg(conn_->handle());
  // Leave the statement reusable after a busy error, so a retried transaction can step again.
  sqlite3_reset(stmt_);
  throw SqliteError(msg, rc & 0xff);
}

void Statement::run() {
  while (step()) {
  }
}

void Statement::reset() {
  sqlite3_reset(stmt_);
  sqlite3_clear_bindings(stmt_);
}

std::int64_t Statement::int64(int i) const {
  return sqlite3_column_int64(stmt_, i);
}

double Statement::real(int i) const {
  return sqlite3_column_double(stmt_, i);
}

std::string Statement::text(int i) const {
  const auto* p = sqlite3_column_text(stmt_, i);
  if (p == nullptr) return {};
  return std::string(reinterpret_cast<const char*>(p),
                     static_cast<std::size_t>(sqlite3_column_bytes(stmt_, i)));
}

bool Statement::is_null(int i) const {
  return sqlite3_column_type(stmt_, i) == SQLITE_NULL;
}

std::optional<double> Statement::optional_real(int i) const {
  if (is_null(i)) return std::nullopt;
  return real(i);
}

std::optional<std::int64_t> Statement::optional_int64(int i) const {
  if (is_null(i)) return std::nullopt;
  return int64(i);
}

int Statement::column(std::string_view name) const {
  const int n = sqlite3_column_count(stmt_);
  for (int i = 0; i < n; ++i) {
    const char* c = sqlite3_column_name(stmt_, i);
    if (c != nullptr && name == c) return i;
  }
  throw Error("the statement has no column '" + std::string(name) + "'");
}

std::int64_t Insert::run(Connection& conn) const {
  std::string sql = "INSERT INTO " + table_ + " (";
  std::string values = "VALUES (";
  for (std::size_t i = 0; i < columns_.size(); ++i) {
    sql += (i > 0 ? ", " : "") + columns_[i];
    values += (i > 0 ? ", ?" : "?") + std::to_string(i + 1);
  }
  Statement st = conn.prepare(sql + ") " + values + ")");
  for (std::size_t i = 0; i < binders_.size(); ++i) binders_[i](st, static_cast<int>(i) + 1);
  st.run();
  return conn.last_insert_rowid();
}

Transaction::Transaction(Connection& conn) : conn_(conn) {
  conn_.exec("BEGIN IMMEDIATE");
}

Transaction::~Transaction() {
  if (!open_) return;
  // A failed COMMIT or an exception in the body: undo everything. ROLLBACK on a connection
  // whose transaction SQLite already ended is an error we do not need to report.
  sqlite3_exec(conn_.handle(), "ROLLBACK", nullptr, nullptr, nullptr);
}

void Transaction::commit() {
  conn_.exec("COMMIT");
  open_ = false;
}

void backoff_sleep(int attempt) {
  thread_local std::minstd_rand rng{std::random_device{}()};
  const int base_ms = std::min(500, 5 << std::min(attempt, 7));
  std::uniform_int_distribution<int> jitter(base_ms / 2, base_ms);
  std::this_thread::sleep_for(std::chrono::milliseconds(jitter(rng)));
}

}  // namespace convlab::grader::sqlite
