// A check's two processes, without the sandbox: the referee (convlab-check) and the team's
// process, either this build's convlab-team (linked with this tree's student/ stubs) or a
// fake team written here that plays the protocol the way a hostile team's code could: a
// correct convolution, one that keeps an earlier call's output, one that answers before it is
// done, one that answers out of turn. The referee's result goes to $CONVLAB_RESULT_FD only; it
// believes nothing the team's process says but "done", and checks every timed call.
#include <doctest/doctest.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>
#include <vector>

#include "grader/worker/team_protocol.hpp"
#include "reference/conv/conv_shape.hpp"
#include "reference/conv/library_conv.hpp"
#include "reference/conv/variant_table.hpp"
#include "reference/data/fashion_mnist.hpp"
#include "tests/support/test_support.hpp"

namespace test_grade_worker {

using namespace convlab;
using nlohmann::json;
namespace fs = std::filesystem;
namespace wire = convlab::grader::wire;

namespace {

// The images of the referee's clock cases: a prefix of the test set.
constexpr std::int64_t kImages = 1000;

struct Run {
  int code = 0;
  std::string result;  // what reached the result channel
  json doc;
};

// How a fake team answers one conv request on its mapped arena (host buffers only).
using FakeConv = std::function<wire::Status(float* y, const float* x, const float* k,
                                            const ConvShape& s)>;

// A fake team's process: the protocol, with `conv` for the calls; `ahead` sends one reply
// before reading anything (a "done" sent ahead of its request).
[[noreturn]] void fake_team(int socket, const FakeConv& conv, bool ahead) {
  void* arena = nullptr;
  if (ahead) {
    wire::Reply early;
    wire::send_message(socket, early);
  }
  for (;;) {
    wire::Request rq;
    int fd = -1;
    if (!wire::receive_message(socket, rq, &fd)) _exit(2);
    if (rq.op == wire::Op::quit) _exit(0);
    wire::Reply r;
    r.nonce = rq.nonce;
    if (rq.op == wire::Op::map_host) {
      arena = mmap(nullptr, rq.bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
      close(fd);
    } else if (rq.op == wire::Op::conv) {
      char* base = static_cast<char*>(arena);
      const ConvShape s{rq.shape[0], rq.shape[1], rq.shape[2], rq.shape[3], rq.shape[4],
                        rq.shape[5]};
      r.status = conv(reinterpret_cast<float*>(base + rq.y.offset),
                      reinterpret_cast<const float*>(base + rq.x.offset),
                      reinterpret_cast<const float*>(base + rq.k.offset), s);
    }
    if (!wire::send_message(socket, r)) _exit(2);
  }
}

// Runs the referee with `args` beside a team's process: this build's convlab-team when `team`
// is empty, else the fake team.
Run check(const std::string& args, const FakeConv& team = {}, bool ahead = false) {
  test::TempDir dir;
  const fs::path result = dir.path() / "result.json";
  int ends[2];
  REQUIRE(socketpair(AF_UNIX, SOCK_SEQPACKET, 0, ends) == 0);
  const pid_t team_pid = fork();
  REQUIRE(team_pid >= 0);
  if (team_pid == 0) {
    close(ends[0]);
    if (team) fake_team(ends[1], team, ahead);
    dup2(ends[1], 4);
    setenv("CONVLAB_PASS_FD", "4", 1);
    execl(CONVLAB_TEAM_BINARY, CONVLAB_TEAM_BINARY, static_cast<char*>(nullptr));
    _exit(127);
  }
  close(ends[1]);
  // As the grader does: one byte on the referee's "team gone" pipe once the team's process
  // has ended (the referee times its reference only then).
  int gone[2];
  REQUIRE(pipe(gone) == 0);
  // Above the descriptors the command names, so that `5<&` cannot replace it first.
  const int gone_r = fcntl(gone[0], F_DUPFD, 7);
  REQUIRE((gone_r >= 7 && gone_r <= 9));  // sh reads one digit
  std::thread reaper([team_pid, gone_w = gone[1]] {
    int status = 0;
    waitpid(team_pid, &status, 0);
    const char byte = 'g';
    (void)!write(gone_w, &byte, 1);
  });
  Run r;
  std::string output;
  // The socket first: `3>` before `5<&3` would hand over the result file when ends[0] is 3.
  r.code = test::run_command("CONVLAB_PASS_FD=5 CONVLAB_TEAM_GONE_FD=6 CONVLAB_RESULT_FD=3 " +
                                 std::string(CONVLAB_CHECK_BINARY) + " " + args + " 5<&" +
                                 std::to_string(ends[0]) + " 6<&" + std::to_string(gone_r) +
                                 " 3>" + result.string(),
                             &output);
  close(ends[0]);
  reaper.join();
  close(gone_r);
  close(gone[0]);
  close(gone[1]);
  std::ifstream in(result);
  std::stringstream ss;
  ss << in.rdbuf();
  r.result = ss.str();
  INFO("referee printed: " << output);
  REQUIRE_MESSAGE(!r.result.empty(), "the referee wrote no result");
  r.doc = json::parse(r.result);
  CHECK(output.find("\"status\"") == std::string::npos);  // the result never reaches stdout
  return r;
}

std::string models() { return (test::source_dir() / "datasets" / "models").string(); }

wire::Status library(float* y, const float* x, const float* k, const ConvShape& s) {
  conv_forward_reference(y, x, k, s);
  return wire::Status::ok;
}

}  // namespace

TEST_CASE("without a result channel the referee refuses to run") {
  std::string out;
  const int code = test::run_command(std::string(CONVLAB_CHECK_BINARY) + " info", &out);
  CHECK(code == 2);
  CHECK(out.find("CONVLAB_RESULT_FD") != std::string::npos);
}

TEST_CASE("the team's harness holds no symbol table and no library convolution") {
  std::string out;
  REQUIRE(test::run_command("nm " + std::string(CONVLAB_TEAM_BINARY), &out) != 127);
  CHECK(out.find("no symbols") != std::string::npos);
  std::ifstream in(CONVLAB_TEAM_BINARY, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), {});
  REQUIRE(bytes.size() > 1000);
  for (const char* name : {"conv_forward_reference", "cudnnConvolutionForward", "cudnnCreate",
                           "cublasSgemm", "convlab::solution", "steady_clock"}) {
    CAPTURE(name);
    CHECK(bytes.find(name) == std::string::npos);
  }
  // Run alone, it says what it is for and does nothing.
  CHECK(test::run_command(CONVLAB_TEAM_BINARY, &out) == 2);
  CHECK(out.find("CONVLAB_PASS_FD") != std::string::npos);
}

TEST_CASE("info says whether a GPU is usable") {
  const Run r = check("info");
  CHECK(r.doc.at("schema") == "convlab-check/1");
  CHECK(r.doc.at("task") == "info");
  const std::string status = r.doc.at("status");
  if (status == "ok") {
    CHECK(r.code == 0);
    CHECK(!r.doc.at("gpu").at("name").get<std::string>().empty());
  } else {
    CHECK(status == "no_gpu");
    CHECK(r.code == 1);
    CHECK(!r.doc.at("message").get<std::string>().empty());
  }
}

TEST_CASE("the m2 stub reports not_implemented with its file and handout section") {
  std::string why;
  const auto data = test::real_data_dir(&why);
  const std::string images = data ? (*data / "t10k-images-idx3-ubyte.gz").string() : "";
  const convlab::Variant& cpu = convlab::find_variant(convlab::variant_ids("m2", "cpu").front());
  const std::string id(cpu.id);
  std::vector<std::string> cases = {"elementwise --variant " + id + " --seed 3 --shape 1,2,1,8,8,3"};
  if (data) {
    cases.push_back("network --model " + models() + "/ece408-high.safetensors --images " + images +
                    " --variant " + id);
  }
  for (const std::string& args : cases) {
    CAPTURE(args);
    const Run r = check(args);
    CHECK(r.code == 1);
    CHECK(r.doc.at("status") == "not_implemented");
    const std::string msg = r.doc.at("message");
    CHECK(msg.find(cpu.student_file) != std::string::npos);
    CHECK(msg.find("milestones/m2/README.md") != std::string::npos);
  }
}

TEST_CASE("a GPU variant without a usable GPU, or a GPU stub, never reports ok") {
  const convlab::Variant& gpu = convlab::find_variant(convlab::variant_ids("final", "gpu").back());
  const Run r =
      check("elementwise --variant " + std::string(gpu.id) + " --seed 3 --shape 1,2,1,8,8,3");
  const std::string status = r.doc.at("status");
  CAPTURE(r.result);
  CHECK(status != "ok");
  CHECK(r.code == 1);
  if (status == "not_implemented") {
    CHECK(r.doc.at("message").get<std::string>().find(gpu.student_file) != std::string::npos);
  }
}

TEST_CASE("bad input is the referee's own error, with a message") {
  const std::string cpu = "--variant " + convlab::variant_ids({}, "cpu").front();
  for (const std::string& args :
       {std::string(""), std::string("bogus"), "network " + cpu,
        "elementwise " + cpu + " --seed 1", "elementwise " + cpu + " --seed x --shape 1,1,1,5,5,3",
        "elementwise " + cpu + " --seed 1 --shape 1,1,1,5,5",
        "elementwise " + cpu + " --seed 1 --shape 1,1,1,3,3,5",
        std::string("elementwise --variant nosuch --seed 1 --shape 1,1,1,5,5,3"),
        "network --model /nonexistent.safetensors --images /nonexistent.gz " + cpu,
        "network --model m --images i " + cpu + " --runs 2", std::string("info --frobnicate")}) {
    CAPTURE(args);
    const Run r = check(args);
    CHECK(r.code == 1);
    CHECK(r.doc.at("status") == "referee_error");
    CHECK(!r.doc.at("message").get<std::string>().empty());
  }
}

TEST_CASE("the referee's clock and checks: honest, caching, early and out-of-turn teams") {
  std::string why;
  const auto data = test::real_data_dir(&why);
  if (!data) {
    MESSAGE("SKIPPED: " << why);
    return;
  }
  // The first 1000 test images: 8 calls per pass, the last one short (7 x 128 + 104).
  const test::TempDir dir;
  const fs::path images = dir.path() / "images-1000.idx.gz";
  test::real_test_set().write_images(images, kImages);
  const std::string args = "network --model " + models() + "/ece408-high.safetensors --images " +
                           images.string() + " --variant " +
                           convlab::variant_ids("m2", "cpu").front() +
                           " --runs 2 --warmup 1 --reference --noise-seed 77";

  SUBCASE("an honest convolution: counted, timed by the referee, every timed call checked") {
    const Run r = check(args, library);
    REQUIRE(r.doc.at("status") == "ok");
    CHECK(r.doc.at("passes").size() == 1);
    CHECK(r.doc.at("passes")[0].at("predictions").size() == kImages);
    const json& v = r.doc.at("verification");
    CHECK(v.at("failed") == 0);
    CHECK(v.at("calls").get<int>() == 2 * 8);  // two timed passes of 8 chunks of <= 128
    CHECK(r.doc.at("timing").at("op_time_runs_s").size() == 2);
    CHECK(r.doc.at("timing").at("op_time_s").get<double>() > 0.0);
    CHECK(r.doc.at("reference").at("op_time_s").get<double>() > 0.0);
    // Nothing measured through the team's process is subtracted from its time.
    CHECK_FALSE(r.doc.contains("handshake_s"));
  }
  SUBCASE("a team that writes its input fails, and is told so") {
    const Run r = check(args, [](float* y, const float* x, const float* k, const ConvShape& s) {
      conv_forward_reference(y, x, k, s);
      const_cast<float*>(x)[s.x_elements() - 1] = 0.5f;  // leaves a mark where it read
      return wire::Status::ok;
    });
    CHECK(r.code == 1);
    CHECK(r.doc.at("status") == "input_written");
    CHECK(r.doc.at("message").get<std::string>().find("input x") != std::string::npos);
  }
  SUBCASE("outputs kept from earlier calls fail: every timed pass has fresh inputs") {
    // Remembers each chunk's output by its position and returns it again from the second
    // pass on (the count pass runs first and is computed honestly).
    auto memo = std::make_shared<std::map<int, std::vector<float>>>();
    auto calls = std::make_shared<int>(0);
    const Run r = check(args, [memo, calls](float* y, const float* x, const float* k,
                                            const ConvShape& s) {
      const int slot = (*calls)++ % 8;
      auto it = memo->find(slot);
      if (it != memo->end() && it->second.size() == static_cast<std::size_t>(s.y_elements())) {
        std::memcpy(y, it->second.data(), it->second.size() * sizeof(float));
      } else {
        conv_forward_reference(y, x, k, s);
        (*memo)[slot].assign(y, y + s.y_elements());
      }
      return wire::Status::ok;
    });
    REQUIRE(r.doc.at("status") == "ok");
    const json& v = r.doc.at("verification");
    CHECK(v.at("failed").get<int>() == v.at("calls").get<int>());
    CHECK(v.at("first_failure").at("at").get<std::string>().rfind("y[", 0) == 0);
  }
  SUBCASE("a 'done' before the work is done leaves unwritten outputs: caught") {
    const Run r = check(args, [](float* y, const float* x, const float* k, const ConvShape& s) {
      // The work goes on in a thread after the answer.
      std::thread([=] {
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
        conv_forward_reference(y, x, k, s);
      }).detach();
      return wire::Status::ok;
    });
    // Either a late write lands where the next request's inputs already lie (input_written),
    // or the outputs are checked before the thread wrote them (verification fails).
    const std::string status = r.doc.at("status");
    CAPTURE(status);
    REQUIRE((status == "ok" || status == "input_written"));
    if (status == "ok") {
      CHECK(r.doc.at("verification").at("failed").get<int>() > 0);
    } else {
      CHECK(r.code == 1);
    }
  }
  SUBCASE("a reply sent ahead of its request ends the check") {
    const Run r = check(args, library, true);
    CHECK(r.doc.at("status") == "team_lost");
    CHECK(r.doc.at("message").get<std::string>().find("out of turn") != std::string::npos);
  }
  SUBCASE("a team's error is the team's, with its message") {
    const Run r = check(args, [](float*, const float*, const float*, const ConvShape&) {
      return wire::Status::error;
    });
    CHECK(r.doc.at("status") == "error");
  }
}

}  // namespace test_grade_worker
