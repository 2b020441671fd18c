#include "grader/class/child_process.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>

#include "reference/core/error.hpp"
#include "reference/core/files.hpp"

namespace convlab::grader {

namespace {

ChildExit from_status(int status) {
  ChildExit e;
  if (WIFEXITED(status)) {
    e.exit_code = WEXITSTATUS(status);
  } else if (WIFSIGNALED(status)) {
    e.signal = WTERMSIG(status);
  }
  return e;
}

}  // namespace

std::string ChildExit::describe() const {
  if (timed_out) return "killed after its time limit";
  if (signal != 0) {
    return "killed by signal " + std::to_string(signal) + " (" + strsignal(signal) + ")";
  }
  return "exited with code " + std::to_string(exit_code);
}

ChildProcess::ChildProcess(const std::vector<std::string>& argv, const std::filesystem::path& log,
                           const std::optional<std::filesystem::path>& exe,
                           const std::vector<std::pair<std::string, std::string>>& env) {
  if (argv.empty()) throw Error("ChildProcess: empty command");
  const int log_fd = open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (log_fd < 0) throw Error("cannot write " + log.string() + ": " + std::strerror(errno));
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  const std::string file = exe ? exe->string() : argv[0];

  pid_ = fork();
  if (pid_ < 0) {
    const int err = errno;
    close(log_fd);
    throw Error(std::string("cannot start a grader process (fork): ") + std::strerror(err));
  }
  if (pid_ == 0) {
    // Its own process group, so a time limit or an interrupt kills all it started.
    setpgid(0, 0);
    const int null_in = open("/dev/null", O_RDONLY);
    if (null_in >= 0) dup2(null_in, STDIN_FILENO);
    dup2(log_fd, STDOUT_FILENO);
    dup2(log_fd, STDERR_FILENO);
    signal(SIGINT, SIG_DFL);
    signal(SIGTERM, SIG_DFL);
    // The class grader is single-threaded, so setenv between fork and exec is safe.
    for (const auto& [name, value] : env) setenv(name.c_str(), value.c_str(), 1);
    if (file.find('/') != std::string::npos) {
      execv(file.c_str(), args.data());
    } else {
      execvp(file.c_str(), args.data());
    }
    const std::string msg = "cannot run " + file + ": " + std::strerror(errno) + "\n";
    (void)!write(STDERR_FILENO, msg.data(), msg.size());
    _exit(127);
  }
  // Set it from this side too, so kill_group works even before the child ran setpgid.
  setpgid(pid_, pid_);
  close(log_fd);
}

ChildProcess::~ChildProcess() {
  if (pid_ > 0 && !exit_) kill_group(false);
}

std::optional<ChildExit> ChildProcess::poll() {
  if (exit_) return exit_;
  int status = 0;
  pid_t r;
  do {
    r = waitpid(pid_, &status, WNOHANG);
  } while (r < 0 && errno == EINTR);
  if (r == pid_) exit_ = from_status(status);
  return exit_;
}

ChildExit ChildProcess::wait() {
  if (exit_) return *exit_;
  int status = 0;
  while (waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
  }
  exit_ = from_status(status);
  return *exit_;
}

ChildExit ChildProcess::kill_group(bool timed_out) {
  if (!exit_) {
    kill(-pid_, SIGKILL);
    kill(pid_, SIGKILL);
    wait();
  }
  // The group may outlive its leader (a grandchild): kill what is left.
  kill(-pid_, SIGKILL);
  exit_->timed_out = exit_->timed_out || timed_out;
  return *exit_;
}

CommandOutput run_captured(const std::vector<std::string>& argv, double timeout_s) {
  char name[] = "/tmp/convlab-cmd-XXXXXX";
  const int fd = mkstemp(name);
  if (fd < 0) throw Error(std::string("cannot create a temporary file: ") + std::strerror(errno));
  close(fd);
  const std::filesystem::path log = name;
  CommandOutput out;
  try {
    ChildProcess child(argv, log);
    const auto start = std::chrono::steady_clock::now();
    std::optional<ChildExit> exit;
    while (!(exit = child.poll())) {
      if (std::chrono::steady_clock::now() - start > std::chrono::duration<double>(timeout_s)) {
        exit = child.kill_group(true);
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    out.exit = *exit;
  } catch (...) {
    std::filesystem::remove(log);
    throw;
  }
  out.output = try_read_file(log).value_or("");
  std::error_code ec;
  std::filesystem::remove(log, ec);
  return out;
}

bool find_program(const std::string& name) {
  if (name.find('/') != std::string::npos) return access(name.c_str(), X_OK) == 0;
  const char* path = std::getenv("PATH");
  std::string dirs = path != nullptr ? path : "/usr/bin:/bin";
  std::size_t begin = 0;
  while (begin <= dirs.size()) {
    const std::size_t end = std::min(dirs.find(':', begin), dirs.size());
    const std::string dir = end > begin ? dirs.substr(begin, end - begin) : ".";
    if (access((dir + "/" + name).c_str(), X_OK) == 0) return true;
    begin = end + 1;
  }
  return false;
}

}  // namespace convlab::grader
