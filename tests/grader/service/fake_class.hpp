/// @file
/// @brief A class for the service's fast tests: a real `convlab serve` on loopback whose jobs
/// run the stand-in grader (fake_grade.cpp, through --grade-program), two teams and a staff
/// account, each team's checkout holding one m2 file whose "fake:" line says what its grade
/// does, and real `convlab submit` clients.
#pragma once

#include <doctest/doctest.h>
#include <httplib.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tests/grader/service/service_test_support.hpp"

namespace convlab::test {

/// Two teams (alpha, beta) and a staff account (prof).
struct FakeClass {
  TempDir tmp;
  std::filesystem::path dir = tmp.path() / "server";

  FakeClass() {
    write_file(dir / "roster.csv", "team,role\nalpha,team\nbeta,team\nprof,staff\n");
    for (const char* team : {"alpha", "beta"}) code(team, "op_ms=2");
  }
  /// `team`'s home folder (its login) and checkout.
  std::filesystem::path home(const std::string& team) const {
    return tmp.path() / ("home-" + team);
  }
  std::filesystem::path checkout(const std::string& team) const { return tmp.path() / team; }

  /// Writes `team`'s m2 file with the stand-in grader's directives, e.g. "op_ms=2.5".
  void code(const std::string& team, const std::string& fake) const {
    write_file(checkout(team) / "student/m2/conv_cpu.cpp", "// fake: " + fake + "\n");
  }

  /// `convlab serve` with the stand-in grader and `extra` options.
  std::vector<std::string> options(const std::vector<std::string>& extra) const {
    std::vector<std::string> out{"--grade-program", FAKE_GRADE};
    out.insert(out.end(), extra.begin(), extra.end());
    return out;
  }

  /// The token of an account.
  std::string token(const std::string& account) const { return issued_tokens(dir).at(account); }

  /// Logs `team` in to `server`; the login must work.
  void login(const ServeProcess& server, const std::string& team) const {
    login_client(home(team), checkout(team), server, dir, team);
  }

  /// Runs `convlab submit ARGS` as `team`; its output in `out`.
  int client(const std::string& team, const std::string& args, std::string* out) const {
    return submit(home(team), checkout(team), args, out);
  }
};

/// "Authorization: Bearer TOKEN".
inline httplib::Headers bearer(const std::string& token) {
  return {{"Authorization", "Bearer " + token}};
}

/// The "error" of a JSON reply, or "".
inline std::string error_text(const httplib::Result& res) {
  const nlohmann::json j = nlohmann::json::parse(res->body, nullptr, false);
  return j.is_object() ? j.value("error", "") : "";
}

/// Waits until job `id` is done or failed (at most `seconds`); returns its JSON.
inline nlohmann::json wait_job(const ServeProcess& server, const std::string& token,
                               std::int64_t id, int seconds = 30) {
  httplib::Client http(server.url());
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
  nlohmann::json job;
  while (std::chrono::steady_clock::now() < deadline) {
    const auto res = http.Get("/api/v1/jobs/" + std::to_string(id), bearer(token));
    if (res && res->status == 200) {
      job = nlohmann::json::parse(res->body);
      if (job["state"] == "done" || job["state"] == "failed") return job;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  FAIL("job " << id << " did not finish in " << seconds << " s: " << job.dump());
  return job;
}

}  // namespace convlab::test
