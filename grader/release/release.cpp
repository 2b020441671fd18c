#include "grader/release/release.hpp"

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <ctime>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>

#include "grader/kit/kit_rules.hpp"
#include "reference/core/error.hpp"
#include "reference/core/files.hpp"
#include "reference/milestones/milestone.hpp"

namespace convlab::grader {

namespace fs = std::filesystem;

namespace {

// The release rule, in one place. The top level is an allow-list, so a new staff folder stays
// out until someone decides it belongs in the kit; inside it, kStaffOnly names what stays out.
const std::set<std::string> kTopFiles{".clang-format", ".gitignore",  "CHANGELOG.md", "CMakeLists.txt",
                                      "CMakePresets.json", "LICENSE", "README.md"};
const std::set<std::string> kTopDirs{"cli",        "cmake",     "datasets", "docs",  "grader",
                                     "milestones", "reference", "student",  "tests", "tools"};
// Inside tools/, only the scripts a team runs.
const std::set<std::string> kTeamTools{"tools/setup.sh", "tools/test.sh", "tools/preset.sh",
                                       "tools/gpu-check.sh"};
// Staff-only paths (a file or a whole folder), with the reason shown in the manifest. The
// grader's suites are all here: the hostile submissions and several build and grade tests
// hold working convolutions, and the others test staff tools.
const std::map<std::string, std::string> kStaffOnly{
    {"cmake/ConvlabStaff.cmake", "the staff tree's build hook (adds the staff-only parts)"},
    {"reference/solutions", "staff solutions"},
    {"docs/instructor.md", "instructor guide"},
    {"grader/class", "class grading (staff)"},
    {"grader/release", "the release tool (staff)"},
    {"grader/service", "the submission service's server (staff; the kit has its client)"},
    {"grader/gradescope", "Gradescope autograder scripts (staff)"},
    {"tests/grader", "grader tests (staff: hostile submissions, staff code, staff tools)"},
    {"tests/tools", "tests of staff tools"},
};
// Files of the kit that differ from the staff tree's: kKitOverlay/X becomes X in the kit (its
// own README, setup script and GPU check).
const fs::path kKitOverlay = "grader/release/kit";

bool is_junk_name(const std::string& name) {
  static const std::array<const char*, 6> suffixes{"~", ".swp", ".swo", ".orig", ".rej", ".pyc"};
  return std::any_of(suffixes.begin(), suffixes.end(),
                     [&](const char* s) { return name.ends_with(s); });
}

// A path is written into a `sha256sum` manifest line as is; refuse the few names that format
// escapes, so the manifest stays plain.
bool is_plain_name(const std::string& rel) {
  return rel.find_first_of("\\\n\r") == std::string::npos;
}

bool is_under(const fs::path& path, const fs::path& dir) {
  if (dir.empty()) return false;
  auto [d, p] = std::mismatch(dir.begin(), dir.end(), path.begin(), path.end());
  return d == dir.end();
}

std::vector<std::string> public_models(const fs::path& root) {
  std::set<std::string> names;
  for (const std::string& id : milestone_ids(root)) {
    const Milestone ms = load_milestone(root, id);
    if (!ms.default_model.empty()) names.insert(ms.default_model);
    for (const Check& c : ms.checks) names.insert(c.model);
  }
  std::vector<std::string> files;
  for (const std::string& n : names) {
    const std::string rel = "datasets/models/" + n + ".safetensors";
    if (fs::is_regular_file(root / rel)) files.push_back(rel);
  }
  return files;
}

struct Captured {
  int exit_code = -1;
  std::string out;
};

// Runs argv (no shell) in `cwd` and captures its stdout; stderr goes to ours. exit_code is
// 127 when the program cannot be started.
Captured capture(const std::vector<std::string>& argv, const fs::path& cwd) {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) throw Error(std::string("pipe failed: ") + std::strerror(errno));
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  const pid_t pid = fork();
  if (pid < 0) throw Error(std::string("fork failed: ") + std::strerror(errno));
  if (pid == 0) {
    dup2(fds[1], STDOUT_FILENO);
    const int null_in = open("/dev/null", O_RDONLY);
    if (null_in >= 0) dup2(null_in, STDIN_FILENO);
    if (chdir(cwd.c_str()) != 0) _exit(127);
    execvp(args[0], args.data());
    _exit(127);
  }
  close(fds[1]);
  Captured c;
  std::array<char, 65536> buf{};
  for (;;) {
    const ssize_t n = read(fds[0], buf.data(), buf.size());
    if (n > 0) {
      c.out.append(buf.data(), static_cast<std::size_t>(n));
    } else if (n == 0 || errno != EINTR) {
      break;
    }
  }
  close(fds[0]);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  c.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return c;
}

// "commit 1a2b3c4d5e6f" (plus a note when the tree has uncommitted changes), or empty where
// the tree is not a git checkout or git is not installed.
std::string source_commit(const fs::path& root) {
  if (!fs::exists(root / ".git")) return {};
  const Captured head =
      capture({"git", "-C", root.string(), "rev-parse", "--short=12", "HEAD"}, root);
  if (head.exit_code != 0 || head.out.empty()) return {};
  std::string text = "commit " + head.out.substr(0, head.out.find('\n'));
  const Captured dirty =
      capture({"git", "-C", root.string(), "status", "--porcelain", "--untracked-files=no"}, root);
  if (dirty.exit_code == 0 && !dirty.out.empty()) text += " with uncommitted changes";
  return text;
}

bool is_binary_data(const fs::path& p) {
  return p.extension() == ".safetensors" || p.extension() == ".gz";
}

void check_output_folder(const fs::path& root, const fs::path& out, bool force) {
  if (out == root || is_under(root, out)) {
    throw Error("--out " + out.string() + " is the framework tree or contains it; choose a " +
                "folder outside " + root.string());
  }
  if (!fs::exists(out)) return;
  if (!fs::is_directory(out)) {
    throw Error("--out " + out.string() + " exists and is not a folder; choose another path");
  }
  if (fs::is_empty(out) ||
      (fs::exists(out / ".git") &&
       std::distance(fs::directory_iterator(out), fs::directory_iterator()) == 1)) {
    return;
  }
  if (!force) {
    throw Error("--out " + out.string() + " is not empty; choose an empty or new folder, or " +
                "pass --force to replace its contents");
  }
  if (const char* home = std::getenv("HOME"); home != nullptr && *home != '\0') {
    if (fs::weakly_canonical(home) == out) {
      throw Error("--out " + out.string() + " is your home folder; choose a folder of its own");
    }
  }
  // A .git folder stays: a release can be made again inside the repository it is published
  // from, and `git diff` then shows what changed.
  for (const fs::directory_entry& e : fs::directory_iterator(out)) {
    if (e.path().filename() != ".git") fs::remove_all(e.path());
  }
}

}  // namespace

