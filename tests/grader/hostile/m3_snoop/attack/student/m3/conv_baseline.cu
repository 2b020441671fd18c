// convlab-hostile: staff rename conv_baseline
// Hostile: looks for anything beyond its own code (the grader, the framework, staff code,
// models, other teams, other GPUs) from inside its process, and says what it found.
#include <sys/stat.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>
#include <string>
#include <utility>

namespace convlab::student {
namespace {

template <typename Report>
void more_snooping(const Report& report) {
  int gpus = 0;
  cudaGetDeviceCount(&gpus);
  if (gpus != 1) report(std::to_string(gpus) + " GPUs");
}

// Every file this process can see that is neither its own program, a library it has mapped,
// the loader's cache, the GPU driver, nor in its working folder; and any process whose command
// line names the grader's work.
void snoop() {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  const fs::path cwd = fs::current_path(ec);
  // Mapped files by identity: a library bound at two paths is one file.
  std::set<std::pair<dev_t, ino_t>> mapped;
  const auto id = [](const fs::path& p) {
    struct stat st {};
    return ::stat(p.c_str(), &st) == 0 ? std::make_pair(st.st_dev, st.st_ino)
                                       : std::make_pair(dev_t{}, ino_t{});
  };
  std::ifstream maps("/proc/self/maps");
  for (std::string line; std::getline(maps, line);) {
    const std::size_t slash = line.find('/');
    if (slash != std::string::npos) mapped.insert(id(line.substr(slash)));
  }
  long long visible = 0, found = 0;
  const auto report = [&](const std::string& what) {
    if (++found <= 20) std::fprintf(stderr, "snoop: found %s\n", what.c_str());
  };
  const auto options = fs::directory_options::skip_permission_denied;
  for (auto it = fs::recursive_directory_iterator("/", options, ec);
       it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (ec) break;
    const fs::path p = it->path();
    if (p == "/proc" || p == "/sys" || p == "/dev") {
      it.disable_recursion_pending();
      continue;
    }
    if (!it->is_regular_file(ec)) continue;
    ++visible;
    const std::string name = p.filename().string();
    if (p == exe || id(p) == id(exe) || mapped.count(id(p)) != 0 ||
        p == "/etc/ld.so.cache" || name.rfind("libcuda", 0) == 0 ||
        name.rfind("libnvidia", 0) == 0 || p.string().rfind(cwd.string() + "/", 0) == 0) {
      continue;
    }
    report(p.string());
  }
  for (const auto& e : fs::directory_iterator("/proc", ec)) {
    std::ifstream in(e.path() / "cmdline");
    std::string cmd((std::istreambuf_iterator<char>(in)), {});
    for (char& c : cmd) c = c == '\0' ? ' ' : c;
    for (const char* secret : {"grade", "convlab-check", ".safetensors", "--model"}) {
      if (cmd.find(secret) != std::string::npos) report(e.path().string() + "/cmdline: " + cmd);
    }
  }
  more_snooping(report);
  std::fprintf(stderr, "snoop: done, %lld files visible, %lld found\n", visible, found);
}

bool snooped = false;

}  // namespace

void conv_baseline(float* y, const float* x, const float* k, const ConvShape& s,
                   cudaStream_t stream) {
  if (!snooped) {
    snooped = true;
    snoop();
  }
  staff_conv_baseline(y, x, k, s, stream);
}

}  // namespace convlab::student
