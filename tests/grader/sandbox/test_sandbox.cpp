// The sandbox against a program that misbehaves on purpose (sandbox_probe): every outcome, every
// limit, every isolation feature this machine offers (and the fallback without namespaces).
#include <doctest/doctest.h>
#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <sys/ipc.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/shm.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "grader/sandbox/sandbox.hpp"
#include "reference/core/error.hpp"
#include "tests/support/test_support.hpp"

namespace test_sandbox {

namespace fs = std::filesystem;
using convlab::grader::Outcome;
using convlab::grader::SandboxFeatures;
using convlab::grader::SandboxResult;
using convlab::grader::SandboxSpec;

namespace {

const SandboxFeatures& features() {
  static const SandboxFeatures f = [] {
    const SandboxFeatures probed = convlab::grader::probe_sandbox_features();
    std::cout << "sandbox features on this machine: network_namespace=" << probed.network_namespace
              << " mount_namespace=" << probed.mount_namespace
              << " pid_namespace=" << probed.pid_namespace
              << " read_only_root=" << probed.read_only_root
              << " user_namespace=" << probed.user_namespace
              << " dropped_privileges=" << probed.dropped_privileges
              << " ipc_namespace=" << probed.ipc_namespace
              << " memory_limit=" << convlab::grader::memory_limit_name(probed.memory_limit)
              << " user=" << probed.user << "\n";
    const std::pair<bool, const char*> checks[] = {
        {probed.network_namespace, "network namespace: the no-network checks are skipped"},
        {probed.mount_namespace, "mount namespace: the hidden-path checks are skipped"},
        {probed.pid_namespace, "PID namespace: only the process-group and subreaper paths run"},
        {probed.read_only_root, "read-only root: the write-outside checks are skipped"},
        {probed.dropped_privileges, "dropping privileges (not root): runs keep this user"},
    };
    for (const auto& [active, what] : checks) {
      if (!active) std::cout << "  INACTIVE: " << what << "\n";
    }
    return probed;
  }();
  return f;
}

// A spec that runs the probe (copied into the private directory) with ARGS.
SandboxSpec probe(std::vector<std::string> args) {
  SandboxSpec spec;
  spec.inputs.emplace_back(SANDBOX_PROBE, "probe");
  spec.argv = {"probe"};
  spec.argv.insert(spec.argv.end(), args.begin(), args.end());
  spec.limits.wall_s = 30;
  return spec;
}

std::string unique_marker() {
  static std::atomic<int> counter{0};
  return "convlab-sandbox-marker-" + std::to_string(getpid()) + "-" + std::to_string(++counter);
}

// Pids of live processes whose command line contains `marker`.
std::vector<int> processes_with(const std::string& marker) {
  std::vector<int> found;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator("/proc", ec)) {
    const std::string name = entry.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream in(entry.path() / "cmdline", std::ios::binary);
    const std::string cmdline((std::istreambuf_iterator<char>(in)), {});
    if (cmdline.find(marker) != std::string::npos) found.push_back(std::stoi(name));
  }
  return found;
}

std::string show(const SandboxResult& r) {
  return r.describe() + "\n--- stdout:\n" + r.stdout_text.substr(0, 2000) + "\n--- stderr:\n" +
         r.stderr_text.substr(0, 2000) + "\n";
}

// The probe's deterministic bytes (same generator as sandbox_probe.cpp).
std::string expected_channel(std::size_t n, std::uint64_t seed) {
  std::uint64_t state = seed | 1;
  std::string out(n, '\0');
  for (char& c : out) {
    state ^= state >> 12;
    state ^= state << 25;
    state ^= state >> 27;
    c = static_cast<char>((state * 2685821657736338717ull) >> 56);
  }
  return out;
}

}  // namespace

TEST_CASE("a plain run: exit code, both streams, timings, the private directory is removed") {
  features();
  const SandboxResult r = convlab::grader::run_sandboxed(probe({"print", "hello"}));
  INFO(show(r));
  CHECK(r.outcome == Outcome::exited);
  CHECK(r.exit_code == 0);
  CHECK(r.stdout_text == "hello\n");
  CHECK(r.stderr_text == "err:hello\n");
  CHECK(r.channel.empty());
  CHECK(r.wall_s > 0.0);
  CHECK(r.wall_s < 10.0);
  CHECK(r.describe() == "exited with code 0");
  // The probe tells what a run gets.
  CHECK(r.features.network_namespace == features().network_namespace);
  CHECK(r.features.mount_namespace == features().mount_namespace);
  CHECK(r.features.pid_namespace == features().pid_namespace);
  CHECK(r.features.read_only_root == features().read_only_root);
  CHECK(r.features.dropped_privileges == features().dropped_privileges);
  CHECK(r.features.user == features().user);
  CHECK_FALSE(r.private_dir.empty());
  CHECK_FALSE(fs::exists(r.private_dir));

  const SandboxResult code = convlab::grader::run_sandboxed(probe({"exit", "3"}));
  CHECK(code.outcome == Outcome::exited);
  CHECK(code.exit_code == 3);
  CHECK(code.describe() == "exited with code 3");
}