std::vector<std::string> student_entry_points(const fs::path& root) {
  const fs::path api = root / "reference/conv/student_api.hpp";
  const fs::path def = root / "reference/conv/variants.def";
  if (!fs::is_regular_file(api) && !fs::is_regular_file(def)) {
    throw Error("cannot find the student API (" + api.string() + ", " + def.string() +
                "): the release checks that no shipped file outside student/ defines it");
  }
  std::vector<std::string> names;
  // The functions declared inside `namespace student { ... }` blocks.
  const std::string text = read_file(api);
  static const std::regex block(R"(namespace student \{([^}]*)\})");
  static const std::regex fn(R"(\bvoid\s+(\w+)\s*\()");
  for (auto b = std::sregex_iterator(text.begin(), text.end(), block); b != std::sregex_iterator();
       ++b) {
    const std::string body = (*b)[1];
    for (auto f = std::sregex_iterator(body.begin(), body.end(), fn); f != std::sregex_iterator();
         ++f) {
      names.push_back((*f)[1]);
    }
  }
  const std::string variants = read_file(def);
  // Each declaration's entry points, named as student_api.hpp declares them.
  static const std::regex variant(R"(^CONVLAB_VARIANT\((\w+), \w+, (cpu|gpu), .*, (fused|unfused)\)$)",
                                  std::regex::multiline);
  for (auto v = std::sregex_iterator(variants.begin(), variants.end(), variant);
       v != std::sregex_iterator(); ++v) {
    const std::string id = (*v)[1];
    names.push_back(((*v)[2] == "cpu" ? "conv_forward_" : "conv_") + id);
    if ((*v)[3] == "fused") names.push_back("conv_tanh_maxpool_" + id);
  }
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  return names;
}

