// A program that misbehaves on request, run inside the sandbox by test_sandbox. Each mode is
// one thing a hostile submission might do; it reports what happened on stdout.
//
//   sandbox_probe MODE [ARGS...]
//     print TEXT            TEXT on stdout, "err:" TEXT on stderr
//     exit CODE             exits with CODE
//     env                   every environment variable, one a line, sorted
//     fds                   the open file descriptors, space-separated
//     whoami                uid gid groups pid pgid cwd
//     channel BYTES SEED    BYTES pseudo-random bytes (SEED) on the result channel, with
//                           progress lines on stdout
//     sleep-forever MARK    sleeps (MARK only tags the command line)
//     sleepers N MARK       forks N children that sleep, then sleeps
//     fork-bomb N MARK      forks up to N sleeping children; prints how many it got, exits 0
//     daemon MARK           a double-forked, setsid() sleeper; the probe itself exits 0
//     segfault | abort      crashes
//     cpu-burn              spins forever
//     big-file PATH BYTES   writes a file of BYTES bytes
//     endless-output S      writes forever to S (stdout or stderr)
//     endless-channel       writes forever to the result channel
//     write-file PATH       creates PATH; prints "wrote" or "cannot write: ERROR"
//     read-file PATH        prints "read N bytes" or "cannot read: ERROR"
//     network               the network interfaces, then a connection to 1.1.1.1:53
//     processes             how many processes /proc lists
//     shm-create KEY BYTES  makes a SysV shared-memory segment (kept after exit); prints its id
//     shm-find KEY          prints "found N bytes" or "no segment: ERROR"
//     hog MIB [MS]          allocates and touches MIB MiB in 64 MiB steps, printing each step,
//                           then holds it MS milliseconds
//     fill-tmp MIB FILES    writes MIB MiB into $TMPDIR/big, then FILES empty files; prints
//                           how far it got and why it stopped
//     extra-fds             reads one line from each fd of $CONVLAB_EXTRA_FDS and prints it
//     exists PATH...        "PATH yes" or "PATH no" for each
#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/ipc.h>
#include <sys/shm.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <set>
#include <string>
#include <vector>

extern char** environ;