TEST_CASE("keep_private_dir keeps the private directory and what the run wrote there") {
  SandboxSpec spec = probe({"write-file", "result.txt"});
  spec.keep_private_dir = true;
  const SandboxResult r = convlab::grader::run_sandboxed(spec);
  INFO(show(r));
  CHECK(r.outcome == Outcome::exited);
  CHECK(r.stdout_text == "wrote\n");
  CHECK(fs::exists(r.private_dir / "result.txt"));
  CHECK(fs::exists(r.private_dir / "probe"));
  CHECK((fs::status(r.private_dir).permissions() & fs::perms::all) == fs::perms::owner_all);
  fs::remove_all(r.private_dir);
}

TEST_CASE("keep_private_dir in the allow-list view: the inputs are there, the writes kept") {
  if (!features().mount_namespace) {
    MESSAGE("no mount namespace: no allow-list view here");
    return;
  }
  SandboxSpec spec = probe({"write-file", "result.txt"});
  spec.keep_private_dir = true;
  spec.visible_paths = std::vector<fs::path>{};
  const SandboxResult r = convlab::grader::run_sandboxed(spec);
  INFO(show(r));
  CHECK(r.features.allow_list_view);
  CHECK(r.outcome == Outcome::exited);
  CHECK(r.stdout_text == "wrote\n");
  CHECK(fs::exists(r.private_dir / "result.txt"));
  fs::remove_all(r.private_dir);
}

TEST_CASE("a program that cannot be started is start_failed with the reason") {
  SandboxSpec spec;
  spec.argv = {"/nonexistent/convlab-program", "x"};
  const SandboxResult r = convlab::grader::run_sandboxed(spec);
  INFO(show(r));
  CHECK(r.outcome == Outcome::start_failed);
  CHECK(r.start_error.find("/nonexistent/convlab-program") != std::string::npos);
  CHECK(r.start_error.find("No such file or directory") != std::string::npos);
  CHECK(r.describe().rfind("could not start: ", 0) == 0);
  CHECK_FALSE(fs::exists(r.private_dir));

  // A relative argv[0] is looked up in the private directory, not on PATH.
  SandboxSpec relative;
  relative.argv = {"true"};
  const SandboxResult rel = convlab::grader::run_sandboxed(relative);
  CHECK(rel.outcome == Outcome::start_failed);
  CHECK(rel.start_error.find((rel.private_dir / "true").string()) != std::string::npos);

  SandboxSpec empty;
  CHECK_THROWS_AS(convlab::grader::run_sandboxed(empty), convlab::Error);
  if (geteuid() == 0) {
    SandboxSpec nobody_known = probe({"exit", "0"});
    nobody_known.user = "convlab-no-such-user";
    CHECK_THROWS_AS(convlab::grader::run_sandboxed(nobody_known), convlab::Error);
  }
}

TEST_CASE("a program open for writing elsewhere for a moment starts once it is closed") {
  // As when another thread of the grader forks while a run's input is being copied: the copy's
  // descriptor lives on in that fork's child until the child closes it (ETXTBSY meanwhile).
  convlab::test::TempDir dir;
  fs::permissions(dir.path(), fs::perms::all);
  const fs::path program = dir.path() / "probe";
  fs::copy_file(SANDBOX_PROBE, program);
  fs::permissions(program, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                               fs::perms::others_read | fs::perms::others_exec);
  const int writer = open(program.c_str(), O_WRONLY | O_CLOEXEC);
  REQUIRE(writer >= 0);
  std::thread closer([writer] {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    close(writer);
  });
  SandboxSpec spec;
  spec.argv = {program.string(), "print", "started"};
  spec.limits.wall_s = 30;
  const SandboxResult r = convlab::grader::run_sandboxed(spec);
  closer.join();
  INFO(show(r));
  CHECK(r.outcome == Outcome::exited);
  CHECK(r.stdout_text == "started\n");
  CHECK(r.wall_s >= 0.15);  // it waited for the writer
}

TEST_CASE("the environment is exactly the one given, with HOME, TMPDIR and the channel fd") {
  SandboxSpec spec = probe({"env"});
  spec.env = {{"FOO", "bar"}, {"PATH", "/usr/bin:/bin"}};
  const SandboxResult r = convlab::grader::run_sandboxed(spec);
  INFO(show(r));
  const std::string dir = r.private_dir.string();
  CHECK(r.stdout_text ==
        "CONVLAB_RESULT_FD=3\nFOO=bar\nHOME=" + dir + "\nPATH=/usr/bin:/bin\nTMPDIR=" + dir + "\n");

  SandboxSpec given = probe({"env"});
  given.env = {{"HOME", "/somewhere"}, {"TMPDIR", "/elsewhere"}};
  const SandboxResult g = convlab::grader::run_sandboxed(given);
  CHECK(g.stdout_text == "CONVLAB_RESULT_FD=3\nHOME=/somewhere\nTMPDIR=/elsewhere\n");
}

