// Which files of a submission are graded: framework files handed in unchanged (a whole
// checkout of the framework or of the student release) are ignored before any other rule;
// then the milestone's files by their path, or by their name when the upload is flat, and the
// team's own files in its variants' folders by their path; the rest is refused with a reason
// that names the graded files.
#include <algorithm>
#include <array>
#include <fstream>
#include <map>
#include <set>
#include <system_error>

#include "grader/builder/build_detail.hpp"
#include "grader/builder/build_submission.hpp"
#include "reference/conv/variant_table.hpp"
#include "reference/core/error.hpp"

namespace convlab::grader {
namespace fs = std::filesystem;
using build_detail::read_regular_file;

namespace {

constexpr std::uintmax_t kMaxFileBytes = 1u << 20;

// Folders a team's checkout has that are never part of a submission.
bool ignored_folder(const std::string& name, bool top) {
  if (name == ".git") return true;
  return top && (name == "build" || name.starts_with("build-") || name.starts_with("build_") ||
                 name.starts_with("cmake-build-") || name == ".data");
}

// A name a student reads back in the report: control characters shown as '?'.
std::string printable(const std::string& text) {
  std::string out = text;
  for (char& c : out) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = '?';
  }
  return out;
}

bool bad_name(const fs::path& rel) {
  for (const fs::path& part : rel) {
    const std::string name = part.string();
    if (name.empty() || name == "." || name.find("..") != std::string::npos) return true;
    for (const char c : name) {
      if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f || c == '\\') return true;
    }
  }
  return false;
}

// Whether two files hold the same bytes, read in chunks (model files are megabytes).
bool same_bytes(const fs::path& a, const fs::path& b) {
  std::error_code ec;
  const auto size = fs::file_size(a, ec);
  if (ec || !fs::is_regular_file(fs::symlink_status(b, ec)) || fs::file_size(b, ec) != size || ec) {
    return false;
  }
  std::ifstream fa(a, std::ios::binary), fb(b, std::ios::binary);
  std::array<char, 65536> ba{}, bb{};
  while (fa && fb) {
    fa.read(ba.data(), ba.size());
    fb.read(bb.data(), bb.size());
    if (fa.gcount() != fb.gcount() ||
        !std::equal(ba.begin(), ba.begin() + fa.gcount(), bb.begin())) {
      return false;
    }
  }
  return fa.eof() && fb.eof();
}

// The student release's own files (its README, setup script), kept in the framework under
// this folder, and its manifest at the top, written by `convlab release`.
constexpr const char* kKitFiles = "grader/release/kit";
constexpr const char* kKitManifest = "RELEASE";
constexpr const char* kKitManifestHead = "# convlab student release";

// Whether `rel` is a file of the team's own that one of `folders` (variants' folders beside
// their student files) takes.
bool in_folders(const std::string& rel, const std::set<std::string>& folders) {
  const Variant* v = variant_of_student_file(rel);
  return v != nullptr && rel != v->student_file && folders.count(v->student_folder()) != 0;
}

std::string graded_list(const std::vector<std::string>& allowed,
                        const std::set<std::string>& folders) {
  if (allowed.empty()) return "this milestone grades no file of yours: hand in nothing for it";
  std::string list;
  for (const std::string& file : allowed) list += (list.empty() ? "" : ", ") + file;
  std::string text = "only these files are graded: " + list +
                     " (keep their paths, or upload them flat with these names)";
  // The folders, by the first one's example (student/final/best/ for final).
  for (const Variant& v : variants()) {
    if (folders.empty() || v.student_folder() != *folders.begin()) continue;
    text += ", and files of your own in a variant's folder, at their paths (" +
            std::string(v.gpu() ? ".cu and .cuh" : ".cpp and .hpp") + " files directly in " +
            v.student_folder() + ", beside " + std::string(v.student_file) + ")";
  }
  return text;
}

// A zip unpacked into one folder: grade what is inside it.
fs::path unwrap(const fs::path& submission) {
  std::error_code ec;
  fs::path only;
  int entries = 0;
  for (fs::directory_iterator it(submission, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name == "__MACOSX" || name == ".DS_Store") continue;
    ++entries;
    if (fs::is_directory(it->symlink_status(ec)) && !ignored_folder(name, true)) only = it->path();
  }
  // A checkout holding only student/ is graded as it is: its files keep their paths.
  if (entries != 1 || only.empty() || only.filename() == "student") return submission;
  // A folder that is itself a checkout (student/ inside) or holds the files flat.
  return only;
}

// One scan: the submission's files sorted into graded, missing and refused.
class Scan {
 public:
  Scan(const fs::path& submission, const std::vector<std::string>& allowed,
       const fs::path& framework_root, const std::vector<std::string>& allowed_folders)
      : base_(unwrap(submission)),
        shown_prefix_(base_ == submission ? "" : base_.filename().string() + "/"),
        framework_root_(framework_root),
        allowed_set_(allowed.begin(), allowed.end()),
        graded_(allowed_set_.begin(), allowed_set_.end()),
        folders_(allowed_folders.begin(), allowed_folders.end()) {
    for (const std::string& file : graded_) {
      by_basename_[fs::path(file).filename().string()].push_back(file);
    }
  }

  SubmissionFiles run() {
    const std::vector<std::string> files = candidates();
    match_by_path(files);
    match_by_name();
    for (const std::string& file : graded_) {
      if (taken_.count(file) != 0) {
        result_.accepted.push_back(file);
        result_.accepted_sources.push_back(base_ / taken_[file]);
      } else {
        result_.missing.push_back(file);
      }
    }
    for (const std::string& rel : own_) {
      result_.accepted.push_back(rel);
      result_.accepted_sources.push_back(base_ / rel);
    }
    std::sort(result_.rejected.begin(), result_.rejected.end());
    return std::move(result_);
  }

