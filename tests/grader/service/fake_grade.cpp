// A stand-in for `convlab grade` that the service's tests run through `convlab serve
// --grade-program`, so that a test of the service takes seconds where a real grade takes
// minutes. It takes the grade's arguments and reads what to do from "fake:" lines in the team's
// uploaded files:
//   fake: op_ms=2.5                  the ranked Op Time (no op_ms: the check fails)
//   fake: lines=20 interval_ms=100   print that many lines, each with the time it was written
//   fake: sleep_s=60                 print its process id, then sleep (to be cancelled)
//   fake: delay_ms=500               wait before writing the report
//   fake: say=WORD                   print WORD (a secret the isolation tests look for)
// It prints like a grade, writes report.json and, for a whole grade with --db, records the run.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <thread>

#include "grader/db/results_db.hpp"
#include "grader/grade/report.hpp"
#include "reference/core/files.hpp"

namespace fs = std::filesystem;
using namespace convlab::grader;

namespace {

std::map<std::string, std::string> directives(const fs::path& submission) {
  std::map<std::string, std::string> out;
  for (const auto& entry : fs::recursive_directory_iterator(submission)) {
    if (!entry.is_regular_file()) continue;
    std::ifstream in(entry.path());
    for (std::string line; std::getline(in, line);) {
      const auto at = line.find("fake:");
      if (at == std::string::npos) continue;
      std::istringstream words(line.substr(at + 5));
      for (std::string w; words >> w;) {
        const auto eq = w.find('=');
        if (eq != std::string::npos) out[w.substr(0, eq)] = w.substr(eq + 1);
      }
    }
  }
  return out;
}

long long realtime_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3 || std::string(argv[1]) != "grade") {
    std::fprintf(stderr, "usage: fake_grade grade SUBMISSION --team T --milestone M --out DIR\n");
    return 2;
  }
  const fs::path submission = argv[2];
  std::map<std::string, std::string> opt;
  bool only = false;
  for (int i = 3; i + 1 < argc; ++i) {
    const std::string key = argv[i];
    if (key == "--only") only = true;
    if (key.starts_with("--") && !std::string(argv[i + 1]).starts_with("--")) {
      opt[key] = argv[++i];
    }
  }
  const auto what = directives(submission);
  const auto number = [&](const char* key, double fallback) {
    const auto it = what.find(key);
    return it == what.end() ? fallback : std::stod(it->second);
  };

  std::printf("grading %s, milestone %s (stand-in grader)\n", opt["--team"].c_str(),
              opt["--milestone"].c_str());
  if (what.contains("say")) std::printf("%s\n", what.at("say").c_str());
  std::fflush(stdout);
  const int lines = static_cast<int>(number("lines", 0));
  const auto interval = std::chrono::milliseconds(static_cast<int>(number("interval_ms", 100)));
  for (int i = 1; i <= lines; ++i) {
    std::printf("line %d of %d at %lld\n", i, lines, realtime_ns());
    std::fflush(stdout);
    if (i < lines) std::this_thread::sleep_for(interval);
  }
  if (const double s = number("sleep_s", 0); s > 0) {
    std::printf("pid %d sleeping\n", static_cast<int>(getpid()));
    std::fflush(stdout);
    std::this_thread::sleep_for(std::chrono::duration<double>(s));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(static_cast<int>(number("delay_ms", 0))));

  GradeResult r;
  r.team = opt["--team"];
  r.milestone = opt["--milestone"];
  r.submission = fs::absolute(submission).string();
  r.started_at = convlab::utc_now();
  r.seed = static_cast<std::uint64_t>(realtime_ns()) ^ static_cast<std::uint64_t>(getpid());
  r.ranked_variant = "cpu";
  r.ranked_model = "ece408-high";
  r.ranked_images = 10000;
  r.partial = only;
  CheckResult c;
  c.id = "network/cpu/ece408-high/10000";
  c.name = "cpu: ece408-high, 10000 images";
  c.kind = "network";
  c.milestone = r.milestone;
  c.variant = "cpu";
  c.model = "ece408-high";
  c.images = 10000;
  c.max_score = 10;
  if (what.contains("op_ms")) {
    c.status = CheckStatus::passed;
    c.score = 10;
    c.op_time_s = number("op_ms", 0) * 1e-3;
    c.reference_time_s = 1e-3;
    r.op_time_s = c.op_time_s;
    r.reference_time_s = c.reference_time_s;
    r.speedup = *r.reference_time_s / *r.op_time_s;
  } else {
    c.reason = "wrong_count";
    c.output = "8000 correct, 8562 expected";
  }
  r.checks.push_back(c);
  r.score = c.score;
  r.max_score = c.max_score;
  write_reports(r, opt["--out"]);
  if (opt.contains("--db") && !only) {
    ResultsDb db(opt["--db"]);
    std::printf("recorded as run %lld\n", static_cast<long long>(db.record(r, report_json(r))));
  }
  std::printf("Total: %g / %g points\n", r.score, r.max_score);
  return 0;
}