TEST_CASE("only fds 0-3 are open, in a process group of its own") {
  // Leak a descriptor without O_CLOEXEC in the grader: the run must not see it.
  const int leaked = open("/dev/null", O_RDONLY);
  REQUIRE(leaked >= 0);
  const SandboxResult r = convlab::grader::run_sandboxed(probe({"fds"}));
  close(leaked);
  INFO(show(r));
  CHECK(r.stdout_text == "0 1 2 3 \n");

  const SandboxResult who = convlab::grader::run_sandboxed(probe({"whoami"}));
  INFO(show(who));
  std::istringstream in(who.stdout_text);
  std::string field;
  int pid = -1, pgid = -2;
  while (in >> field) {
    if (field.rfind("pid=", 0) == 0) pid = std::stoi(field.substr(4));
    if (field.rfind("pgid=", 0) == 0) pgid = std::stoi(field.substr(5));
  }
  CHECK(pid == pgid);
  CHECK(who.stdout_text.find("cwd=" + who.private_dir.string()) != std::string::npos);
  if (features().pid_namespace) {
    CHECK(pid == 2);  // init of the namespace is 1
    const SandboxResult ps = convlab::grader::run_sandboxed(probe({"processes"}));
    // Its /proc hides other users' processes: init (root) too, where the run's user is not.
    CHECK(ps.stdout_text == (who.features.dropped_privileges ? "processes=1\n" : "processes=2\n"));
  }
  if (features().dropped_privileges) {
    CHECK(who.features.dropped_privileges);
    // The named user's group and a user id of the run's own, far above any account's.
    CHECK(who.features.user == "nobody");
    unsigned long uid = 0;
    REQUIRE(std::sscanf(who.stdout_text.c_str(), "uid=%lu gid=65534 groups=65534 ", &uid) == 1);
    CHECK(uid >= 0x70000000ul);
  } else {
    CHECK_FALSE(who.features.dropped_privileges);
  }
}

TEST_CASE("the result channel is not stdout, and 10 MB arrive intact while stdout is written") {
  const std::size_t bytes = 10'000'000;
  const SandboxResult r = convlab::grader::run_sandboxed(probe({"channel", "10000000", "42"}));
  INFO(r.describe());
  CHECK(r.outcome == Outcome::exited);
  CHECK(r.exit_code == 0);
  CHECK_FALSE(r.channel_truncated);
  REQUIRE(r.channel.size() == bytes);
  CHECK(r.channel == expected_channel(bytes, 42));
  CHECK(r.stdout_text.find("progress 10000000\n") != std::string::npos);
  CHECK(r.stdout_text.find('\0') == std::string::npos);  // none of the channel's bytes

  const SandboxResult small = convlab::grader::run_sandboxed(probe({"channel", "5", "7"}));
  CHECK(small.channel == expected_channel(5, 7));
  CHECK(small.stdout_text == "progress 5\n");
}

TEST_CASE("a timeout kills the whole group quickly, with and without namespaces") {
  for (const bool namespaces : {true, false}) {
    CAPTURE(namespaces);
    const std::string marker = unique_marker();
    SandboxSpec spec = probe({"sleepers", "5", marker});
    spec.limits.wall_s = 1.0;
    spec.use_namespaces = namespaces;
    const SandboxResult r = convlab::grader::run_sandboxed(spec);
    INFO(show(r));
    CHECK(r.outcome == Outcome::timed_out);
    CHECK(r.wall_s >= 1.0);
    CHECK(r.wall_s < 3.0);
    CHECK(r.stdout_text == "forked 5 of 5\n");
    CHECK(processes_with(marker).empty());
    CHECK(r.describe() ==
          "timed out after 1 s (wall-clock limit): every process of the run was killed");
    if (!namespaces) {
      CHECK_FALSE(r.features.pid_namespace);
      CHECK_FALSE(r.features.network_namespace);
      CHECK_FALSE(r.features.mount_namespace);
    }
  }
}

TEST_CASE("a daemon that leaves the group with setsid() does not outlive the run") {
  for (const bool namespaces : {true, false}) {
    CAPTURE(namespaces);
    const std::string marker = unique_marker();
    SandboxSpec spec = probe({"daemon", marker});
    spec.use_namespaces = namespaces;
    const SandboxResult r = convlab::grader::run_sandboxed(spec);
    INFO(show(r));
    CHECK(r.outcome == Outcome::exited);
    CHECK(r.stdout_text == "daemon started\n");
    CHECK(processes_with(marker).empty());
    CHECK(r.wall_s < 5.0);
  }
}

TEST_CASE("crashes are signaled, with the signal named and explained") {
  const SandboxResult segv = convlab::grader::run_sandboxed(probe({"segfault"}));
  INFO(show(segv));
  CHECK(segv.outcome == Outcome::signaled);
  CHECK(segv.signal == SIGSEGV);
  CHECK(segv.describe() == "killed by SIGSEGV (segmentation fault: an invalid memory access)");

  const SandboxResult abrt = convlab::grader::run_sandboxed(probe({"abort"}));
  INFO(show(abrt));
  CHECK(abrt.outcome == Outcome::signaled);
  CHECK(abrt.signal == SIGABRT);
  CHECK(abrt.describe().find("SIGABRT (abort") != std::string::npos);

  CHECK(convlab::grader::describe_signal(SIGKILL).rfind("SIGKILL (killed", 0) == 0);
  CHECK(convlab::grader::describe_signal(63) == "signal 63");
}

