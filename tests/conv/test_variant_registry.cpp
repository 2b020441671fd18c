// The variant declarations (reference/conv/variants.def) are the one source: every file they
// name exists, the milestones' checks.json agree with them, and no source, script, build file or
// test outside the declaration, the files it names and the variants' folders mentions a variant
// id.
#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "reference/conv/variant_table.hpp"
#include "reference/core/error.hpp"
#include "reference/milestones/milestone.hpp"
#include "tests/support/test_support.hpp"

namespace test_variant_registry {

using convlab::test::read_all;
using namespace convlab;
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

bool staff_tree() {
  return fs::is_directory(test::source_dir() / "reference/solutions");
}

json checks_of(const std::string& milestone) {
  return json::parse(read_all(test::source_dir() / "milestones" / milestone / "checks.json"));
}

}  // namespace

TEST_CASE("every declared variant's files, milestone and handout section exist") {
  const fs::path root = test::source_dir();
  REQUIRE(!variants().empty());
  std::set<std::string> ids;
  for (const Variant& v : variants()) {
    CAPTURE(v.id);
    CHECK(ids.insert(std::string(v.id)).second);
    CHECK((device_name(v.device) == "cpu" || device_name(v.device) == "gpu"));
    CHECK((v.precision == Precision::fp32 || v.precision == Precision::tf32 ||
           v.precision == Precision::fp16));
    CHECK((library_name(v.libraries) == "none" || library_name(v.libraries) == "cublas"));
    CHECK(!v.idea.empty());
    CHECK(fs::is_regular_file(root / v.student_file));
    if (staff_tree()) CHECK(fs::is_regular_file(root / v.staff_file));
    CHECK(fs::is_regular_file(root / "milestones" / v.milestone / "checks.json"));
    // "milestones/final/README.md, section '1. Shared-memory tiling'": the file has a heading
    // with that title.
    static const std::regex handout(R"(^([^,]+), section '(.+)'$)");
    std::smatch m;
    const std::string text(v.handout);
    REQUIRE(std::regex_match(text, m, handout));
    const std::string readme = read_all(root / m[1].str());
    CHECK(!readme.empty());
    const std::regex heading(
        "(^|\n)#+ " +
        std::regex_replace(m[2].str(), std::regex(R"([.^$|()\[\]{}*+?\\])"), R"(\$&)") + "\n");
    CHECK_MESSAGE(std::regex_search(readme, heading), "no heading '" << m[2] << "' in " << m[1]);
  }
}

TEST_CASE("a milestone's files and variants are its declared ones; checks.json lists none") {
  std::set<std::string> milestones;
  for (const Variant& v : variants()) milestones.insert(std::string(v.milestone));
  for (const fs::directory_entry& e : fs::directory_iterator(test::source_dir() / "milestones")) {
    if (fs::is_regular_file(e.path() / "checks.json")) milestones.insert(e.path().filename());
  }
  for (const std::string& ms : milestones) {
    CAPTURE(ms);
    const json checks = checks_of(ms);
    // Derived from the declarations (reference/milestones/milestone.cpp): a list here would be a
    // second copy.
    CHECK_FALSE(checks.contains("team_writes"));
    CHECK_FALSE(checks.contains("team_folders"));
    CHECK_FALSE(checks.contains("variants"));
    std::vector<std::string> files, folders;
    for (const Variant& v : variants()) {
      if (v.milestone != ms) continue;
      files.emplace_back(v.student_file);
      folders.push_back(v.student_folder());
    }
    const Milestone loaded = load_milestone(test::source_dir(), ms);
    CHECK(loaded.team_writes == files);
    CHECK(loaded.team_folders == folders);
    const std::vector<std::string> gpu = variant_ids(ms, "gpu");
    CHECK(loaded.variants == gpu);
    for (const char* key : {"default_variant", "ranked_variant"}) {
      const std::string named = checks.value(key, std::string());
      CAPTURE(key);
      if (!named.empty()) CHECK(std::find(gpu.begin(), gpu.end(), named) != gpu.end());
    }
  }
}

