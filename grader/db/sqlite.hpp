/// @file
/// @brief A small RAII layer over the SQLite C API: a connection, a prepared statement, an
/// immediate transaction, and a retry loop for SQLITE_BUSY. Only the results database uses it.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "reference/core/error.hpp"

struct sqlite3;
struct sqlite3_stmt;

namespace convlab::grader::sqlite {

/// An SQLite failure; `code()` is the primary result code (SQLITE_BUSY, SQLITE_NOTADB...).
class SqliteError : public Error {
 public:
  /// `message` already names the file and what to do; `code` is SQLite's result code.
  SqliteError(const std::string& message, int code) : Error(message), code_(code) {}
  /// The primary SQLite result code (extended code & 0xff).
  int code() const { return code_; }
  /// True for SQLITE_BUSY and SQLITE_LOCKED: another connection holds the lock; retrying helps.
  bool busy() const;

 private:
  int code_;
};

class Statement;

/// One open database file. Not shared between threads; each process opens its own.
class Connection {
 public:
  /// Opens `file` read-write, creating it when `create`. Throws SqliteError on failure.
  Connection(const std::filesystem::path& file, bool create);
  ~Connection();
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  /// Runs one or more statements that return no rows.
  void exec(std::string_view sql);
  /// Compiles one statement.
  Statement prepare(std::string_view sql);
  /// The rowid of the last INSERT on this connection.
  std::int64_t last_insert_rowid() const;
  /// How long SQLite itself waits on a locked database before returning SQLITE_BUSY.
  void set_busy_timeout(std::chrono::milliseconds timeout);
  /// The file this connection opened.
  const std::filesystem::path& file() const { return file_; }
  /// The raw handle, for the statement class.
  sqlite3* handle() const { return db_; }

  /// Throws SqliteError for result code `rc` with `what` and SQLite's message for this file.
  [[noreturn]] void fail(int rc, std::string_view what) const;

 private:
  sqlite3* db_ = nullptr;
  std::filesystem::path file_;
};

/// A prepared statement; bind parameters (1-based), step through rows, read columns (0-based).
class Statement {
 public:
  /// Compiles `sql` on `conn`.
  Statement(Connection& conn, std::string_view sql);
  ~Statement();
  /// Takes over `other`'s compiled statement.
  Statement(Statement&& other) noexcept;
  Statement& operator=(Statement&&) = delete;
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;

  /// Binds a 64-bit integer to parameter `i`.
  Statement& bind(int i, std::int64_t v);
  /// Binds an int to parameter `i`.
  Statement& bind(int i, int v) { return bind(i, static_cast<std::int64_t>(v)); }
  /// Binds a bool (stored as 0 or 1) to parameter `i`.
  Statement& bind(int i, bool v) { return bind(i, static_cast<std::int64_t>(v ? 1 : 0)); }
  /// Binds a double to parameter `i`.
  Statement& bind(int i, double v);
  /// Binds text (copied) to parameter `i`.
  Statement& bind(int i, std::string_view v);
  /// Binds text (copied) to parameter `i`.
  Statement& bind(int i, const char* v) { return bind(i, std::string_view(v)); }
  /// Binds text (copied) to parameter `i`.
  Statement& bind(int i, const std::string& v) { return bind(i, std::string_view(v)); }
  /// Binds the value or NULL to parameter `i`.
  template <typename T>
  Statement& bind(int i, const std::optional<T>& v) {
    return v ? bind(i, *v) : bind_null(i);
  }
  /// Binds NULL to parameter `i`.
  Statement& bind_null(int i);

  /// Advances; true while a row is available, false when done. Throws on error.
  bool step();
  /// Runs a statement that returns no row (INSERT, UPDATE...).
  void run();
  /// Makes the statement runnable again with new bindings.
  void reset();

  /// Column `i` of the current row as an integer (0 for NULL).
  std::int64_t int64(int i) const;
  /// Column `i` as a double (0 for NULL).
  double real(int i) const;
  /// Column `i` as text ("" for NULL).
  std::string text(int i) const;
  /// True when column `i` is NULL.
  bool is_null(int i) const;
  /// Column `i` as a double, nullopt for NULL.
  std::optional<double> optional_real(int i) const;
  /// Column `i` as an integer, nullopt for NULL.
  std::optional<std::int64_t> optional_int64(int i) const;

  /// The index of the result column named `name`; throws Error when the statement has none.
  int column(std::string_view name) const;
  /// The same reads by column name.
  std::int64_t int64(std::string_view name) const { return int64(column(name)); }
  double real(std::string_view name) const { return real(column(name)); }
  std::string text(std::string_view name) const { return text(column(name)); }
  bool is_null(std::string_view name) const { return is_null(column(name)); }
  std::optional<double> optional_real(std::string_view name) const {
    return optional_real(column(name));
  }
  std::optional<std::int64_t> optional_int64(std::string_view name) const {
    return optional_int64(column(name));
  }

 private:
  Connection* conn_;
  sqlite3_stmt* stmt_ = nullptr;
};

/// An INSERT of one row, built column by column: each value is bound next to its column's name,
/// so that the two cannot drift apart.
class Insert {
 public:
  /// A row of `table`.
  explicit Insert(std::string table) : table_(std::move(table)) {}
  /// Sets `column` to `value` (anything Statement::bind takes).
  template <typename T>
  Insert& set(std::string column, T value) {
    columns_.push_back(std::move(column));
    binders_.push_back([v = std::move(value)](Statement& s, int i) { s.bind(i, v); });
    return *this;
  }
  /// Runs the INSERT on `conn`; returns the new row's rowid.
  std::int64_t run(Connection& conn) const;

 private:
  std::string table_;
  std::vector<std::string> columns_;
  std::vector<std::function<void(Statement&, int)>> binders_;
};

/// BEGIN IMMEDIATE on construction (takes the write lock now, so a later write cannot fail
/// half-way with SQLITE_BUSY); ROLLBACK on destruction unless commit() ran.
class Transaction {
 public:
  /// Begins an immediate transaction on `conn`.
  explicit Transaction(Connection& conn);
  ~Transaction();
  Transaction(const Transaction&) = delete;
  Transaction& operator=(const Transaction&) = delete;
  /// Commits; the destructor then does nothing.
  void commit();

 private:
  Connection& conn_;
  bool open_ = true;
};

/// Runs `body` (which opens its own Transaction) again with exponential backoff and jitter
/// while it fails with SQLITE_BUSY or SQLITE_LOCKED, for up to `patience` in all; then
/// throws an Error that names the file and says what to do.
template <typename Body>
auto with_busy_retry(Connection& conn, std::chrono::milliseconds patience, Body&& body)
    -> decltype(body());

/// Sleeps before retry number `attempt` (0-based): 5 ms doubling up to 500 ms, with jitter
/// so that graders that collided once do not collide again.
void backoff_sleep(int attempt);

template <typename Body>
auto with_busy_retry(Connection& conn, std::chrono::milliseconds patience, Body&& body)
    -> decltype(body()) {
  const auto deadline = std::chrono::steady_clock::now() + patience;
  for (int attempt = 0;; ++attempt) {
    try {
      return body();
    } catch (const SqliteError& e) {
      if (!e.busy()) throw;
      if (std::chrono::steady_clock::now() >= deadline) {
        throw Error("the results database " + conn.file().string() + " stayed locked for " +
                    std::to_string(patience.count() / 1000) +
                    " s by another process; check that no program holds it open in a "
                    "transaction (an open sqlite3 shell?) and run again");
      }
      backoff_sleep(attempt);
    }
  }
}

}  // namespace convlab::grader::sqlite