TEST_CASE("the CPU-time and file-size limits end the run with their signal") {
  SandboxSpec burn = probe({"cpu-burn"});
  burn.limits.cpu_s = 1;
  const SandboxResult cpu = convlab::grader::run_sandboxed(burn);
  INFO(show(cpu));
  CHECK(cpu.outcome == Outcome::signaled);
  CHECK(cpu.signal == SIGXCPU);
  CHECK(cpu.describe() == "killed by SIGXCPU (CPU-time limit reached)");
  CHECK(cpu.cpu_s >= 0.5);  // the kernel charges CPU time in ticks: about 1 s, never near 0
  CHECK(cpu.cpu_s < 3.0);

  SandboxSpec big = probe({"big-file", "big.bin", "4194304"});
  big.limits.max_file_bytes = 1u << 20;
  const SandboxResult file = convlab::grader::run_sandboxed(big);
  INFO(show(file));
  CHECK(file.outcome == Outcome::signaled);
  CHECK(file.signal == SIGXFSZ);
  CHECK(file.describe().find("file-size limit") != std::string::npos);
}

TEST_CASE("a fork bomb is bounded by the process limit and leaves nothing behind") {
  const std::string marker = unique_marker();
  SandboxSpec spec = probe({"fork-bomb", "300", marker});
  spec.limits.max_processes = 20;
  const SandboxResult r = convlab::grader::run_sandboxed(spec);
  INFO(show(r));
  CHECK(r.outcome == Outcome::exited);
  CHECK(processes_with(marker).empty());
  if (r.features.dropped_privileges || geteuid() != 0) {
    // Every run has a user id of its own, so RLIMIT_NPROC binds this run alone: the command
    // itself plus at most max_processes - 1 children.
    int forked = -1;
    REQUIRE(std::sscanf(r.stdout_text.c_str(), "forked %d of 300", &forked) == 1);
    CHECK(forked < 300);
    if (r.features.dropped_privileges) CHECK(forked <= 19);
    CHECK(r.stdout_text.find("Resource temporarily unavailable") != std::string::npos);
  } else {
    MESSAGE("RLIMIT_NPROC does not bind root: only containment is checked");
  }

  // Exactly: the command itself plus at most max_processes - 1 children.
  if (geteuid() == 0 && getpwnam("daemon") != nullptr) {
    const std::string exact_marker = unique_marker();
    SandboxSpec exact = probe({"fork-bomb", "300", exact_marker});
    exact.user = "daemon";
    exact.limits.max_processes = 8;
    const SandboxResult e = convlab::grader::run_sandboxed(exact);
    INFO(show(e));
    CHECK(e.features.user == "daemon");
    CHECK(e.stdout_text == "forked 7 of 300: Resource temporarily unavailable\n");
    CHECK(processes_with(exact_marker).empty());
  }

  // Running as root (no process limit applies), the bomb is still contained.
  if (geteuid() == 0) {
    const std::string root_marker = unique_marker();
    SandboxSpec as_root = probe({"fork-bomb", "100", root_marker});
    as_root.drop_privileges = false;
    const SandboxResult rr = convlab::grader::run_sandboxed(as_root);
    INFO(show(rr));
    CHECK(rr.stdout_text == "forked 100 of 100\n");
    CHECK(processes_with(root_marker).empty());
  }
}

TEST_CASE("output past the cap is cut at exactly the cap and the run is killed") {
  for (const std::string stream : {"stdout", "stderr"}) {
    CAPTURE(stream);
    SandboxSpec spec = probe({"endless-output", stream});
    spec.limits.max_output_bytes = 4096;
    const SandboxResult r = convlab::grader::run_sandboxed(spec);
    INFO(r.describe());
    CHECK(r.outcome == Outcome::output_limit);
    const std::string& text = stream == "stdout" ? r.stdout_text : r.stderr_text;
    CHECK(text.size() == 4096);
    CHECK(text.substr(0, 100) == std::string(99, 'y') + "\n");
    CHECK((stream == "stdout" ? r.stdout_truncated : r.stderr_truncated));
    CHECK_FALSE((stream == "stdout" ? r.stderr_truncated : r.stdout_truncated));
    CHECK(r.describe() ==
          stream + " passed its limit of 4 KiB: every process of the run was killed");
    CHECK(r.wall_s < 5.0);
  }

  SandboxSpec chan = probe({"endless-channel"});
  chan.limits.max_channel_bytes = 10000;
  const SandboxResult c = convlab::grader::run_sandboxed(chan);
  CHECK(c.outcome == Outcome::output_limit);
  CHECK(c.channel.size() == 10000);
  CHECK(c.channel_truncated);
  CHECK(c.describe().rfind("the result channel passed its limit of 10000 bytes", 0) == 0);

  // Exactly the cap is not past it.
  SandboxSpec exact = probe({"channel", "10000", "3"});
  exact.limits.max_channel_bytes = 10000;
  const SandboxResult e = convlab::grader::run_sandboxed(exact);
  CHECK(e.outcome == Outcome::exited);
  CHECK_FALSE(e.channel_truncated);
  CHECK(e.channel == expected_channel(10000, 3));
}