TEST_CASE("lookups: by id, by student file, by milestone and device") {
  for (const Variant& v : variants()) {
    CHECK(&find_variant(v.id) == &v);
    CHECK(variant_of_student_file(v.student_file) == &v);
    CHECK(v.entry_point() == (v.gpu() ? "conv_" : "conv_forward_") + std::string(v.id));
  }
  CHECK_THROWS_WITH_AS(find_variant("no_such_variant"),
                       doctest::Contains("unknown variant 'no_such_variant'"), Error);
  CHECK(variant_of_student_file("student/notes.txt") == nullptr);
  CHECK(variant_of_student_file("student/final/best") == nullptr);
  CHECK(variant_of_student_file("student/final/best.cu") == nullptr);
}

TEST_CASE("a variant's folder: beside its files, named after it, its device's sources only") {
  const Variant& best = find_variant("best");
  CHECK(best.student_folder() == "student/final/best/");
  CHECK(best.staff_folder() == "reference/solutions/final/best/");
  CHECK(find_variant("cpu").student_folder() == "student/m2/cpu/");
  for (const Variant& v : variants()) {
    CAPTURE(v.id);
    const std::string folder = v.student_folder();
    const std::string source = folder + (v.gpu() ? "tiles.cu" : "loops.cpp");
    const std::string header = folder + (v.gpu() ? "tiles.cuh" : "loops.hpp");
    CHECK(v.in_student_folder(source));
    CHECK(v.in_student_folder(header));
    CHECK(variant_of_student_file(source) == &v);
    CHECK(variant_of_student_file(header) == &v);
    CHECK_FALSE(v.in_student_folder(v.student_file));
    for (const std::string& other :
         {folder + "notes.txt", folder + "README.md", folder + "deeper/tiles.cu", folder + ".cu",
          folder + (v.gpu() ? "loops.cpp" : "tiles.cu"), v.staff_folder() + "tiles.cu"}) {
      CAPTURE(other);
      CHECK_FALSE(v.in_student_folder(other));
      CHECK(variant_of_student_file(other) == nullptr);
    }
  }
  CHECK(variant_ids().size() == variants().size());
  CHECK(variant_ids({}, "cpu").size() + variant_ids({}, "gpu").size() == variants().size());
}

// ---- No mention outside the declaration -------------------------------------------------------

namespace {

// Files that may name variant ids besides the declaration and the files it names, and why.
// Paths are relative to the root; a path ending in '/' covers a folder.
const std::map<std::string, std::string> kAllowed{
    {"milestones/",
     "checks.json's ranked and default variant are milestone data, checked against the "
     "declaration by the test above"},
    {"tests/grader/hostile/",
     "hostile submissions: each holds its own copy of a student file, entry point included"},
    {"tests/grader/db/", "sample reports: the database stores a variant as an opaque label"},
    {"tests/grader/leaderboard/", "sample boards: the leaderboard shows a variant as a label"},
    {"tests/grader/class/test_ingest_slurm_units.cpp", "sample reports, as for the database"},
    {"tests/grader/release/",
     "fixtures of the release's scans for entry points and convolutions outside student/"},
    {"tests/conv/test_variant_registry.cpp", "this test: the ids that are ordinary words"},
    {"RELEASE", "the student kit's manifest (generated): it lists the files left out"},
    {"reference/bench/bench.hpp",
     "the bench's default --variant, the kernel a team ranks with (final's ranked_variant)"},
};

// Whether `rel` is left out of the search: prose, data (.data/ is a git-ignored local folder of
// data files), build output, version control.
bool skipped(const std::string& rel) {
  static const std::vector<std::string> prefixes{".git/", ".data/", "build/", "datasets/models/",
                                                 "docs/"};
  for (const std::string& p : prefixes) {
    if (rel.starts_with(p)) return true;
  }
  const std::string ext = fs::path(rel).extension().string();
  static const std::set<std::string> data{".md", ".safetensors", ".gz", ".png", ".zip"};
  return data.contains(ext);
}

bool allowed(const std::string& rel) {
  for (const auto& [path, why] : kAllowed) {
    if (path.ends_with('/') ? rel.starts_with(path) : rel == path) return true;
  }
  for (const Variant& v : variants()) {
    if (rel == v.student_file || rel == v.staff_file) return true;
    // A variant's folder holds more of its files.
    if (rel.starts_with(v.student_folder()) || rel.starts_with(v.staff_folder())) return true;
  }
  return rel == "reference/conv/variants.def";
}

// A pattern and a string every match of it contains: std::regex is slow, so a file is searched
// with the pattern only where the string occurs.
struct Mention {
  std::string needle;
  std::regex pattern;
};

// The patterns that mention `v`: its entry points and `--variant ID` always; the bare id where
// it is no ordinary word of the tree; the quoted id where it is an ordinary word but names
// nothing else (a device's or a model's name, quoted, is that device or model).
std::vector<Mention> mentions(const Variant& v, const std::set<std::string>& english,
                              const std::set<std::string>& other_names) {
  const std::string id(v.id);
  std::vector<Mention> out;
  out.push_back({v.entry_point(), std::regex("\\b" + v.entry_point() + "\\b")});
  out.push_back({"conv_tanh_maxpool_" + id, std::regex("\\bconv_tanh_maxpool_" + id + "\\b")});
  out.push_back({id, std::regex("--variant[ =]" + id + "\\b")});
  if (other_names.contains(id)) return out;
  if (english.contains(id)) {
    out.push_back({"\"" + id + "\"", std::regex("\"" + id + "\"")});
  } else {
    out.push_back({id, std::regex("\\b" + id + "\\b")});
  }
  return out;
}

}  // namespace