std::vector<std::string> find_definitions(const std::string& text,
                                          const std::vector<std::string>& names) {
  std::vector<std::string> found;
  const auto is_word = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; };
  for (const std::string& name : names) {
    for (std::size_t at = text.find(name); at != std::string::npos;
         at = text.find(name, at + 1)) {
      if ((at > 0 && is_word(text[at - 1])) ||
          (at + name.size() < text.size() && is_word(text[at + name.size()]))) {
        continue;
      }
      std::size_t i = at + name.size();
      while (i < text.size() && std::isspace(static_cast<unsigned char>(text[i]))) ++i;
      if (i >= text.size() || text[i] != '(') continue;
      // The parameter list, then what may stand between it and a body.
      int depth = 0;
      for (; i < text.size(); ++i) {
        if (text[i] == '(') ++depth;
        if (text[i] == ')' && --depth == 0) break;
      }
      if (i >= text.size()) continue;
      ++i;
      for (;;) {
        while (i < text.size() && std::isspace(static_cast<unsigned char>(text[i]))) ++i;
        bool skipped = false;
        for (const std::string_view word : {"const", "noexcept", "override", "final"}) {
          if (text.compare(i, word.size(), word) == 0 &&
              (i + word.size() >= text.size() || !is_word(text[i + word.size()]))) {
            i += word.size();
            skipped = true;
          }
        }
        if (!skipped) break;
      }
      if (i < text.size() && text[i] == '{') {
        const auto line = 1 + std::count(text.begin(), text.begin() + static_cast<long>(at), '\n');
        found.push_back(std::to_string(line) + ": defines " + name);
      }
    }
  }
  return found;
}