TEST_CASE("hidden paths cannot be read where a mount namespace is available") {
  convlab::test::TempDir secret;
  fs::permissions(secret.path(), fs::perms::owner_all | fs::perms::group_read |
                                     fs::perms::group_exec | fs::perms::others_read |
                                     fs::perms::others_exec);
  fs::create_directories(secret.path() / "data");
  std::ofstream(secret.path() / "data" / "labels") << std::string(100, 'L');
  std::ofstream(secret.path() / "model.safetensors") << std::string(50, 'M');
  const std::string labels = (secret.path() / "data" / "labels").string();
  const std::string model = (secret.path() / "model.safetensors").string();

  // Readable without hiding: the check below means something.
  CHECK(convlab::grader::run_sandboxed(probe({"read-file", labels})).stdout_text ==
        "read 100 bytes\n");
  CHECK(convlab::grader::run_sandboxed(probe({"read-file", model})).stdout_text ==
        "read 50 bytes\n");

  if (!features().mount_namespace) {
    MESSAGE("no mount namespace: hidden paths stay readable here");
    return;
  }
  SandboxSpec dir_spec = probe({"read-file", labels});
  dir_spec.hide_paths = {secret.path() / "data", "/nonexistent/ignored"};
  const SandboxResult d = convlab::grader::run_sandboxed(dir_spec);
  INFO(show(d));
  CHECK(d.features.mount_namespace);
  CHECK(d.stdout_text == "cannot read: No such file or directory\n");

  SandboxSpec file_spec = probe({"read-file", model});
  file_spec.hide_paths = {model};
  const SandboxResult f = convlab::grader::run_sandboxed(file_spec);
  INFO(show(f));
  CHECK(f.stdout_text == "read 0 bytes\n");
  // Hidden inside the run only.
  CHECK(fs::file_size(model) == 50);
}

TEST_CASE("the run writes only to its private directory, its workdir and writable paths") {
  const std::string outside = "/tmp/convlab-sandbox-outside-" + std::to_string(getpid());
  fs::remove(outside);
  const SandboxResult inside = convlab::grader::run_sandboxed(probe({"write-file", "mine.txt"}));
  CHECK(inside.stdout_text == "wrote\n");

  convlab::test::TempDir shared;
  fs::permissions(shared.path(), fs::perms::all);
  SandboxSpec allowed = probe({"write-file", (shared.path() / "out.txt").string()});
  allowed.writable_paths = {shared.path()};
  const SandboxResult w = convlab::grader::run_sandboxed(allowed);
  INFO(show(w));
  CHECK(w.stdout_text == "wrote\n");
  CHECK(fs::exists(shared.path() / "out.txt"));

  const SandboxResult r = convlab::grader::run_sandboxed(probe({"write-file", outside}));
  INFO(show(r));
  if (!r.features.read_only_root) {
    MESSAGE("no read-only root here: /tmp stays writable (" << r.stdout_text << ")");
    fs::remove(outside);
    return;
  }
  CHECK(r.stdout_text == "cannot write: Read-only file system\n");
  CHECK_FALSE(fs::exists(outside));
  const SandboxResult src = convlab::grader::run_sandboxed(
      probe({"write-file", (convlab::test::source_dir() / "convlab-sandbox-marker").string()}));
  CHECK(src.stdout_text.rfind("cannot write: ", 0) == 0);
  CHECK_FALSE(fs::exists(convlab::test::source_dir() / "convlab-sandbox-marker"));
}

TEST_CASE("no network where a network namespace is available") {
  const SandboxResult r = convlab::grader::run_sandboxed(probe({"network"}));
  INFO(show(r));
  if (!r.features.network_namespace) {
    MESSAGE("no network namespace: the run has this machine's network (" << r.stdout_text << ")");
    return;
  }
  CHECK(r.exit_code == 1);
  CHECK(r.stdout_text == "interfaces: lo\ncannot connect: Network is unreachable\n");
}

TEST_CASE("several runs at once from several threads keep their outputs apart") {
  constexpr int kThreads = 4, kRuns = 3;
  std::vector<std::string> failures(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([t, &failures] {
      for (int i = 0; i < kRuns; ++i) {
        const std::uint64_t seed = 100 + t * 10 + i;
        const SandboxResult r =
            convlab::grader::run_sandboxed(probe({"channel", "300000", std::to_string(seed)}));
        if (r.outcome != Outcome::exited || r.channel != expected_channel(300000, seed) ||
            r.stdout_text.find("progress 300000\n") == std::string::npos) {
          failures[t] += "run " + std::to_string(i) + ": " + r.describe() + "; ";
        }
      }
    });
  }
  for (std::thread& th : threads) th.join();
  for (int t = 0; t < kThreads; ++t) CHECK_MESSAGE(failures[t].empty(), failures[t]);
}