TEST_CASE("no source, script, build file or test names a variant outside its declaration") {
  const fs::path root = test::source_dir();
  // Ids that are English words the code uses in other senses ("the best time", "loops unroll",
  // "CUDA streams"),
  // and the names of other things: devices, precision classes, libraries and models.
  const std::set<std::string> english{"best", "unroll", "streams"};
  // The devices, the precision classes and the one library a variant may call.
  std::set<std::string> other_names{"cpu", "gpu", "fp32", "tf32", "fp16", "cublas"};
  for (const fs::directory_entry& e : fs::directory_iterator(root / "datasets/models")) {
    other_names.insert(e.path().stem().string());
  }
  std::vector<std::pair<const Variant*, std::vector<Mention>>> patterns;
  for (const Variant& v : variants()) patterns.emplace_back(&v, mentions(v, english, other_names));

  // The project's own folders and top-level build files only: what a team or a local grade
  // adds beside them (grade reports, notes, build folders) is not the framework's source.
  // student/ is the team's: its declared files are allowed anyway.
  std::vector<fs::path> paths;
  for (const char* top : {"CMakeLists.txt", "CMakePresets.json"}) {
    if (fs::is_regular_file(root / top)) paths.push_back(root / top);
  }
  for (const char* top :
       {"cmake", "datasets", "grader", "milestones", "reference", "tests", "tools"}) {
    if (!fs::is_directory(root / top)) continue;
    for (auto it = fs::recursive_directory_iterator(root / top);
         it != fs::recursive_directory_iterator(); ++it) {
      const std::string rel = it->path().lexically_relative(root).generic_string();
      if (it->is_directory()) {
        if (skipped(rel + "/") || it->path().filename().string().starts_with("build")) {
          it.disable_recursion_pending();
        }
      } else if (it->is_regular_file()) {
        paths.push_back(it->path());
      }
    }
  }
  std::string found;
  std::size_t files = 0;
  for (const fs::path& path : paths) {
    const std::string rel = path.lexically_relative(root).generic_string();
    if (skipped(rel) || allowed(rel)) continue;
    ++files;
    const std::string text = read_all(path);
    for (const auto& [v, regexes] : patterns) {
      for (const auto& [needle, r] : regexes) {
        std::smatch m;
        if (text.find(needle) != std::string::npos && std::regex_search(text, m, r)) {
          const auto line = 1 + std::count(text.begin(), text.begin() + m.position(0), '\n');
          found += rel + ":" + std::to_string(line) + ": names variant " + std::string(v->id) +
                   " ('" + m.str(0) + "')\n";
          break;
        }
      }
    }
  }
  CHECK(files > 100);
  CHECK_MESSAGE(found.empty(),
                "derive these from the declarations (reference/conv/variant_table.hpp, "
                "cmake/ConvlabVariants.cmake, `convlab variants --json`), or allow-list the "
                "file with a reason in this test:\n"
                    << found);
}

}  // namespace test_variant_registry