ReleasePlan plan_release(const fs::path& root_in, const fs::path& exclude) {
  const fs::path root = fs::weakly_canonical(root_in);
  if (!fs::is_regular_file(root / "CMakeLists.txt") || !fs::is_directory(root / "student")) {
    throw Error(root.string() + " is not a convlab tree (no CMakeLists.txt and student/); " +
                "set CONVLAB_ROOT to the framework's top folder");
  }
  const fs::path skip = exclude.empty() ? fs::path() : fs::weakly_canonical(exclude);
  ReleasePlan plan;
  plan.public_models = public_models(root);
  const std::set<std::string> public_set(plan.public_models.begin(), plan.public_models.end());

  std::vector<fs::directory_entry> top{fs::directory_iterator(root), fs::directory_iterator()};
  std::sort(top.begin(), top.end());
  for (const fs::directory_entry& t : top) {
    const std::string name = t.path().filename().string();
    const bool dir = t.is_directory() && !t.is_symlink();
    if (!(dir ? kTopDirs.contains(name) : kTopFiles.contains(name)) || t.is_symlink()) {
      plan.left_out.emplace_back(name + (dir ? "/" : ""), "not part of the starter kit");
      continue;
    }
    if (!dir) {
      plan.files.push_back(name);
      continue;
    }
    for (auto it = fs::recursive_directory_iterator(t.path());
         it != fs::recursive_directory_iterator(); ++it) {
      const fs::path& p = it->path();
      const std::string rel = p.lexically_relative(root).generic_string();
      const std::string base = p.filename().string();
      const bool is_dir = it->is_directory() && !it->is_symlink();
      auto leave = [&](const std::string& why) {
        plan.left_out.emplace_back(rel + (is_dir ? "/" : ""), why);
        if (is_dir) it.disable_recursion_pending();
      };
      if (!skip.empty() && is_under(p, skip)) {
        leave("the release folder itself");
      } else if (auto s = kStaffOnly.find(rel); s != kStaffOnly.end()) {
        leave(s->second);
      } else if (rel.starts_with("tools/") && !kTeamTools.contains(rel)) {
        leave("staff tool");
      } else if (it->is_symlink()) {
        leave("symbolic link");
      } else if (base.starts_with(".")) {
        leave("hidden file or folder");
      } else if (is_dir) {
        continue;
      } else if (!it->is_regular_file()) {
        leave("not a regular file");
      } else if (p.extension() == ".safetensors" && !public_set.contains(rel)) {
        plan.refused_models.push_back(rel);
        leave("model file that is not a public model (hidden models never leave staff hands)");
      } else if (is_junk_name(base)) {
        leave("editor or patch leftover");
      } else if (!is_plain_name(rel)) {
        leave("file name with a backslash or line break");
      } else {
        plan.files.push_back(rel);
      }
    }
  }
  // The kit's own files replace the staff tree's.
  if (fs::is_directory(root / kKitOverlay)) {
    for (const auto& e : fs::recursive_directory_iterator(root / kKitOverlay)) {
      if (!e.is_regular_file() || is_junk_name(e.path().filename().string())) continue;
      const std::string from = e.path().lexically_relative(root).generic_string();
      const std::string to = e.path().lexically_relative(root / kKitOverlay).generic_string();
      if (std::find(plan.files.begin(), plan.files.end(), to) == plan.files.end()) {
        plan.files.push_back(to);
      }
      plan.sources[to] = from;
    }
  }
  std::sort(plan.files.begin(), plan.files.end());
  std::sort(plan.left_out.begin(), plan.left_out.end());

  // No shipped file outside student/ may define what a team writes: a working convolution in a
  // test fixture or a helper would hand the kit's readers the answer.
  // Nor compute a convolution, the general form of the same leak; and no shipped document may
  // send a team to a file the kit does not have.
  const std::vector<std::string> names = student_entry_points(root);
  std::set<std::string> kit_paths(plan.files.begin(), plan.files.end());
  for (const std::string& f : plan.files) {
    for (fs::path d = fs::path(f).parent_path(); !d.empty(); d = d.parent_path()) {
      kit_paths.insert(d.generic_string());
    }
  }
  const auto in_kit = [&](std::string p) {
    if (p.ends_with("/")) p.pop_back();
    return kit_paths.contains(p);
  };
  for (const std::string& rel : plan.files) {
    if (rel.starts_with("student/")) continue;
    const std::string from = plan.sources.contains(rel) ? plan.sources.at(rel) : rel;
    if (is_binary_data(from)) continue;
    const std::string text = read_file(root / from);
    for (const std::string& d : find_definitions(text, names)) {
      plan.entry_point_definitions.push_back(from + ":" + d);
    }
    for (std::string& c : kit::kit_convolutions(rel, text)) {
      plan.convolutions.push_back(from == rel ? std::move(c) : from + " (as " + c + ")");
    }
    if (fs::path(rel).extension() == ".md") {
      for (std::string& m :
           kit::missing_markdown_paths(rel, kit::kit_markdown(rel, text), in_kit)) {
        plan.missing_paths.push_back(from == rel ? std::move(m) : from + " (as " + m + ")");
      }
    }
  }
  return plan;
}