TEST_CASE("a grader that is not root runs commands as itself") {
  if (geteuid() != 0) {
    const SandboxResult r = convlab::grader::run_sandboxed(probe({"whoami"}));
    CHECK(r.outcome == Outcome::exited);
    CHECK_FALSE(r.features.dropped_privileges);
    return;
  }
  // Become `nobody` in a child process and grade from there.
  convlab::test::TempDir bin;
  fs::permissions(bin.path(), fs::perms::owner_all | fs::perms::others_read |
                                  fs::perms::others_exec | fs::perms::group_read |
                                  fs::perms::group_exec);
  fs::copy_file(SANDBOX_PROBE, bin.path() / "probe");
  int fds[2];
  REQUIRE(pipe(fds) == 0);
  const pid_t child = fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    close(fds[0]);
    std::string report;
    if (setgroups(0, nullptr) != 0 || setgid(65534) != 0 || setuid(65534) != 0) {
      report = "cannot become nobody";
    } else {
      // A user's own grader is dumpable (a uid change from root is not, by default).
      prctl(PR_SET_DUMPABLE, 1, 0, 0, 0);
      SandboxSpec spec;
      spec.inputs.emplace_back(bin.path() / "probe", "probe");
      spec.argv = {"probe", "whoami"};
      spec.limits.wall_s = 20;
      try {
        const SandboxResult r = convlab::grader::run_sandboxed(spec);
        SandboxSpec bomb = spec;
        bomb.argv = {"probe", "fork-bomb", "300", "convlab-unprivileged-bomb"};
        bomb.limits.max_processes = 10;
        const SandboxResult b = convlab::grader::run_sandboxed(bomb);
        SandboxSpec outside = spec;
        outside.argv = {"probe", "write-file", "/tmp/convlab-unprivileged-outside"};
        const SandboxResult o = convlab::grader::run_sandboxed(outside);
        report = r.describe() + "|" + r.stdout_text +
                 "|dropped=" + std::to_string(r.features.dropped_privileges) +
                 "|user=" + r.features.user +
                 "|userns=" + std::to_string(r.features.user_namespace) +
                 "|pidns=" + std::to_string(r.features.pid_namespace) +
                 "|netns=" + std::to_string(r.features.network_namespace) +
                 "|ro=" + std::to_string(o.features.read_only_root) + "|outside=" + o.stdout_text +
                 "|bomb=" + b.stdout_text;
      } catch (const std::exception& e) {
        report = std::string("threw: ") + e.what();
      }
    }
    const ssize_t n = write(fds[1], report.data(), report.size());
    _exit(n == static_cast<ssize_t>(report.size()) ? 0 : 1);
  }
  close(fds[1]);
  std::string report;
  char buf[4096];
  ssize_t n;
  while ((n = read(fds[0], buf, sizeof buf)) > 0) report.append(buf, static_cast<std::size_t>(n));
  close(fds[0]);
  int status = 0;
  waitpid(child, &status, 0);
  INFO(report);
  MESSAGE("unprivileged grader: " << report);
  CHECK(WIFEXITED(status));
  CHECK(report.rfind("exited with code 0|uid=65534 gid=65534 ", 0) == 0);
  CHECK(report.find("|dropped=0|user=nobody|") != std::string::npos);
  if (report.find("|userns=1|") != std::string::npos) {
    // An unprivileged user namespace gives the same isolation as root has.
    CHECK(report.find("|pidns=1|netns=1|ro=1|outside=cannot write: Read-only file system") !=
          std::string::npos);
  } else {
    MESSAGE("no unprivileged user namespace here: an unprivileged grader runs without isolation");
  }
  CHECK_FALSE(fs::exists("/tmp/convlab-unprivileged-outside"));
  // NPROC counts nobody's tasks: what it ran already (concurrent runs too) plus 10.
  int forked = -1;
  const auto at = report.find("bomb=forked ");
  REQUIRE(at != std::string::npos);
  REQUIRE(std::sscanf(report.c_str() + at, "bomb=forked %d of 300", &forked) == 1);
  CHECK(forked < 300);
  CHECK(report.find("bomb=forked " + std::to_string(forked) +
                    " of 300: Resource temporarily unavailable") != std::string::npos);
  CHECK(processes_with("convlab-unprivileged-bomb").empty());
}

TEST_CASE("pass_fd reaches the run as fd 4 and the other end sees the run's end") {
  int ends[2];
  REQUIRE(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, ends) == 0);
  SandboxSpec spec = probe({"fds"});
  spec.pass_fd = ends[1];  // run_sandboxed takes it over
  const SandboxResult fds = convlab::grader::run_sandboxed(spec);
  INFO(show(fds));
  CHECK(fds.stdout_text == "0 1 2 3 4 \n");
  // Every copy of the run's end is closed once the run is over: the reader sees the end.
  char byte = 0;
  CHECK(read(ends[0], &byte, 1) == 0);
  close(ends[0]);

  REQUIRE(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, ends) == 0);
  SandboxSpec shell;
  shell.argv = {"/bin/sh", "-c", "printf hello >&$CONVLAB_PASS_FD"};
  shell.limits.wall_s = 30;
  shell.pass_fd = ends[1];
  const SandboxResult r = convlab::grader::run_sandboxed(shell);
  INFO(show(r));
  CHECK(r.outcome == Outcome::exited);
  char text[16] = {};
  CHECK(read(ends[0], text, sizeof text) == 5);
  CHECK(std::string(text) == "hello");
  CHECK(read(ends[0], text, sizeof text) == 0);
  close(ends[0]);
}

