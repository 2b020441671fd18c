/// @file
/// @brief A real `convlab serve` on loopback for the service's tests: started as a child
/// process on an ephemeral port, with a roster, a database and tokens in a temporary folder;
/// real `convlab submit` clients, each with its own home folder.
#pragma once

#include <doctest/doctest.h>
#include <signal.h>
#include <sqlite3.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "tests/support/test_support.hpp"

namespace convlab::test {

inline std::string shell_quote(const std::string& s) {
  std::string out = "'";
  for (const char c : s) {
    if (c == '\'') {
      out += "'\\''";
    } else {
      out += c;
    }
  }
  return out + "'";
}

inline std::string read_file(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

inline void write_file(const std::filesystem::path& p, const std::string& text) {
  std::filesystem::create_directories(p.parent_path());
  std::ofstream(p, std::ios::binary) << text;
}

/// One `convlab serve` child process. `dir` holds roster.csv, results.sqlite, serve.log.
class ServeProcess {
 public:
  /// `port` 0: an ephemeral one.
  ServeProcess(const std::filesystem::path& dir, const std::vector<std::string>& extra,
               int port = 0)
      : dir_(dir) {
    std::filesystem::remove(dir / "port");
    std::vector<std::string> args{convlab_binary().string(),
                                  "serve",
                                  "--roster",
                                  (dir / "roster.csv").string(),
                                  "--db",
                                  (dir / "results.sqlite").string(),
                                  "--port",
                                  std::to_string(port),
                                  "--port-file",
                                  (dir / "port").string(),
                                  "--tokens-out",
                                  (dir / "tokens.csv").string()};
    args.insert(args.end(), extra.begin(), extra.end());
    pid_ = fork();
    if (pid_ == 0) {
      const std::string log = (dir / "serve.log").string();
      FILE* f = std::freopen(log.c_str(), "a", stdout);
      (void)f;
      dup2(STDOUT_FILENO, STDERR_FILENO);
      std::vector<char*> argv;
      for (std::string& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      execv(argv[0], argv.data());
      _exit(127);
    }
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (!std::filesystem::exists(dir / "port")) {
      int status = 0;
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        throw std::runtime_error("convlab serve ended at startup:\n" + log());
      }
      if (std::chrono::steady_clock::now() > deadline) {
        throw std::runtime_error("convlab serve did not start in 30 s:\n" + log());
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    port_ = std::stoi(read_file(dir / "port"));
  }
  ~ServeProcess() { stop(SIGTERM); }
  ServeProcess(const ServeProcess&) = delete;
  ServeProcess& operator=(const ServeProcess&) = delete;

  /// Stops the server with `sig` and returns its exit status (128+signal when killed).
  int stop(int sig) {
    if (pid_ <= 0) return -1;
    kill(pid_, sig);
    int status = 0;
    waitpid(pid_, &status, 0);
    pid_ = -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }
  int port() const { return port_; }
  /// The server's process id (-1 once stopped).
  pid_t pid() const { return pid_; }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  std::string log() const { return read_file(dir_ / "serve.log"); }

 private:
  std::filesystem::path dir_;
  pid_t pid_ = -1;
  int port_ = 0;
};

/// The tokens the server wrote at startup: account -> token.
inline std::map<std::string, std::string> issued_tokens(const std::filesystem::path& dir) {
  std::map<std::string, std::string> out;
  std::stringstream in(read_file(dir / "tokens.csv"));
  for (std::string line; std::getline(in, line);) {
    const auto comma = line.find(',');
    if (comma != std::string::npos) out[line.substr(0, comma)] = line.substr(comma + 1);
  }
  return out;
}

/// The shell line that runs `convlab submit ARGS` as a client whose home is `home`, in `cwd`.
inline std::string submit_line(const std::filesystem::path& home, const std::filesystem::path& cwd,
                               const std::string& args) {
  return "cd " + shell_quote(cwd.string()) + " && HOME=" + shell_quote(home.string()) +
         " XDG_CONFIG_HOME= " + shell_quote(convlab_binary().string()) + " submit " + args;
}

/// Runs `convlab submit ARGS` as above; returns its exit status, its output in `output`.
inline int submit(const std::filesystem::path& home, const std::filesystem::path& cwd,
                  const std::string& args, std::string* output) {
  return run_command(submit_line(home, cwd, args), output);
}

/// Logs the client whose home is `home` in to `server` from `cwd`, as `team` with the token the
/// server issued into `dir`; the login must work.
inline void login_client(const std::filesystem::path& home, const std::filesystem::path& cwd,
                         const ServeProcess& server, const std::filesystem::path& dir,
                         const std::string& team) {
  std::string out;
  const int rc =
      submit(home, cwd,
             "login --server " + server.url() + " --token " + issued_tokens(dir).at(team), &out);
  INFO(out);
  REQUIRE(rc == 0);
  REQUIRE(out.find("as team " + team) != std::string::npos);
}

/// A row of the results database's runs: who was graded on what, and the score.
struct RecordedRun {
  std::string team, milestone;
  double score = 0.0;
  bool operator==(const RecordedRun&) const = default;
};

/// The runs the results database `file` holds, in the order they were recorded.
inline std::vector<RecordedRun> recorded_runs(const std::filesystem::path& file) {
  sqlite3* db = nullptr;
  REQUIRE(sqlite3_open_v2(file.c_str(), &db, SQLITE_OPEN_READONLY, nullptr) == SQLITE_OK);
  sqlite3_stmt* st = nullptr;
  REQUIRE(sqlite3_prepare_v2(db, "SELECT team, milestone, score FROM runs ORDER BY rowid", -1, &st,
                             nullptr) == SQLITE_OK);
  std::vector<RecordedRun> runs;
  while (sqlite3_step(st) == SQLITE_ROW) {
    runs.push_back({reinterpret_cast<const char*>(sqlite3_column_text(st, 0)),
                    reinterpret_cast<const char*>(sqlite3_column_text(st, 1)),
                    sqlite3_column_double(st, 2)});
  }
  sqlite3_finalize(st);
  sqlite3_close(db);
  return runs;
}

/// The staff solution of m2 as a team's file (its namespace renamed).
inline std::string working_m2() {
  std::string text = read_file(source_dir() / "reference/solutions/m2/conv_cpu.cpp");
  for (std::size_t at; (at = text.find("convlab::solution")) != std::string::npos;) {
    text.replace(at, 17, "convlab::student");
  }
  return text;
}

}  // namespace convlab::test
