// The pristine copy of the framework a submission is built in, and which framework files a team
// may hand in unchanged.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <fstream>
#include <system_error>

#include "grader/builder/build_detail.hpp"
#include "reference/core/error.hpp"

namespace convlab::grader::build_detail {
namespace fs = std::filesystem;

namespace {

// What a build needs from the top of the tree; tests/, tools/, docs/, build folders and the
// data stay out.
constexpr std::array<std::string_view, 7> kCopiedFolders = {
    "cmake", "reference", "student", "datasets", "grader", "milestones", "cli"};
// The staff tree's hook (cmake/ConvlabStaff.cmake adds the staff solutions, staff tools and
// their tests): the pristine copy builds as the student kit does, without it.
constexpr std::string_view kStaffHook = "cmake/ConvlabStaff.cmake";

std::vector<std::string_view> components(std::string_view rel) {
  std::vector<std::string_view> parts;
  std::size_t start = 0;
  while (start <= rel.size()) {
    const std::size_t slash = rel.find('/', start);
    const std::size_t end = slash == std::string_view::npos ? rel.size() : slash;
    if (end > start) parts.push_back(rel.substr(start, end - start));
    if (slash == std::string_view::npos) break;
    start = slash + 1;
  }
  return parts;
}

bool is_solutions(std::string_view rel) {
  return rel == "reference/solutions" || rel.starts_with("reference/solutions/");
}

bool has_git(const std::vector<std::string_view>& parts) {
  return std::find(parts.begin(), parts.end(), ".git") != parts.end();
}

}  // namespace

bool in_pristine_copy(std::string_view rel) {
  const auto parts = components(rel);
  if (parts.empty() || has_git(parts) || is_solutions(rel) || rel == kStaffHook) return false;
  if (parts.size() == 1) return parts[0] == "CMakeLists.txt";
  return std::find(kCopiedFolders.begin(), kCopiedFolders.end(), parts[0]) != kCopiedFolders.end();
}

bool is_framework_file(std::string_view rel) {
  const auto parts = components(rel);
  if (parts.empty() || has_git(parts) || is_solutions(rel)) return false;
  const std::string_view top = parts[0];
  return !(top.starts_with("build") || top == ".data");
}

std::vector<std::string> pristine_files(const fs::path& framework_root) {
  std::vector<std::string> files;
  std::error_code ec;
  if (fs::is_regular_file(fs::symlink_status(framework_root / "CMakeLists.txt", ec))) {
    files.emplace_back("CMakeLists.txt");
  }
  for (const std::string_view folder : kCopiedFolders) {
    const fs::path top = framework_root / folder;
    if (!fs::is_directory(fs::symlink_status(top, ec))) continue;
    fs::recursive_directory_iterator it(top, fs::directory_options::none, ec), end;
    if (ec) throw Error("cannot read the framework folder " + top.string() + ": " + ec.message());
    for (; it != end; it.increment(ec)) {
      if (ec) throw Error("cannot read the framework under " + top.string() + ": " + ec.message());
      const std::string rel = it->path().lexically_relative(framework_root).generic_string();
      const fs::file_status status = it->symlink_status(ec);
      if (fs::is_directory(status)) {
        if (!in_pristine_copy(rel + "/x")) it.disable_recursion_pending();
        continue;
      }
      if (fs::is_regular_file(status) && in_pristine_copy(rel)) files.push_back(rel);
    }
  }
  std::sort(files.begin(), files.end());
  return files;
}

void copy_pristine(const fs::path& framework_root, const fs::path& dest) {
  std::error_code ec;
  fs::create_directories(dest, ec);
  if (ec) throw Error("cannot create " + dest.string() + ": " + ec.message());
  for (const std::string& rel : pristine_files(framework_root)) {
    const fs::path target = dest / rel;
    fs::create_directories(target.parent_path(), ec);
    if (!ec) fs::copy_file(framework_root / rel, target, fs::copy_options::overwrite_existing, ec);
    if (ec) {
      throw Error("cannot copy the framework file " + rel + " into " + dest.string() + ": " +
                  ec.message() + "; check the free space and permissions there");
    }
  }
  // A top level that adds docs/ without checking it exists still configures without it.
  const auto top = read_regular_file(dest / "CMakeLists.txt", 1u << 20);
  if (top && top->find("add_subdirectory(docs)") != std::string::npos &&
      top->find("docs/CMakeLists.txt") == std::string::npos &&
      !fs::exists(dest / "docs" / "CMakeLists.txt", ec)) {
    fs::create_directories(dest / "docs", ec);
    std::ofstream(dest / "docs" / "CMakeLists.txt")
        << "# The documentation is not part of the grader's copy of the framework.\n";
  }
}

std::optional<std::string> read_regular_file(const fs::path& path, std::size_t max_bytes) {
  const int fd = open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return std::nullopt;
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) ||
      static_cast<std::uint64_t>(st.st_size) > max_bytes) {
    close(fd);
    return std::nullopt;
  }
  std::string text;
  text.resize(static_cast<std::size_t>(st.st_size));
  std::size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = read(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    done += static_cast<std::size_t>(n);
  }
  close(fd);
  if (done != text.size()) return std::nullopt;
  return text;
}

}  // namespace convlab::grader::build_detail