// ---- Isolation that fails closed ----------------------------------------------------------

TEST_CASE("each run has its own IPC namespace: a SysV segment dies with the run") {
  if (!features().ipc_namespace) {
    MESSAGE("no IPC namespace here: SysV segments outlive the run");
    return;
  }
  const std::string key = std::to_string(0x5a000000 + (getpid() & 0xffff));
  const SandboxResult made = convlab::grader::run_sandboxed(probe({"shm-create", key, "1048576"}));
  INFO(show(made));
  CHECK(made.features.ipc_namespace);
  CHECK(made.stdout_text.rfind("created ", 0) == 0);
  // Neither the next run nor the grader sees it.
  const SandboxResult found = convlab::grader::run_sandboxed(probe({"shm-find", key}));
  INFO(show(found));
  CHECK(found.stdout_text.rfind("no segment: ", 0) == 0);
  CHECK(shmget(static_cast<key_t>(std::stoi(key)), 0, 0) < 0);
}

TEST_CASE("a run past its memory limit is killed as memory_limit, GPU runs included") {
  for (const bool gpu : {false, true}) {
    CAPTURE(gpu);
    SandboxSpec spec = probe({"hog", "2048"});
    spec.limits.max_memory_bytes = 256u << 20;
    spec.uses_gpu = gpu;
    const SandboxResult r = convlab::grader::run_sandboxed(spec);
    INFO(show(r));
    CHECK(r.outcome == Outcome::memory_limit);
    CHECK(r.describe().find("memory limit of 256 MiB") != std::string::npos);
    CHECK(r.stdout_text.find("2048 MiB") == std::string::npos);
    if (gpu) {
      // Never RLIMIT_AS for a GPU run: CUDA reserves far more address space than it uses.
      CHECK(r.features.memory_limit != convlab::grader::MemoryLimitKind::address_space);
    }
    CHECK(r.features.memory_limit != convlab::grader::MemoryLimitKind::none);
  }
  // Under the limit: an ordinary run.
  SandboxSpec small = probe({"hog", "128", "400"});  // held past a poll
  small.limits.max_memory_bytes = 512u << 20;
  const SandboxResult ok = convlab::grader::run_sandboxed(small);
  INFO(show(ok));
  CHECK(ok.outcome == Outcome::exited);
  CHECK(ok.peak_resident_bytes > (64u << 20));
}

TEST_CASE("the private directory is a tmpfs with a size and a file-count limit") {
  if (!features().mount_namespace) {
    MESSAGE("no mount namespace: the private directory is an ordinary folder here");
    return;
  }
  SandboxSpec spec = probe({"fill-tmp", "128", "5000"});
  spec.limits.tmp_bytes = 32u << 20;
  spec.limits.tmp_inodes = 1000;
  const SandboxResult r = convlab::grader::run_sandboxed(spec);
  INFO(show(r));
  CHECK(r.features.private_tmpfs);
  CHECK(r.outcome == Outcome::exited);
  CHECK(r.stdout_text.find(": No space left on device\nmade ") != std::string::npos);
  CHECK(r.stdout_text.find("wrote 128 MiB") == std::string::npos);
  CHECK(r.stdout_text.find("files: No space left on device\n") != std::string::npos);
  // The inputs are there (bound in), and nothing of the run reached the disk.
  CHECK_FALSE(fs::exists(r.private_dir));
}

TEST_CASE("the allow-list view shows the system folders and the named paths only") {
  if (!features().mount_namespace) {
    MESSAGE("no mount namespace: no allow-list view here");
    return;
  }
  convlab::test::TempDir outside, visible, writable;
  for (const fs::path& dir : {outside.path(), visible.path(), writable.path()}) {
    fs::permissions(dir, fs::perms::all);
  }
  std::ofstream(outside.path() / "secret.txt") << "secret";
  std::ofstream(visible.path() / "shown.txt") << "shown";
  const std::string secret = (outside.path() / "secret.txt").string();
  const std::string shown = (visible.path() / "shown.txt").string();
  const std::string out = (writable.path() / "out.txt").string();

  SandboxSpec spec =
      probe({"exists", "/usr/bin", "/etc/passwd", "/dev/null", "/proc/self", secret, shown, "/home",
             "/root", "/srv", "/work", convlab::test::source_dir().string()});
  spec.visible_paths = std::vector<fs::path>{visible.path()};
  spec.writable_paths = {writable.path()};
  const SandboxResult r = convlab::grader::run_sandboxed(spec);
  INFO(show(r));
  CHECK(r.features.allow_list_view);
  CHECK(r.features.private_tmpfs);
  CHECK(r.stdout_text == "/usr/bin yes\n/etc/passwd yes\n/dev/null yes\n/proc/self yes\n" + secret +
                             " no\n" + shown + " yes\n/home no\n/root no\n/srv no\n" +
                             "/work no\n" + convlab::test::source_dir().string() + " no\n");

  // The named paths are read-only, the writable ones writable; /etc/shadow is empty.
  SandboxSpec write_shown = probe({"write-file", shown});
  write_shown.visible_paths = std::vector<fs::path>{visible.path()};
  CHECK(convlab::grader::run_sandboxed(write_shown).stdout_text ==
        "cannot write: Read-only file system\n");
  SandboxSpec write_out = probe({"write-file", out});
  write_out.visible_paths = std::vector<fs::path>{};
  write_out.writable_paths = {writable.path()};
  const SandboxResult w = convlab::grader::run_sandboxed(write_out);
  INFO(show(w));
  CHECK(w.stdout_text == "wrote\n");
  CHECK(fs::exists(out));
  if (fs::exists("/etc/shadow")) {
    SandboxSpec shadow = probe({"read-file", "/etc/shadow"});
    shadow.visible_paths = std::vector<fs::path>{};
    shadow.drop_privileges = false;  // even as the grader's user
    const std::string text = convlab::grader::run_sandboxed(shadow).stdout_text;
    CHECK((text == "read 0 bytes\n" || text.rfind("cannot read", 0) == 0));
  }
}

