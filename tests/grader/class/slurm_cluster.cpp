#include "tests/grader/class/slurm_cluster.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <grp.h>
#include <netinet/in.h>
#include <pwd.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <sstream>
#include <thread>

#include "tests/support/test_support.hpp"

namespace convlab::test {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace {

std::string read(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

bool on_path(const std::string& name) {
  const char* path = std::getenv("PATH");
  std::stringstream dirs(path != nullptr ? path : "");
  for (std::string d; std::getline(dirs, d, ':');) {
    if (access((d + "/" + name).c_str(), X_OK) == 0) return true;
  }
  // Debian puts the daemons in /usr/sbin, which a plain user's PATH may lack.
  return access(("/usr/sbin/" + name).c_str(), X_OK) == 0;
}

std::string program(const std::string& name) {
  const std::string sbin = "/usr/sbin/" + name;
  return access(sbin.c_str(), X_OK) == 0 ? sbin : name;
}

// A TCP port nobody listens on now (the kernel's pick); Slurm binds it a moment later.
int free_port() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return 0;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  int port = 0;
  if (bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0) {
    port = ntohs(a.sin_port);
  }
  close(fd);
  return port;
}

std::string short_hostname() {
  char buf[256] = {};
  gethostname(buf, sizeof buf - 1);
  std::string h = buf;
  return h.substr(0, h.find('.'));
}

bool alive(pid_t pid) {
  return waitpid(pid, nullptr, WNOHANG) == 0;
}

}  // namespace

SlurmCluster::SlurmCluster(const fs::path& root, int cpus) : root_(root), dir_(root / "slurm") {
  if (!start(cpus)) {
    stop();
    if (why_.empty()) why_ = "the test cluster did not start";
  }
}

SlurmCluster::~SlurmCluster() {
  stop();
}

std::string SlurmCluster::env() const {
  return "SLURM_CONF='" + conf_.string() + "' ";
}

int SlurmCluster::run(const std::string& command, std::string* output) const {
  return run_command(env() + command, output);
}

std::string SlurmCluster::logs() const {
  std::string text;
  for (const char* name :
       {"munged.out", "slurmctld.log", "slurmctld.out", "slurmd.log", "slurmd.out"}) {
    const fs::path p = dir_ / "log" / name;
    if (!fs::exists(p)) continue;
    std::string body = read(p);
    if (body.size() > 3000) body = "..." + body.substr(body.size() - 3000);
    text += "--- " + p.string() + "\n" + body;
  }
  return text;
}

pid_t SlurmCluster::spawn(const std::vector<std::string>& argv, const fs::path& log, uid_t uid,
                          gid_t gid) {
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  const pid_t pid = fork();
  if (pid == 0) {
    setsid();  // its own process group: stop() kills it with all it started
    const int out = open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    const int in = open("/dev/null", O_RDONLY);
    if (in >= 0) dup2(in, STDIN_FILENO);
    if (out >= 0) {
      dup2(out, STDOUT_FILENO);
      dup2(out, STDERR_FILENO);
    }
    if (uid != getuid()) {
      if (setgroups(0, nullptr) != 0 || setgid(gid) != 0 || setuid(uid) != 0) _exit(126);
    }
    execvp(args[0], args.data());
    _exit(127);
  }
  if (pid > 0) daemons_.push_back(pid);
  return pid;
}

bool SlurmCluster::wait_until(const std::string& what, const std::function<bool()>& ready,
                              double seconds) {
  const auto end = Clock::now() + std::chrono::duration<double>(seconds);
  while (Clock::now() < end) {
    if (ready()) return true;
    for (pid_t pid : daemons_) {
      if (!alive(pid)) {
        why_ = "a daemon of the test cluster exited while waiting for " + what + "\n" + logs();
        return false;
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  why_ = "the test cluster timed out waiting for " + what + "\n" + logs();
  return false;
}

bool SlurmCluster::start(int cpus) {
  for (const char* p :
       {"munged", "slurmctld", "slurmd", "sbatch", "squeue", "scontrol", "scancel", "sinfo"}) {
    if (!on_path(p)) {
      why_ = std::string(p) +
             " is not installed: the Slurm tests need Debian's slurmctld, slurmd, munge and "
             "slurm-client";
      return false;
    }
  }
  if (geteuid() != 0) {
    why_ = "the test cluster needs root: slurmd starts each job as the user who submitted it";
    return false;
  }
  const passwd* munge = getpwnam("munge");
  if (munge == nullptr) {
    why_ = "no 'munge' user (Debian's munge package creates it)";
    return false;
  }
  const uid_t munge_uid = munge->pw_uid;
  const gid_t munge_gid = munge->pw_gid;

  std::error_code ec;
  fs::create_directories(dir_, ec);
  for (const char* sub : {"munge", "log", "state", "spool"}) fs::create_directories(dir_ / sub);
  // munged checks that every folder above its socket and key is safe; the munge user must be
  // able to reach its own.
  for (fs::path p = dir_; p != p.parent_path() && p != fs::temp_directory_path();
       p = p.parent_path()) {  // up to the temp folder, which is open to all already
    fs::permissions(p, fs::perms::others_exec | fs::perms::group_exec, fs::perm_options::add, ec);
  }
  const fs::path m = dir_ / "munge";
  {
    std::ifstream random("/dev/urandom", std::ios::binary);
    std::string key(1024, '\0');
    random.read(key.data(), static_cast<std::streamsize>(key.size()));
    std::ofstream(m / "munge.key", std::ios::binary) << key;
  }
  fs::permissions(m / "munge.key", fs::perms::owner_read);
  if (chown(m.c_str(), munge_uid, munge_gid) != 0 ||
      chown((m / "munge.key").c_str(), munge_uid, munge_gid) != 0) {
    why_ = "cannot give the munge user its folder " + m.string();
    return false;
  }
  fs::permissions(m, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                         fs::perms::others_read | fs::perms::others_exec);
  const fs::path socket = m / "munge.socket";
  spawn({program("munged"), "--foreground", "--key-file=" + (m / "munge.key").string(),
         "--socket=" + socket.string(), "--pid-file=" + (m / "munged.pid").string(),
         "--seed-file=" + (m / "munged.seed").string(), "--log-file=" + (m / "munged.log").string(),
         "--num-threads=2"},
        dir_ / "log" / "munged.out", munge_uid, munge_gid);
  if (!wait_until(
          "munged's socket", [&] { return fs::exists(socket); }, 15))
    return false;

  const std::string host = short_hostname();
  const int ctld_port = free_port(), slurmd_port = free_port();
  conf_ = dir_ / "slurm.conf";
  {
    std::ofstream c(conf_);
    c << "# A one-node test cluster: no cgroup, no systemd, no accounting.\n"
      << "ClusterName=convlabtest\n"
      << "SlurmctldHost=" << host << "(127.0.0.1)\n"
      << "SlurmctldPort=" << ctld_port << "\n"
      << "SlurmdPort=" << slurmd_port << "\n"
      << "SlurmUser=root\nSlurmdUser=root\n"
      << "AuthType=auth/munge\nCredType=cred/munge\n"
      << "AuthInfo=socket=" << socket.string() << "\n"
      << "StateSaveLocation=" << (dir_ / "state").string() << "\n"
      << "SlurmdSpoolDir=" << (dir_ / "spool").string() << "\n"
      << "SlurmctldPidFile=" << (dir_ / "slurmctld.pid").string() << "\n"
      << "SlurmdPidFile=" << (dir_ / "slurmd.pid").string() << "\n"
      << "SlurmctldLogFile=" << (dir_ / "log" / "slurmctld.log").string() << "\n"
      << "SlurmdLogFile=" << (dir_ / "log" / "slurmd.log").string() << "\n"
      << "ProctrackType=proctrack/linuxproc\nTaskPlugin=task/none\n"
      << "JobAcctGatherType=jobacct_gather/none\n"
      << "AccountingStorageType=accounting_storage/none\nJobCompType=jobcomp/none\n"
      << "MpiDefault=none\nSchedulerType=sched/builtin\n"
      << "SelectType=select/cons_tres\nSelectTypeParameters=CR_CPU\n"
      << "ReturnToService=2\nMinJobAge=3600\nKillWait=2\nSlurmdParameters=config_overrides\n"
      << "NodeName=" << host << " NodeAddr=127.0.0.1 CPUs=" << cpus << " State=UNKNOWN\n"
      << "PartitionName=tiny Nodes=" << host << " Default=YES MaxTime=INFINITE State=UP\n";
  }
  spawn({program("slurmctld"), "-D", "-f", conf_.string()}, dir_ / "log" / "slurmctld.out",
        getuid(), getgid());
  spawn({program("slurmd"), "-D", "-f", conf_.string()}, dir_ / "log" / "slurmd.out", getuid(),
        getgid());
  return wait_until(
      "the node to be idle",
      [&] {
        std::string out;
        return run("sinfo -h -o %T 2>&1", &out) == 0 && out.find("idle") != std::string::npos;
      },
      60);
}

void SlurmCluster::stop() {
  if (daemons_.empty()) return;
  std::string out;
  if (!conf_.empty() && daemons_.size() == 3 && alive(daemons_[1])) {
    // Every job of this cluster ends before its daemons do.
    run("scancel --user=" + std::to_string(getuid()) + " 2>&1", &out);
    const auto end = Clock::now() + std::chrono::seconds(15);
    while (Clock::now() < end && run("squeue -h 2>&1", &out) == 0 && !out.empty()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
  }
  for (auto it = daemons_.rbegin(); it != daemons_.rend(); ++it) {
    kill(-*it, SIGTERM);
    kill(*it, SIGTERM);
    const auto end = Clock::now() + std::chrono::seconds(5);
    while (Clock::now() < end && alive(*it)) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    kill(-*it, SIGKILL);
    kill(*it, SIGKILL);
    waitpid(*it, nullptr, 0);
  }
  daemons_.clear();
  // A job step's processes live apart from slurmd (slurmstepd): whatever still holds a file
  // of this cluster's folder goes too.
  const std::string prefix = root_.string() + "/";
  std::error_code ec;
  for (fs::directory_iterator p("/proc", ec), end; !ec && p != end; p.increment(ec)) {
    const std::string name = p->path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    const pid_t pid = std::stoi(name);
    if (pid == getpid()) continue;
    std::error_code e;
    bool ours = fs::read_symlink(p->path() / "cwd", e).string().starts_with(prefix);
    for (fs::directory_iterator fd(p->path() / "fd", e), fd_end; !ours && !e && fd != fd_end;
         fd.increment(e)) {
      ours = fs::read_symlink(fd->path(), e).string().starts_with(prefix);
    }
    if (ours) kill(pid, SIGKILL);
  }
}

}  // namespace convlab::test
