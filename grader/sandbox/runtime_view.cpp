#include "grader/sandbox/runtime_view.hpp"

#include <elf.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <deque>
#include <fstream>
#include <set>
#include <sstream>

#include "reference/core/error.hpp"
#include "reference/core/text.hpp"

namespace convlab::grader {

namespace fs = std::filesystem;

namespace {

// Strings of the dynamic section and segments larger than this are not a real binary's.
constexpr std::uint64_t kMaxTable = 64ull << 20;

class ElfFile {
 public:
  explicit ElfFile(const fs::path& path) : path_(path), in_(path, std::ios::binary) {
    if (!in_) throw Error("cannot read " + path.string());
  }

  template <typename T>
  T read_at(std::uint64_t offset) {
    T value;
    read_bytes(offset, &value, sizeof value);
    return value;
  }

  std::string read_string_table(std::uint64_t offset, std::uint64_t size) {
    if (size > kMaxTable) malformed("a string table too large");
    std::string s(size, '\0');
    read_bytes(offset, s.data(), size);
    return s;
  }

  void read_bytes(std::uint64_t offset, void* out, std::uint64_t size) {
    in_.clear();
    in_.seekg(static_cast<std::streamoff>(offset));
    in_.read(static_cast<char*>(out), static_cast<std::streamsize>(size));
    if (!in_ || static_cast<std::uint64_t>(in_.gcount()) != size) malformed("a truncated table");
  }

  [[noreturn]] void malformed(const std::string& what) const {
    throw Error(path_.string() + " is not a usable ELF file: " + what);
  }

