/// @file
/// @brief Small helpers of the class-grading tests: files, and a results database as text.
#pragma once

#include <doctest/doctest.h>
#include <sqlite3.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>
#include <string>

namespace convlab::test {

/// " 'PATH'": one more word of a shell command (the tests' paths hold no quote). Built
/// piecewise: g++ 12 warns (-Wrestrict, wrongly) on "'" + string + "'".
inline std::string quoted(const std::filesystem::path& p) {
  std::string q = " '";
  q += p.string();
  q += '\'';
  return q;
}

/// The entry of team `name` in grade-all's summary.json; the test fails where there is none.
inline const nlohmann::json& team_of(const nlohmann::json& summary, const std::string& name) {
  for (const nlohmann::json& t : summary["teams"]) {
    if (t["team"] == name) return t;
  }
  FAIL("team " << name << " missing from summary.json");
  static const nlohmann::json none;
  return none;
}

inline std::string read_text(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

inline void write_text(const std::filesystem::path& p, const std::string& text) {
  std::filesystem::create_directories(p.parent_path());
  std::ofstream(p) << text;
}

/// The rows of `sql` in the database `db`, one line each, columns quoted and separated by '|'.
inline std::string query_text(const std::filesystem::path& db, const std::string& sql) {
  sqlite3* c = nullptr;
  if (sqlite3_open_v2(db.c_str(), &c, SQLITE_OPEN_READONLY, nullptr) != SQLITE_OK) {
    sqlite3_close(c);
    throw std::runtime_error("cannot open " + db.string());
  }
  sqlite3_stmt* st = nullptr;
  std::string text;
  if (sqlite3_prepare_v2(c, sql.c_str(), -1, &st, nullptr) == SQLITE_OK) {
    while (sqlite3_step(st) == SQLITE_ROW) {
      for (int i = 0; i < sqlite3_column_count(st); ++i) {
        const unsigned char* v = sqlite3_column_text(st, i);
        if (v != nullptr) {
          text += '\'';
          text += reinterpret_cast<const char*>(v);
          text += '\'';
        } else {
          text += "NULL";
        }
        text += '|';
      }
      text += '\n';
    }
  } else {
    text = std::string("error: ") + sqlite3_errmsg(c);
  }
  sqlite3_finalize(st);
  sqlite3_close(c);
  return text;
}

/// Every column of every run and check: two databases with the same dump hold the same grades.
inline std::string dump_db(const std::filesystem::path& db) {
  return query_text(db, "SELECT * FROM runs ORDER BY id") +
         query_text(db, "SELECT * FROM checks ORDER BY id");
}

}  // namespace convlab::test
