// A job's output streamed to the client as it is written, for real: a `convlab serve` on
// loopback and `convlab submit` clients. The jobs run the stand-in grader (fake_grade.cpp),
// which prints lines stamped with the time they were written, so that the test measures the
// latency from a line written to the client printing it.
#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "tests/grader/service/fake_class.hpp"

namespace test_service_stream {

using namespace convlab::test;
using nlohmann::json;

namespace {

long long realtime_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// One line a command printed, and when it arrived here.
struct TimedLine {
  std::string text;
  long long at_ns = 0;
};

// Runs `command` (stdout and stderr together), stamping each line as it arrives.
std::vector<TimedLine> timed_lines(const std::string& command, int* rc) {
  FILE* pipe = popen((command + " 2>&1").c_str(), "r");
  REQUIRE(pipe != nullptr);
  std::vector<TimedLine> lines;
  std::string line;
  for (int c; (c = std::fgetc(pipe)) != EOF;) {
    line += static_cast<char>(c);
    if (c == '\n') {
      lines.push_back({line, realtime_ns()});
      line.clear();
    }
  }
  const int status = pclose(pipe);
  *rc = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return lines;
}

// The events of a stream's body, one JSON object a line.
std::vector<json> events(const std::string& body) {
  std::vector<json> out;
  std::size_t at = 0;
  for (std::size_t nl; (nl = body.find('\n', at)) != std::string::npos; at = nl + 1) {
    out.push_back(json::parse(body.substr(at, nl - at)));
  }
  return out;
}

}  // namespace

TEST_CASE("output is streamed as it is written: latency from a line written to it printed") {
  FakeClass c;
  ServeProcess server(c.dir, c.options({"--cpu-jobs", "1"}));
  c.login(server, "alpha");
  constexpr int kLines = 20;
  c.code("alpha", "op_ms=2 lines=" + std::to_string(kLines) + " interval_ms=100");
  int rc = -1;
  const auto lines =
      timed_lines(submit_line(c.home("alpha"), c.checkout("alpha"), "check m2"), &rc);
  std::string all;
  for (const TimedLine& l : lines) all += l.text;
  INFO(all);
  CHECK(rc == 0);

  std::vector<long long> written, printed;
  for (const TimedLine& l : lines) {
    int i = 0, n = 0;
    long long at = 0;
    if (std::sscanf(l.text.c_str(), "line %d of %d at %lld", &i, &n, &at) != 3) continue;
    CHECK(i == static_cast<int>(written.size()) + 1);  // each line once, in order
    written.push_back(at);
    printed.push_back(l.at_ns);
  }
  REQUIRE(written.size() == kLines);
  // Streamed: the first line was printed here before the last was written there.
  CHECK(printed.front() < written.back());
  std::vector<double> latency_ms;
  for (std::size_t i = 0; i < written.size(); ++i) {
    latency_ms.push_back(static_cast<double>(printed[i] - written[i]) / 1e6);
  }
  std::sort(latency_ms.begin(), latency_ms.end());
  const double median = latency_ms[latency_ms.size() / 2];
  const double p90 = latency_ms[latency_ms.size() * 9 / 10];
  MESSAGE("line written -> printed by convlab submit, "
          << kLines << " lines 100 ms apart: median " << median << " ms, p90 " << p90 << " ms, max "
          << latency_ms.back() << " ms");
  CHECK(latency_ms.front() >= 0.0);
  CHECK(median < 1000.0);
}

TEST_CASE("a stream resumes from an offset, says the place in the queue, and ends with the job") {
  FakeClass c;
  ServeProcess server(c.dir, c.options({"--cpu-jobs", "1", "--max-in-flight", "3"}));
  c.login(server, "alpha");
  std::string out;
  c.code("alpha", "op_ms=2 lines=3 interval_ms=10");
  REQUIRE(c.client("alpha", "check m2", &out) == 0);  // job 1, followed to its end

  httplib::Client http(server.url());
  const auto token = bearer(c.token("alpha"));
  const std::string whole = http.Get("/api/v1/jobs/1/output", token)->body;
  REQUIRE(whole.size() > 100);
  const auto resumed = http.Get("/api/v1/jobs/1/stream?from=40", token);
  REQUIRE(resumed);
  CHECK(resumed->status == 200);
  CHECK(resumed->get_header_value("Content-Type") == "application/x-ndjson");
  const auto e = events(resumed->body);
  REQUIRE(e.size() >= 3);
  CHECK(e.front() == json{{"state", "done"}});
  std::string text;
  for (const json& event : e) {
    if (event.contains("output")) text += event["output"].get<std::string>();
  }
  CHECK(text == whole.substr(40));
  CHECK(e.back()["end"] == true);
  CHECK(e.back()["exit_code"] == 0);
  CHECK(e[e.size() - 2]["next"] == whole.size());
  // The polling endpoint stays, for clients that cannot stream.
  CHECK(http.Get("/api/v1/jobs/1/output?from=40", token)->body == whole.substr(40));

  // A job waiting behind another hears its place first.
  c.code("alpha", "op_ms=2 sleep_s=30");
  REQUIRE(c.client("alpha", "check m2 --no-wait", &out) == 0);  // job 2: runs, sleeps
  REQUIRE(c.client("alpha", "check m2 --no-wait", &out) == 0);  // job 3: waits
  std::string first;
  http.Get("/api/v1/jobs/3/stream", token, [&](const char* data, std::size_t n) {
    first.append(data, n);
    return first.find('\n') == std::string::npos;  // stop after the first event
  });
  CHECK(json::parse(first.substr(0, first.find('\n'))) ==
        json{{"state", "queued"}, {"position", 1}});
}

TEST_CASE("a team with too many streams open is told so; the client then asks again and again") {
  FakeClass c;
  ServeProcess server(c.dir, c.options({"--cpu-jobs", "1"}));
  c.login(server, "alpha");
  std::string out;
  c.code("alpha", "op_ms=2 lines=30 interval_ms=100");
  REQUIRE(c.client("alpha", "check m2 --no-wait", &out) == 0);  // job 1, 3 s long

  // Eight streams of job 1, each open until the job ends.
  constexpr int kOpen = 8;
  std::atomic<int> started{0};
  std::vector<std::thread> streams;
  for (int i = 0; i < kOpen; ++i) {
    streams.emplace_back([&] {
      httplib::Client http(server.url());
      http.set_read_timeout(30);
      bool first = true;
      http.Get("/api/v1/jobs/1/stream", bearer(c.token("alpha")), [&](const char*, std::size_t) {
        if (first) ++started;
        first = false;
        return true;
      });
    });
  }
  while (started < kOpen) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  httplib::Client http(server.url());
  const auto busy = http.Get("/api/v1/jobs/1/stream", bearer(c.token("alpha")));
  REQUIRE(busy);
  CHECK(busy->status == 503);
  CHECK(busy->body.find("too many output streams open (8 per team, 112 on the server)") !=
        std::string::npos);
  // The client falls back to the polling endpoint and still prints every line.
  const int rc = c.client("alpha", "output 1", &out);
  for (std::thread& t : streams) t.join();
  INFO(out);
  CHECK(rc == 0);
  CHECK(out.find("asking for the output every 0.4 s instead") != std::string::npos);
  CHECK(out.find("line 30 of 30") != std::string::npos);
  CHECK(out.find("job 1 finished: exit status 0") != std::string::npos);
}

TEST_CASE("a silent job's stream sends a keepalive line every --keepalive seconds") {
  FakeClass c;
  ServeProcess server(c.dir, c.options({"--cpu-jobs", "1", "--keepalive", "1"}));
  c.login(server, "alpha");
  std::string out;
  c.code("alpha", "op_ms=2 delay_ms=3500");  // prints its first lines, then 3.5 s of silence
  REQUIRE(c.client("alpha", "check m2 --no-wait", &out) == 0);

  // A client follows the job live beside the raw stream read here.
  std::string followed;
  std::thread client([&] { c.client("alpha", "output 1", &followed); });
  httplib::Client http(server.url());
  std::string body;
  std::vector<long long> keepalive_ns;
  const auto res = http.Get("/api/v1/jobs/1/stream", bearer(c.token("alpha")),
                            [&](const char* data, std::size_t n) {
                              body.append(data, n);
                              if (std::string(data, n).find("keepalive") != std::string::npos) {
                                keepalive_ns.push_back(realtime_ns());
                              }
                              return true;
                            });
  client.join();
  REQUIRE(res);
  const auto e = events(body);
  INFO(body);
  REQUIRE(!e.empty());
  CHECK(e.back()["end"] == true);
  // About three in 3.5 s of silence, each a second after the last thing sent.
  const auto count = std::count(e.begin(), e.end(), json{{"keepalive", true}});
  CHECK(count >= 2);
  CHECK(count <= 4);
  REQUIRE(keepalive_ns.size() >= 2);
  for (std::size_t i = 1; i < keepalive_ns.size(); ++i) {
    const double gap_s = static_cast<double>(keepalive_ns[i] - keepalive_ns[i - 1]) / 1e9;
    CHECK(gap_s > 0.8);
    CHECK(gap_s < 2.5);
  }
  // The client skips them: it prints the job's output only.
  INFO(followed);
  CHECK(followed.find("grading alpha, milestone m2") != std::string::npos);
  CHECK(followed.find("keepalive") == std::string::npos);
}

}  // namespace test_service_stream