 private:
  void reject(const std::string& rel, const std::string& why) {
    result_.rejected.emplace_back(printable(shown_prefix_ + rel), why);
  }

  // A framework file handed in unchanged (a whole checkout of the framework or of the student
  // release): any size, and the release's own files and manifest too.
  bool unchanged_framework_file(const std::string& rel) const {
    if (!build_detail::is_framework_file(rel) || allowed_set_.count(rel) != 0) return false;
    if (same_bytes(base_ / rel, framework_root_ / rel) ||
        same_bytes(base_ / rel, framework_root_ / kKitFiles / rel)) {
      return true;
    }
    if (rel != kKitManifest) return false;
    const auto text = read_regular_file(base_ / rel, kMaxFileBytes);
    return text && text->starts_with(kKitManifestHead);
  }

  // Every regular file that may be graded, relative to `base`, sorted; the others refused.
  std::vector<std::string> candidates() {
    std::vector<std::string> files;
    std::error_code ec;
    fs::recursive_directory_iterator it(base_, fs::directory_options::none, ec), end;
    if (ec) throw Error("cannot read the submission " + base_.string() + ": " + ec.message());
    for (; it != end; it.increment(ec)) {
      if (ec) {
        reject("(part of the folder)", "could not be read: " + ec.message());
        break;
      }
      const fs::path rel_path = it->path().lexically_relative(base_);
      const std::string rel = rel_path.generic_string();
      const std::string name = it->path().filename().string();
      const fs::file_status status = it->symlink_status(ec);
      if (ec) {
        reject(rel, "could not be read: " + ec.message());
        ec.clear();
        continue;
      }
      if (fs::is_directory(status)) {
        if (ignored_folder(name, it.depth() == 0) || name == "__MACOSX") {
          it.disable_recursion_pending();
        }
        continue;
      }
      if (name == ".DS_Store") continue;
      if (fs::is_regular_file(status) && !bad_name(rel_path) && unchanged_framework_file(rel)) {
        continue;
      }
      if (bad_name(rel_path)) {
        reject(rel, "its name has '..', a backslash or a control character: rename it");
      } else if (fs::is_symlink(status)) {
        reject(rel, "symbolic links are not accepted: upload the file itself");
      } else if (!fs::is_regular_file(status)) {
        reject(rel, "not a regular file (a device, pipe or socket): upload source files only");
      } else if (it->file_size(ec) > kMaxFileBytes || ec) {
        reject(rel, "larger than 1 MiB: a source file is far smaller; upload your source only");
        ec.clear();
      } else {
        files.push_back(rel);
      }
    }
    std::sort(files.begin(), files.end());
    return files;
  }

  // Files at a graded path are taken, and the team's own files in a variant's folder (only by
  // their path); the others are left for matching by name.
  void match_by_path(const std::vector<std::string>& files) {
    for (const std::string& rel : files) {
      if (allowed_set_.count(rel) != 0) {
        taken_[rel] = rel;
      } else if (in_folders(rel, folders_)) {
        own_.push_back(rel);
      } else {
        left_.push_back(rel);
      }
    }
  }

  // A flat upload: a file left is taken by its name when that is unambiguous.
  void match_by_name() {
    std::map<std::string, int> left_by_basename;
    for (const std::string& rel : left_) ++left_by_basename[fs::path(rel).filename().string()];
    for (const std::string& rel : left_) {
      const std::string name = fs::path(rel).filename().string();
      const auto match = by_basename_.find(name);
      if (match == by_basename_.end()) {
        reject(rel, graded_list(graded_, folders_));
        continue;
      }
      if (match->second.size() > 1) {
        std::string paths;
        for (const std::string& p : match->second) paths += (paths.empty() ? "" : " or ") + p;
        reject(rel, "several graded files are named " + name + " (" + paths +
                        "): put it at its path inside student/");
      } else if (taken_.count(match->second[0]) != 0) {
        reject(rel, "not used: " + shown_prefix_ + taken_[match->second[0]] + " already provides " +
                        match->second[0]);
      } else if (left_by_basename[name] > 1) {
        reject(rel, "several files are named " + name + ": upload one, or put it at " +
                        match->second[0]);
      } else {
        taken_[match->second[0]] = rel;
      }
    }
  }

  const fs::path base_;
  const std::string shown_prefix_;
  const fs::path framework_root_;
  const std::set<std::string> allowed_set_;
  const std::vector<std::string> graded_;
  const std::set<std::string> folders_;  // variants' folders whose own files are graded
  std::map<std::string, std::vector<std::string>> by_basename_;  // basename -> allowed paths
  std::map<std::string, std::string> taken_;  // allowed path -> file in the submission
  std::vector<std::string> own_;              // the team's own files in a variant's folder
  std::vector<std::string> left_;             // files not at a graded path
  SubmissionFiles result_;
};

}  // namespace

SubmissionFiles scan_submission(const fs::path& submission, const std::vector<std::string>& allowed,
                                const fs::path& framework_root,
                                const std::vector<std::string>& allowed_folders) {
  std::error_code ec;
  if (!fs::is_directory(submission, ec)) {
    throw Error("the submission " + submission.string() +
                " is not a folder: give the folder that holds the team's files");
  }
  return Scan(submission, allowed, framework_root, allowed_folders).run();
}

}  // namespace convlab::grader