namespace {

[[noreturn]] void sleep_forever() {
  for (;;) pause();
}

std::string error_text() {
  return std::strerror(errno);
}

// The same generator as the test's: xorshift64*, one byte per step.
std::uint8_t next_byte(std::uint64_t& state) {
  state ^= state >> 12;
  state ^= state << 25;
  state ^= state >> 27;
  return static_cast<std::uint8_t>((state * 2685821657736338717ull) >> 56);
}

bool write_all(int fd, const char* data, std::size_t n) {
  while (n > 0) {
    const ssize_t w = write(fd, data, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    data += w;
    n -= static_cast<std::size_t>(w);
  }
  return true;
}

int usage() {
  std::fprintf(stderr, "usage: sandbox_probe MODE [ARGS...] (see the source for the modes)\n");
  return 2;
}

int run(const std::vector<std::string>& a) {
  const std::string& mode = a[0];
  const auto arg = [&](std::size_t i) -> const std::string& {
    if (i >= a.size()) {
      std::fprintf(stderr, "sandbox_probe %s: missing argument %zu\n", mode.c_str(), i);
      std::exit(2);
    }
    return a[i];
  };

  if (mode == "print") {
    std::printf("%s\n", arg(1).c_str());
    std::fprintf(stderr, "err:%s\n", arg(1).c_str());
    return 0;
  }
  if (mode == "exit") return std::atoi(arg(1).c_str());
  if (mode == "env") {
    std::vector<std::string> vars;
    for (char** e = environ; *e != nullptr; ++e) vars.emplace_back(*e);
    std::sort(vars.begin(), vars.end());
    for (const std::string& v : vars) std::printf("%s\n", v.c_str());
    return 0;
  }
  if (mode == "fds") {
    DIR* dir = opendir("/proc/self/fd");
    if (dir == nullptr) return 1;
    std::set<int> fds;
    while (const dirent* e = readdir(dir)) {
      if (e->d_name[0] != '.') fds.insert(std::atoi(e->d_name));
    }
    fds.erase(dirfd(dir));
    closedir(dir);
    for (int fd : fds) std::printf("%d ", fd);
    std::printf("\n");
    return 0;
  }
  if (mode == "whoami") {
    gid_t groups[64];
    const int n = getgroups(64, groups);
    std::string group_list;
    for (int i = 0; i < n; ++i) {
      if (i > 0) group_list += ',';
      group_list += std::to_string(groups[i]);
    }
    char cwd[4096] = "";
    if (getcwd(cwd, sizeof cwd) == nullptr) std::strcpy(cwd, "?");
    std::printf("uid=%d gid=%d groups=%s pid=%d pgid=%d cwd=%s\n", static_cast<int>(getuid()),
                static_cast<int>(getgid()), group_list.c_str(), static_cast<int>(getpid()),
                static_cast<int>(getpgrp()), cwd);
    return 0;
  }
  if (mode == "channel") {
    const char* fd_text = std::getenv("CONVLAB_RESULT_FD");
    if (fd_text == nullptr) {
      std::printf("no CONVLAB_RESULT_FD\n");
      return 1;
    }
    const int fd = std::atoi(fd_text);
    const std::size_t total = std::strtoull(arg(1).c_str(), nullptr, 10);
    std::uint64_t state = std::strtoull(arg(2).c_str(), nullptr, 10) | 1;
    std::vector<char> chunk(100000);
    for (std::size_t done = 0; done < total;) {
      const std::size_t n = std::min(chunk.size(), total - done);
      for (std::size_t i = 0; i < n; ++i) chunk[i] = static_cast<char>(next_byte(state));
      if (!write_all(fd, chunk.data(), n)) {
        std::printf("channel write failed: %s\n", error_text().c_str());
        return 1;
      }
      done += n;
      std::printf("progress %zu\n", done);
    }
    return 0;
  }
  if (mode == "sleep-forever") sleep_forever();
  if (mode == "sleepers" || mode == "fork-bomb") {
    const int n = std::atoi(arg(1).c_str());
    int forked = 0;
    std::string error;
    for (int i = 0; i < n; ++i) {
      const pid_t pid = fork();
      if (pid == 0) sleep_forever();
      if (pid < 0) {
        error = error_text();
        break;
      }
      ++forked;
    }
    std::printf("forked %d of %d%s%s\n", forked, n, error.empty() ? "" : ": ", error.c_str());
    std::fflush(stdout);
    if (mode == "sleepers") sleep_forever();
    return 0;
  }
  if (mode == "daemon") {
    const pid_t first = fork();
    if (first == 0) {
      setsid();
      if (fork() == 0) {
        // A daemon closes its streams so that nobody waits for them.
        const int null = open("/dev/null", O_RDWR);
        for (int fd = 0; fd < 16; ++fd) {
          if (fd != null) dup2(null, fd);
        }
        sleep_forever();
      }
      _exit(0);
    }
    waitpid(first, nullptr, 0);
    std::printf("daemon started\n");
    return 0;
  }
  if (mode == "segfault") {
    volatile int* volatile p = nullptr;
    *p = 1;
    return 0;
  }
  if (mode == "abort") std::abort();
  if (mode == "cpu-burn") {
    volatile std::uint64_t x = 0;
    for (;;) x = x + 1;
  }
  if (mode == "big-file") {
    FILE* f = std::fopen(arg(1).c_str(), "wb");
    if (f == nullptr) {
      std::printf("cannot write: %s\n", error_text().c_str());
      return 1;
    }
    const std::size_t total = std::strtoull(arg(2).c_str(), nullptr, 10);
    std::vector<char> block(65536, 'x');
    for (std::size_t done = 0; done < total; done += block.size()) {
      if (std::fwrite(block.data(), 1, block.size(), f) != block.size()) {
        std::printf("write failed: %s\n", error_text().c_str());
        return 1;
      }
    }
    std::fclose(f);
    std::printf("wrote %zu bytes\n", total);
    return 0;
  }
  if (mode == "endless-output" || mode == "endless-channel") {
    const int fd = mode == "endless-channel" ? 3 : arg(1) == "stderr" ? 2 : 1;
    std::string line(99, 'y');
    line += '\n';
    for (;;) {
      if (!write_all(fd, line.data(), line.size())) return 1;
    }
  }
  if (mode == "write-file") {
    const int fd = open(arg(1).c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) {
      std::printf("cannot write: %s\n", error_text().c_str());
      return 1;
    }
    const bool ok = write_all(fd, "written by the probe\n", 21);
    close(fd);
    std::printf(ok ? "wrote\n" : "cannot write: short write\n");
    return ok ? 0 : 1;
  }
  if (mode == "read-file") {
    const int fd = open(arg(1).c_str(), O_RDONLY);
    if (fd < 0) {
      std::printf("cannot read: %s\n", error_text().c_str());
      return 1;
    }
    char buf[65536];
    std::size_t total = 0;
    ssize_t n;
    while ((n = read(fd, buf, sizeof buf)) > 0) total += static_cast<std::size_t>(n);
    close(fd);
    std::printf("read %zu bytes\n", total);
    return 0;
  }
  if (mode == "network") {
    std::set<std::string> names;
    ifaddrs* list = nullptr;
    if (getifaddrs(&list) == 0) {
      for (ifaddrs* i = list; i != nullptr; i = i->ifa_next) names.insert(i->ifa_name);
      freeifaddrs(list);
    }
    std::string joined;
    for (const std::string& n : names) {
      if (!joined.empty()) joined += ',';
      joined += n;
    }
    std::printf("interfaces: %s\n", joined.c_str());
    const int s = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    if (s < 0) {
      std::printf("no socket: %s\n", error_text().c_str());
      return 1;
    }
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(53);
    inet_pton(AF_INET, "1.1.1.1", &addr.sin_addr);
    int rc = connect(s, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
    if (rc != 0 && errno == EINPROGRESS) {
      pollfd p{s, POLLOUT, 0};
      rc = poll(&p, 1, 3000) == 1 ? 0 : -1;
      int err = rc == 0 ? 0 : ETIMEDOUT;
      socklen_t len = sizeof err;
      if (rc == 0) getsockopt(s, SOL_SOCKET, SO_ERROR, &err, &len);
      errno = err;
      rc = err == 0 ? 0 : -1;
    }
    std::printf(rc == 0 ? "connected\n" : "cannot connect: %s\n", error_text().c_str());
    return rc == 0 ? 0 : 1;
  }
  if (mode == "processes") {
    DIR* dir = opendir("/proc");
    int n = 0;
    while (const dirent* e = dir ? readdir(dir) : nullptr) {
      if (e->d_name[0] >= '1' && e->d_name[0] <= '9') ++n;
    }
    if (dir) closedir(dir);
    std::printf("processes=%d\n", n);
    return 0;
  }
  if (mode == "shm-create") {
    const int id = shmget(static_cast<key_t>(std::atoi(arg(1).c_str())),
                          std::strtoull(arg(2).c_str(), nullptr, 10), IPC_CREAT | 0666);
    if (id < 0) {
      std::printf("cannot create: %s\n", error_text().c_str());
      return 1;
    }
    std::printf("created %d\n", id);
    return 0;
  }
  if (mode == "shm-find") {
    const int id = shmget(static_cast<key_t>(std::atoi(arg(1).c_str())), 0, 0);
    shmid_ds ds{};
    if (id < 0 || shmctl(id, IPC_STAT, &ds) != 0) {
      std::printf("no segment: %s\n", error_text().c_str());
      return 1;
    }
    std::printf("found %zu bytes\n", static_cast<std::size_t>(ds.shm_segsz));
    return 0;
  }
  if (mode == "hog") {
    const long total = std::atol(arg(1).c_str());
    std::vector<char*> blocks;
    for (long mib = 0; mib < total; mib += 64) {
      char* block = static_cast<char*>(std::malloc(64u << 20));
      if (block == nullptr) {
        std::printf("malloc failed at %ld MiB: out of memory\n", mib);
        std::fflush(stdout);
        return 3;
      }
      std::memset(block, 1, 64u << 20);
      blocks.push_back(block);
      std::printf("%ld MiB\n", mib + 64);
      std::fflush(stdout);
    }
    if (a.size() > 2) usleep(static_cast<useconds_t>(std::atol(a[2].c_str())) * 1000);  // held
    return 0;
  }
  if (mode == "fill-tmp") {
    const char* tmp = std::getenv("TMPDIR");
    const std::string dir = tmp != nullptr ? tmp : "/tmp";
    const long mib = std::atol(arg(1).c_str());
    const long files = std::atol(arg(2).c_str());
    std::vector<char> chunk(1u << 20, 'x');
    const int fd = open((dir + "/big").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    long written = 0;
    std::string why = "done";
    if (fd < 0) why = error_text();
    for (; fd >= 0 && written < mib; ++written) {
      if (!write_all(fd, chunk.data(), chunk.size())) {
        why = error_text();
        break;
      }
    }
    if (fd >= 0) close(fd);
    std::printf("wrote %ld MiB: %s\n", written, why.c_str());
    unlink((dir + "/big").c_str());
    long made = 0;
    why = "done";
    for (; made < files; ++made) {
      const int f = open((dir + "/f" + std::to_string(made)).c_str(), O_WRONLY | O_CREAT, 0600);
      if (f < 0) {
        why = error_text();
        break;
      }
      close(f);
    }
    std::printf("made %ld files: %s\n", made, why.c_str());
    return 0;
  }
  if (mode == "extra-fds") {
    const char* list = std::getenv("CONVLAB_EXTRA_FDS");
    std::printf("CONVLAB_EXTRA_FDS=%s\n", list != nullptr ? list : "");
    for (const char* c = list; c != nullptr && *c != '\0';) {
      const int fd = std::atoi(c);
      char buf[256] = {};
      const ssize_t n = read(fd, buf, sizeof buf - 1);
      std::printf("fd %d: %s\n", fd, n > 0 ? buf : error_text().c_str());
      c = std::strchr(c, ',');
      if (c != nullptr) ++c;
    }
    return 0;
  }
  if (mode == "exists") {
    for (std::size_t i = 1; i < a.size(); ++i) {
      std::printf("%s %s\n", a[i].c_str(), access(a[i].c_str(), F_OK) == 0 ? "yes" : "no");
    }
    return 0;
  }
  return usage();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) return usage();
  return run(std::vector<std::string>(argv + 1, argv + argc));
}