TEST_CASE("extra fds reach the command as 4, 5, ... and are closed after it starts") {
  int a[2], b[2];
  REQUIRE(pipe(a) == 0);
  REQUIRE(pipe(b) == 0);
  REQUIRE(write(a[1], "first", 5) == 5);
  REQUIRE(write(b[1], "second", 6) == 6);
  close(a[1]);
  close(b[1]);
  SandboxSpec spec = probe({"extra-fds"});
  spec.extra_fds = {a[0], b[0]};
  const SandboxResult r = convlab::grader::run_sandboxed(spec);
  INFO(show(r));
  CHECK(r.stdout_text == "CONVLAB_EXTRA_FDS=4,5\nfd 4: first\nfd 5: second\n");
  // Without extra fds, 4 and up stay closed.
  const SandboxResult fds = convlab::grader::run_sandboxed(probe({"fds"}));
  CHECK(fds.stdout_text.find(" 4") == std::string::npos);
  close(a[0]);
  close(b[0]);
  spec.extra_fds = {1000};
  CHECK_THROWS_AS(convlab::grader::run_sandboxed(spec), convlab::Error);
}

TEST_CASE("the sweeper removes the unlocked folders of dead graders, nothing else") {
  convlab::test::TempDir parent;
  const fs::path dead = parent.path() / "convlab-grade-dead01";
  const fs::path live = parent.path() / "convlab-run-live01";
  const fs::path unlocked = parent.path() / "convlab-run-nolock";
  const fs::path other = parent.path() / "someone-else";
  for (const fs::path& d : {dead, live, unlocked, other}) fs::create_directories(d / "sub");
  std::ofstream(dead / convlab::grader::kTempDirLockName);
  std::ofstream(other / convlab::grader::kTempDirLockName);
  std::ofstream(dead / "sub" / "file") << "left behind";
  convlab::grader::TempDirLock held(live);
  // A lock held by another process (a grader alive elsewhere) counts as well.
  const pid_t child = fork();
  if (child == 0) {
    convlab::grader::TempDirLock in_child(unlocked);
    pause();
    _exit(0);
  }
  for (int i = 0; i < 200 && !fs::exists(unlocked / convlab::grader::kTempDirLockName); ++i) {
    usleep(10000);
  }
  usleep(50000);
  CHECK(convlab::grader::sweep_stale_temp_dirs(parent.path()) == 1);
  CHECK_FALSE(fs::exists(dead));
  CHECK(fs::exists(live));
  CHECK(fs::exists(unlocked));
  CHECK(fs::exists(other));
  kill(child, SIGKILL);
  waitpid(child, nullptr, 0);
  // Its holder gone, the lock can be taken: swept.
  CHECK(convlab::grader::sweep_stale_temp_dirs(parent.path()) == 1);
  CHECK_FALSE(fs::exists(unlocked));
  CHECK(fs::exists(live));
}

TEST_CASE("isolation_problems names each missing feature with how to get it") {
  SandboxFeatures full;
  full.network_namespace = full.mount_namespace = full.pid_namespace = full.ipc_namespace = true;
  full.read_only_root = full.private_tmpfs = full.dropped_privileges = true;
  full.memory_limit = convlab::grader::MemoryLimitKind::address_space;
  CHECK(convlab::grader::isolation_problems(full).empty());

  SandboxFeatures lacking = full;
  lacking.ipc_namespace = false;
  lacking.memory_limit = convlab::grader::MemoryLimitKind::none;
  const auto problems = convlab::grader::isolation_problems(lacking);
  REQUIRE(problems.size() == 2);
  CHECK(problems[0].feature == "ipc_namespace");
  CHECK(problems[1].feature == "memory_limit");
  CHECK_FALSE(problems[0].fix.empty());

  // A grader that is not root is isolated by a user namespace instead of another user.
  SandboxFeatures user_ns = full;
  user_ns.dropped_privileges = false;
  user_ns.user_namespace = true;
  CHECK(convlab::grader::isolation_problems(user_ns).empty());
  user_ns.user_namespace = false;
  CHECK(convlab::grader::isolation_problems(user_ns).at(0).feature == "dropped_privileges");
}

}  // namespace test_sandbox