 private:
  fs::path path_;
  std::ifstream in_;
};

// "$ORIGIN" and "${ORIGIN}" in a search path stand for the folder of the object.
std::vector<fs::path> search_path(const std::string& text, const fs::path& origin) {
  std::vector<fs::path> dirs;
  std::stringstream ss(text);
  for (std::string dir; std::getline(ss, dir, ':');) {
    for (const char* token : {"${ORIGIN}", "$ORIGIN"}) {
      for (std::size_t at; (at = dir.find(token)) != std::string::npos;) {
        dir.replace(at, std::strlen(token), origin.string());
      }
    }
    if (!dir.empty()) dirs.emplace_back(dir);
  }
  return dirs;
}

std::string string_at(const ElfFile& f, const std::string& table, std::uint64_t offset) {
  if (offset >= table.size()) f.malformed("a name outside its string table");
  return std::string(table.c_str() + offset);
}

const std::vector<fs::path> kDefaultLibraryDirs = {"/lib/x86_64-linux-gnu",
                                                   "/usr/lib/x86_64-linux-gnu",
                                                   "/lib/aarch64-linux-gnu",
                                                   "/usr/lib/aarch64-linux-gnu",
                                                   "/lib64",
                                                   "/usr/lib64",
                                                   "/lib",
                                                   "/usr/lib"};

bool is_digit(char c) {
  return c >= '0' && c <= '9';
}

bool is_file(const fs::path& p) {
  std::error_code ec;
  return fs::is_regular_file(p, ec);  // follows links
}

}  // namespace

const std::vector<std::string> kCudaDriverLibraries = {
    "libcuda.so.1", "libnvidia-ptxjitcompiler.so.1", "libnvidia-gpucomp.so", "libnvidia-nvvm.so"};

const std::vector<fs::path> kPlainDevices = {"/dev/null", "/dev/zero", "/dev/full", "/dev/random",
                                             "/dev/urandom"};

ElfDependencies read_elf_dependencies(const fs::path& file) {
  ElfFile f(file);
  const auto eh = f.read_at<Elf64_Ehdr>(0);
  if (std::memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0) f.malformed("no ELF header");
  if (eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_ident[EI_DATA] != ELFDATA2LSB) {
    f.malformed("not a 64-bit little-endian object");
  }
  if (eh.e_phentsize != sizeof(Elf64_Phdr) || eh.e_phnum > 4096) f.malformed("odd program headers");
  std::vector<Elf64_Phdr> ph(eh.e_phnum);
  for (std::size_t i = 0; i < ph.size(); ++i) {
    ph[i] = f.read_at<Elf64_Phdr>(eh.e_phoff + i * sizeof(Elf64_Phdr));
  }
  ElfDependencies deps;
  const fs::path origin = fs::canonical(file).parent_path();
  std::vector<Elf64_Dyn> dynamic;
  for (const Elf64_Phdr& p : ph) {
    if (p.p_type == PT_INTERP) {
      const std::string s = f.read_string_table(p.p_offset, p.p_filesz);
      deps.interpreter = fs::path(std::string(s.c_str()));
    } else if (p.p_type == PT_DYNAMIC) {
      if (p.p_filesz > kMaxTable) f.malformed("a dynamic section too large");
      dynamic.resize(p.p_filesz / sizeof(Elf64_Dyn));
      if (!dynamic.empty()) {
        f.read_bytes(p.p_offset, dynamic.data(), dynamic.size() * sizeof(Elf64_Dyn));
      }
    }
  }
  if (dynamic.empty()) return deps;  // static: nothing to load
  std::uint64_t strtab = 0, strsz = 0;
  for (const Elf64_Dyn& d : dynamic) {
    if (d.d_tag == DT_STRTAB) strtab = d.d_un.d_ptr;
    if (d.d_tag == DT_STRSZ) strsz = d.d_un.d_val;
  }
  // The string table's address, as a file offset through the segment that loads it.
  std::optional<std::uint64_t> strtab_offset;
  for (const Elf64_Phdr& p : ph) {
    if (p.p_type == PT_LOAD && strtab >= p.p_vaddr && strtab + strsz <= p.p_vaddr + p.p_filesz) {
      strtab_offset = strtab - p.p_vaddr + p.p_offset;
    }
  }
  if (!strtab_offset) f.malformed("no loaded string table");
  const std::string table = f.read_string_table(*strtab_offset, strsz);
  for (const Elf64_Dyn& d : dynamic) {
    if (d.d_tag == DT_NEEDED) deps.needed.push_back(string_at(f, table, d.d_un.d_val));
    if (d.d_tag == DT_RPATH) deps.rpath = search_path(string_at(f, table, d.d_un.d_val), origin);
    if (d.d_tag == DT_RUNPATH) {
      deps.runpath = search_path(string_at(f, table, d.d_un.d_val), origin);
    }
  }
  return deps;
}

std::optional<fs::path> resolve_library(const std::string& soname, const ElfDependencies& from,
                                        const std::string& ld_library_path,
                                        const std::map<std::string, fs::path>& cache) {
  if (soname.find('/') != std::string::npos) {
    return is_file(soname) ? std::optional<fs::path>(soname) : std::nullopt;
  }
  std::vector<fs::path> dirs;
  if (from.runpath.empty()) dirs = from.rpath;
  for (const fs::path& d : search_path(ld_library_path, "")) dirs.push_back(d);
  dirs.insert(dirs.end(), from.runpath.begin(), from.runpath.end());
  for (const fs::path& d : dirs) {
    if (is_file(d / soname)) return d / soname;
  }
  if (auto it = cache.find(soname); it != cache.end() && is_file(it->second)) return it->second;
  for (const fs::path& d : kDefaultLibraryDirs) {
    if (is_file(d / soname)) return d / soname;
  }
  return std::nullopt;
}

std::map<std::string, fs::path> loader_cache() {
#if defined(__aarch64__)
  const std::string kind = "AArch64";
#else
  const std::string kind = "x86-64";
#endif
  std::map<std::string, fs::path> cache;
  for (const char* cmd : {"/sbin/ldconfig -p 2>/dev/null", "/usr/sbin/ldconfig -p 2>/dev/null",
                          "ldconfig -p 2>/dev/null"}) {
    FILE* p = ::popen(cmd, "r");
    if (p == nullptr) continue;
    std::string text;
    char buf[4096];
    for (std::size_t n; (n = std::fread(buf, 1, sizeof buf, p)) > 0;) text.append(buf, n);
    const int status = ::pclose(p);
    if (status != 0 || text.empty()) continue;
    // "\tlibcuda.so.1 (libc6,x86-64) => /usr/lib/x86_64-linux-gnu/libcuda.so.1"
    std::stringstream ss(text);
    for (std::string line; std::getline(ss, line);) {
      const std::size_t open = line.find(" ("), arrow = line.find(") => ");
      if (open == std::string::npos || arrow == std::string::npos || arrow < open) continue;
      if (line.substr(open, arrow - open).find(kind) == std::string::npos) continue;
      cache.emplace(trim(line.substr(0, open)), trim(line.substr(arrow + 5)));
    }
    break;
  }
  return cache;
}

std::vector<fs::path> linking_closure(const std::vector<fs::path>& programs,
                                      const std::vector<std::string>& dlopened,
                                      const std::string& ld_library_path) {
  const std::map<std::string, fs::path> cache = loader_cache();
  std::set<fs::path> files;
  std::set<fs::path> read;  // real files whose dependencies are queued
  std::deque<fs::path> queue;
  const auto add = [&](const fs::path& named) {
    files.insert(named);
    std::error_code ec;
    const fs::path real = fs::canonical(named, ec);
    if (ec) return;
    files.insert(real);
    if (read.insert(real).second) queue.push_back(real);
  };
  // The programs themselves are not part of it: the run gets its own copy.
  for (const fs::path& p : programs) queue.push_back(fs::canonical(p));
  for (const std::string& name : dlopened) {
    if (auto found = resolve_library(name, {}, ld_library_path, cache)) {
      add(*found);
      continue;
    }
    // A name without its version ("libnvidia-gpucomp.so"): every version the cache lists.
    for (const auto& [soname, path] : cache) {
      if (soname.rfind(name + ".", 0) == 0 && is_file(path)) add(path);
    }
  }
  while (!queue.empty()) {
    const fs::path file = queue.front();
    queue.pop_front();
    const ElfDependencies deps = read_elf_dependencies(file);
    if (deps.interpreter) add(*deps.interpreter);
    for (const std::string& name : deps.needed) {
      const auto found = resolve_library(name, deps, ld_library_path, cache);
      if (!found) {
        throw Error(file.string() + " needs " + name +
                    ", which the dynamic loader cannot find on this machine");
      }
      add(*found);
    }
  }
  return {files.begin(), files.end()};
}

GpuAssignment assign_gpu(const std::string& cuda_visible_devices, const fs::path& proc_gpus,
                         const fs::path& dev) {
  struct Gpu {
    std::string uuid;
    std::string minor;
  };
  std::vector<std::pair<std::string, Gpu>> gpus;  // by PCI bus id
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(proc_gpus, ec)) {
    std::ifstream in(e.path() / "information");
    Gpu g;
    for (std::string line; std::getline(in, line);) {
      const std::size_t colon = line.find(':');
      if (colon == std::string::npos) continue;
      const std::string key = trim(line.substr(0, colon)), value = trim(line.substr(colon + 1));
      if (key == "GPU UUID") g.uuid = value;
      if (key == "Device Minor") g.minor = value;
    }
    // Only the GPUs this process may open count: under a device cgroup (Slurm's
    // ConstrainDevices) the indices are those of the allowed GPUs, as CUDA numbers them.
    const fs::path node = dev / ("nvidia" + g.minor);
    const int fd = g.minor.empty() ? -1 : ::open(node.c_str(), O_RDWR | O_CLOEXEC);
    if (fd < 0) continue;
    ::close(fd);
    gpus.emplace_back(e.path().filename().string(), g);
  }
  std::sort(gpus.begin(), gpus.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  const std::string first = trim(cuda_visible_devices.substr(0, cuda_visible_devices.find(',')));
  std::optional<Gpu> chosen;
  if (first.empty() && !gpus.empty()) {
    chosen = gpus.front().second;
  } else if (!first.empty() && std::all_of(first.begin(), first.end(), is_digit)) {
    const std::size_t i = std::stoul(first);
    if (i < gpus.size()) chosen = gpus[i].second;
  } else if (first.rfind("GPU-", 0) == 0) {
    for (const auto& [bus, g] : gpus) {
      if (g.uuid.rfind(first, 0) == 0) chosen = g;
    }
  }
  GpuAssignment a;
  const auto add_node = [&](const fs::path& p) {
    if (fs::exists(p, ec)) a.nodes.push_back(p);
  };
  for (const char* name : {"nvidiactl", "nvidia-uvm", "nvidia-uvm-tools", "nvidia-caps"}) {
    add_node(dev / name);
  }
  if (chosen && !chosen->uuid.empty()) {
    add_node(dev / ("nvidia" + chosen->minor));
    a.visible_devices = chosen->uuid;
    return a;
  }
  // The driver does not say which node is which: every GPU's, and the variable as given.
  for (const auto& e : fs::directory_iterator(dev, ec)) {
    const std::string name = e.path().filename().string();
    if (name.size() > 6 && name.rfind("nvidia", 0) == 0 &&
        std::all_of(name.begin() + 6, name.end(), is_digit)) {
      a.nodes.push_back(e.path());
    }
  }
  std::sort(a.nodes.begin(), a.nodes.end());
  a.visible_devices = cuda_visible_devices;
  return a;
}

}  // namespace convlab::grader