ReleaseResult make_release(const ReleaseOptions& options, const ReleaseProgressFn& progress) {
  auto say = [&](const std::string& line) {
    if (progress) progress(line);
  };
  if (options.out.empty()) throw Error("--out is required: the folder the starter kit goes to");
  const fs::path root = fs::weakly_canonical(options.root);
  const fs::path out = fs::weakly_canonical(fs::absolute(options.out));
  ReleaseResult result;
  result.plan = plan_release(root, out);
  const ReleasePlan& plan = result.plan;
  std::string problems;
  const auto add = [&](const std::vector<std::string>& lines, const std::string& what,
                       const std::string& fix) {
    if (lines.empty()) return;
    problems += "\n" + what + ":";
    for (const std::string& l : lines) problems += "\n  " + l;
    problems += "\n" + fix;
  };
  add(plan.entry_point_definitions,
      "these files outside student/ define a student entry point, and would ship a solution",
      "Add their paths to the staff-only list (kStaffOnly in grader/release/release.cpp) or "
      "remove the definitions.");
  add(plan.convolutions,
      "these files outside student/ compute a convolution, and would ship a way to the answers",
      "Let the code take its kernel from the staff side (reference/solutions, which the kit "
      "leaves out), compute something that is not a convolution, or add its path to the "
      "staff-only list (kStaffOnly in grader/release/release.cpp). Only the library files of "
      "sanctioned_convolutions() in grader/kit/kit_rules.cpp may hold one.");
  add(plan.missing_paths, "these Markdown files name paths that the kit does not have",
      "Name only files the kit ships, or leave the document out (kStaffOnly).");
  if (!problems.empty()) {
    throw Error("refusing to write the starter kit:" + problems + "\nNothing was written.");
  }
  check_output_folder(root, out, options.force);
  say("copying " + std::to_string(plan.files.size()) + " files from " + root.string() + " to " +
      out.string());
  std::error_code ec;
  fs::create_directories(out, ec);
  if (ec) throw Error("cannot create " + out.string() + ": " + ec.message());
  for (const std::string& rel : plan.files) {
    const fs::path dst = out / rel;
    fs::create_directories(dst.parent_path(), ec);
    const fs::path src = root / (plan.sources.contains(rel) ? plan.sources.at(rel) : rel);
    if (!ec) fs::copy_file(src, dst, fs::copy_options::overwrite_existing, ec);
    // Markdown ships without its staff-only blocks.
    if (!ec && src.extension() == ".md") {
      const std::string text = read_file(src), kit_text = kit::kit_markdown(rel, text);
      if (kit_text != text) {
        std::ofstream md(dst, std::ios::binary | std::ios::trunc);
        md << kit_text;
        md.close();
        if (!md) throw Error("cannot write " + dst.string());
      }
    }
    if (!ec) fs::permissions(dst, fs::status(src).permissions(), ec);
    if (ec) throw Error("cannot copy " + rel + " to " + dst.string() + ": " + ec.message());
    result.bytes += fs::file_size(dst);
  }

  // The manifest is in `sha256sum` format, with '#' comment lines, so anyone can audit a
  // release with `sha256sum -c RELEASE`.
  say("writing " + std::string(kReleaseManifest) + " (SHA-256 of every file)");
  std::vector<std::string> argv{"sha256sum", "--"};
  argv.insert(argv.end(), plan.files.begin(), plan.files.end());
  const Captured sums = capture(argv, out);
  if (sums.exit_code == 127) {
    throw Error("sha256sum not found: install coreutils, then run the release again");
  }
  if (sums.exit_code != 0) throw Error("sha256sum failed on the release in " + out.string());

  std::ostringstream manifest;
  manifest << "# convlab student release (convlab " << CONVLAB_VERSION << ")\n";
  const std::string commit = source_commit(root);
  if (!commit.empty()) manifest << "# made from " << commit << "\n";
  manifest << "# made " << utc_now() << "; " << plan.files.size() << " files, " << result.bytes
           << " bytes\n";
  manifest << "# left out:\n";
  for (const auto& [path, why] : plan.left_out) manifest << "#   " << path << " (" << why << ")\n";
  manifest << "# check it from this folder: sha256sum -c " << kReleaseManifest << "\n";
  manifest << sums.out;
  result.manifest = out / kReleaseManifest;
  std::ofstream file(result.manifest);
  file << manifest.str();
  file.close();
  if (!file) throw Error("cannot write " + result.manifest.string());
  return result;
}

}  // namespace convlab::grader
