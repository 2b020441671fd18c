// `convlab release` on a small fake framework tree: what goes in, what stays out (staff
// solutions, tools, instructor guide, hidden models), the manifest, and the --out rules.
#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>
#include <sstream>
#include <string>

#include "grader/release/release.hpp"
#include "reference/conv/variant_table.hpp"
#include "tests/support/test_support.hpp"

namespace test_release {

namespace fs = std::filesystem;
using convlab::test::run_command;
using convlab::test::TempDir;

namespace {

void write(const fs::path& file, const std::string& text = "x\n") {
  fs::create_directories(file.parent_path());
  std::ofstream(file) << text;
}

// A tree with one file of every kind the release must sort.
fs::path make_fake_tree(const fs::path& root) {
  const fs::path src = convlab::test::source_dir();
  for (const char* f :
       {"CMakeLists.txt", "README.md", ".gitignore", "student/m2/conv_cpu.cpp",
        "reference/core/error.hpp", "docs/student.md", "tools/setup.sh", "grader/grade/grade.hpp",
        "grader/submit/submit_command.cpp", "tests/grader/grade/test_grade.cpp",
        "datasets/fetch-fashion-mnist.sh"}) {
    write(root / f);
  }
  fs::permissions(root / "datasets/fetch-fashion-mnist.sh", fs::perms::owner_exec,
                  fs::perm_options::add);
  // The student API, which names the entry points no file outside student/ may define.
  for (const char* f : {"reference/conv/student_api.hpp", "reference/conv/variants.def"}) {
    fs::create_directories((root / f).parent_path());
    fs::copy_file(src / f, root / f);
  }
  // The kit's own README replaces the staff one.
  write(root / "grader/release/kit/README.md", "kit readme\n");
  write(root / "grader/release/kit/tools/setup.sh", "kit setup\n");
  for (const char* m : {"m1", "m2", "m3", "final"}) {
    fs::create_directories(root / "milestones" / m);
    fs::copy_file(src / "milestones" / m / "checks.json", root / "milestones" / m / "checks.json");
  }
  for (const char* m : {"baseline", "ece408-high", "ece408-low", "two-conv"}) {
    write(root / "datasets/models" / (std::string(m) + ".safetensors"));
  }
  // Everything below must stay out.
  for (const char* f : {"datasets/models/hidden-1.safetensors",
                        "tests/fixtures/model.safetensors",
                        "reference/solutions/m2/conv_cpu.cpp",
                        "docs/instructor.md",
                        "tools/train/trainer.cpp",
                        "tools/calibrate/calibrate.cpp",
                        "tools/README.md",
                        "tools/CMakeLists.txt",
                        "grader/class/grade_all.cpp",
                        "grader/release/release.cpp",
                        "grader/service/server.cpp",
                        "grader/gradescope/run_autograder",
                        "tests/tools/test_trainer.cpp",
                        "tests/grader/release/test_release.cpp",
                        "tests/grader/class/test_grade_all.cpp",
                        "tests/grader/hostile/m2_segfault/submission/student/m2/conv_cpu.cpp",
                        "build/default/convlab",
                        ".git/HEAD",
                        ".data/fashion-mnist/x.gz",
                        ".ci/run",
                        "seeds/report.md",
                        "student/m2/conv_cpu.cpp~",
                        "student/m2/.conv_cpu.cpp.swp"}) {
    write(root / f);
  }
  fs::create_symlink("/etc/hostname", root / "student/m2/link.cpp");
  return root;
}

std::set<std::string> files_under(const fs::path& dir) {
  std::set<std::string> files;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    if (!e.is_directory()) files.insert(e.path().lexically_relative(dir).generic_string());
  }
  return files;
}

int release(const fs::path& root, const fs::path& out, const std::string& extra,
            std::string* output) {
  return run_command("CONVLAB_ROOT='" + root.string() + "' '" +
                         convlab::test::convlab_binary().string() + "' release --out '" +
                         out.string() + "' " + extra,
                     output);
}

}  // namespace

TEST_CASE("the release holds the team's files and nothing staff-only") {
  TempDir tmp;
  const fs::path root = make_fake_tree(tmp.path() / "tree");
  const fs::path out = tmp.path() / "kit";
  std::string output;
  REQUIRE_MESSAGE(release(root, out, "", &output) == 0, output);

  const std::set<std::string> expected{".gitignore",
                                       "CMakeLists.txt",
                                       "README.md",
                                       "RELEASE",
                                       "datasets/fetch-fashion-mnist.sh",
                                       "datasets/models/baseline.safetensors",
                                       "datasets/models/ece408-high.safetensors",
                                       "datasets/models/ece408-low.safetensors",
                                       "datasets/models/two-conv.safetensors",
                                       "docs/student.md",
                                       "grader/grade/grade.hpp",
                                       "grader/submit/submit_command.cpp",
                                       "milestones/final/checks.json",
                                       "milestones/m1/checks.json",
                                       "milestones/m2/checks.json",
                                       "milestones/m3/checks.json",
                                       "reference/conv/variants.def",
                                       "reference/conv/student_api.hpp",
                                       "reference/core/error.hpp",
                                       "student/m2/conv_cpu.cpp",
                                       "tools/setup.sh"};
  CHECK(files_under(out) == expected);

  // The kit's own files stand in for the staff ones.
  std::ifstream readme(out / "README.md");
  CHECK(std::string(std::istreambuf_iterator<char>(readme), {}) == "kit readme\n");
  std::ifstream setup(out / "tools/setup.sh");
  CHECK(std::string(std::istreambuf_iterator<char>(setup), {}) == "kit setup\n");

  // Hidden models are refused loudly, by name.
  CHECK(output.find("refused to copy 2 model file(s)") != std::string::npos);
  CHECK(output.find("datasets/models/hidden-1.safetensors") != std::string::npos);
  CHECK(output.find("tests/fixtures/model.safetensors") != std::string::npos);
  // Permissions survive (the scripts stay executable).
  CHECK((fs::status(out / "datasets/fetch-fashion-mnist.sh").permissions() &
         fs::perms::owner_exec) != fs::perms::none);

  // The manifest lists every file once and checks out with sha256sum.
  std::string check;
  CHECK_MESSAGE(
      run_command("cd '" + out.string() + "' && sha256sum -c --strict RELEASE", &check) == 0,
      check);
  std::ifstream manifest(out / "RELEASE");
  std::string line;
  int listed = 0;
  while (std::getline(manifest, line)) listed += line.starts_with("#") ? 0 : 1;
  CHECK(listed == static_cast<int>(expected.size()) - 1);

  // A file changed after the release fails the audit.
  write(out / "student/m2/conv_cpu.cpp", "changed\n");
  CHECK(run_command("cd '" + out.string() + "' && sha256sum -c --quiet RELEASE", &check) != 0);
}

TEST_CASE("a file outside student/ that defines a student entry point stops the release") {
  TempDir tmp;
  const fs::path root = make_fake_tree(tmp.path() / "tree");
  const fs::path out = tmp.path() / "kit";
  // A test fixture that implements m2, and a helper that implements a GPU variant.
  write(root / "tests/conv/fixture.cpp",
        "namespace convlab::student {\nvoid conv_forward_cpu(float* y, const float* x,\n"
        "                      const float* k, const ConvShape& s) {\n  y[0] = x[0] * k[0];\n}\n}\n");
  write(root / "reference/core/helper.cuh",
        "// x\nvoid conv_tanh_maxpool_best(float*, const float*, const float*, const ConvShape&,\n"
        "    const PoolShape&, cudaStream_t) noexcept { }\n");
  write(out / ".git/HEAD", "ref: refs/heads/main\n");
  write(out / "keep.txt");
  std::string output;
  CHECK(release(root, out, "--force", &output) == 1);
  CAPTURE(output);
  CHECK(output.find("tests/conv/fixture.cpp:2: defines conv_forward_cpu") != std::string::npos);
  CHECK(output.find("reference/core/helper.cuh:2: defines conv_tanh_maxpool_best") !=
        std::string::npos);
  CHECK(output.find("staff-only list") != std::string::npos);
  // Nothing was written or removed.
  CHECK_FALSE(fs::exists(out / "RELEASE"));
  CHECK(fs::exists(out / "keep.txt"));

  // Declarations, calls and names in text are not definitions (a body after a name is one,
  // even in a comment or a string: the rule errs on the side of the kit).
  fs::remove(root / "tests/conv/fixture.cpp");
  fs::remove(root / "reference/core/helper.cuh");
  write(root / "reference/conv/uses.cpp",
        "void conv_forward_cpu(float* y, const float* x, const float* k, const ConvShape& s);\n"
        "void f() { student::conv_baseline(y, x, k, s, stream); }\n"
        "auto* p = &conv_best;  // conv_unroll() is named in a comment\n"
        "int my_conv_forward_cpu(int a) { return a; }\n");
  CHECK_MESSAGE(release(root, out, "--force", &output) == 0, output);
}

TEST_CASE("a convolution outside student/ or a path the kit lacks stops the release") {
  TempDir tmp;
  const fs::path root = make_fake_tree(tmp.path() / "tree");
  const fs::path out = tmp.path() / "kit";
  // The profiler test's kernel as it once shipped: a working m3 under another name.
  fs::create_directories(root / "tests/profile");
  fs::copy_file(convlab::test::source_dir() / "tests/grader/release/fixtures/profile_test_conv.cu",
                root / "tests/profile/profile_test_conv.cu");
  // A handout that sends the team to a staff solution.
  write(root / "docs/student.md", "Compare with `reference/solutions/final/5_best.cu`.\n");
  std::string output;
  CHECK(release(root, out, "", &output) == 1);
  CAPTURE(output);
  CHECK(output.find("compute a convolution") != std::string::npos);
  CHECK(output.find("tests/profile/profile_test_conv.cu:23: accumulates products") !=
        std::string::npos);
  CHECK(output.find("docs/student.md:1: names reference/solutions/final/5_best.cu") !=
        std::string::npos);
  CHECK(output.find("sanctioned_convolutions()") != std::string::npos);
  CHECK_FALSE(fs::exists(out));

  // The same kernel among a team's files is their answer, not the kit's leak.
  fs::create_directories(root / "student/m3");
  fs::rename(root / "tests/profile/profile_test_conv.cu", root / "student/m3/conv_baseline.cu");
  // A staff-only block may name staff files: the kit's copy goes without it.
  write(root / "docs/student.md",
        "Write `student/m3/conv_baseline.cu`; see [m2](../student/m2/conv_cpu.cpp).\n"
        "<!-- staff-only: begin -->\nStaff: `reference/solutions/m3/conv_baseline.cu`.\n"
        "<!-- staff-only: end -->\nEnd.\n");
  REQUIRE_MESSAGE(release(root, out, "", &output) == 0, output);
  std::ifstream doc(out / "docs/student.md");
  CHECK(std::string(std::istreambuf_iterator<char>(doc), {}) ==
        "Write `student/m3/conv_baseline.cu`; see [m2](../student/m2/conv_cpu.cpp).\nEnd.\n");
  std::string audit;
  CHECK(run_command("cd '" + out.string() + "' && sha256sum -c --quiet RELEASE", &audit) == 0);
}

TEST_CASE("the entry points come from the student API, every variant included") {
  const auto names = convlab::grader::student_entry_points(convlab::test::source_dir());
  const std::set<std::string> have(names.begin(), names.end());
  // One per declared variant, plus one per fused launcher.
  std::size_t expected = 0;
  for (const convlab::Variant& v : convlab::variants()) {
    CHECK(have.contains(v.entry_point()));
    if (v.fused) CHECK(have.contains("conv_tanh_maxpool_" + std::string(v.id)));
    expected += v.fused ? 2 : 1;
  }
  CHECK(names.size() == expected);
  // The staff tree holds definitions outside student/ only in staff-only paths.
  const auto plan = convlab::grader::plan_release(convlab::test::source_dir());
  std::string found;
  for (const std::string& d : plan.entry_point_definitions) found += d + "\n";
  CHECK_MESSAGE(plan.entry_point_definitions.empty(), found);
  // Nor does any kit file compute a convolution outside the sanctioned ones, or any kit
  // document name a file the kit lacks.
  found.clear();
  for (const std::string& c : plan.convolutions) found += c + "\n";
  CHECK_MESSAGE(plan.convolutions.empty(), found);
  found.clear();
  for (const std::string& m : plan.missing_paths) found += m + "\n";
  CHECK_MESSAGE(plan.missing_paths.empty(), found);
}

TEST_CASE("--out must be new or empty unless --force, and never the tree itself") {
  TempDir tmp;
  const fs::path root = make_fake_tree(tmp.path() / "tree");
  const fs::path out = tmp.path() / "kit";
  write(out / "stale.txt");
  std::string output;
  CHECK(release(root, out, "", &output) == 1);
  CHECK(output.find("is not empty") != std::string::npos);
  CHECK(output.find("--force") != std::string::npos);
  CHECK(fs::exists(out / "stale.txt"));
  CHECK_FALSE(fs::exists(out / "RELEASE"));

  write(out / ".git/HEAD", "ref: refs/heads/main\n");
  REQUIRE_MESSAGE(release(root, out, "--force", &output) == 0, output);
  CHECK_FALSE(fs::exists(out / "stale.txt"));
  CHECK(fs::exists(out / "RELEASE"));
  CHECK(fs::exists(out / ".git/HEAD"));  // the published repository's history stays

  // A folder that holds only a repository counts as empty.
  const fs::path repo = tmp.path() / "repo";
  write(repo / ".git/HEAD", "ref: refs/heads/main\n");
  CHECK_MESSAGE(release(root, repo, "", &output) == 0, output);
  CHECK(fs::exists(repo / "student/m2/conv_cpu.cpp"));

  CHECK(release(root, root, "--force", &output) == 1);
  CHECK(output.find("framework tree") != std::string::npos);
  CHECK(release(root, tmp.path(), "--force", &output) == 1);
  CHECK(fs::exists(root / "student/m2/conv_cpu.cpp"));

  write(tmp.path() / "file");
  CHECK(release(root, tmp.path() / "file", "", &output) == 1);
  CHECK(output.find("not a folder") != std::string::npos);
}

TEST_CASE("a release written inside the tree does not copy itself") {
  TempDir tmp;
  const fs::path root = make_fake_tree(tmp.path() / "tree");
  const fs::path out = root / "docs" / "kit";
  std::string output;
  REQUIRE_MESSAGE(release(root, out, "", &output) == 0, output);
  REQUIRE_MESSAGE(release(root, out, "--force", &output) == 0, output);
  const auto files = files_under(out);
  CHECK(std::none_of(files.begin(), files.end(),
                     [](const std::string& f) { return f.starts_with("docs/kit"); }));
  CHECK(files.contains("docs/student.md"));
}

TEST_CASE("a folder that is not a convlab tree is refused with what to do") {
  TempDir tmp;
  std::string output;
  CHECK(release(tmp.path(), tmp.path() / "kit", "", &output) == 1);
  CHECK(output.find("CONVLAB_ROOT") != std::string::npos);
}

TEST_CASE("every staff-only part the build adds is left out of the kit, and so is its hook") {
  // cmake/ConvlabStaff.cmake lists the folders only the staff tree builds; the kit must hold
  // none of them, or the kit's build would differ from the one its tests describe.
  const fs::path root = convlab::test::source_dir();
  std::ifstream in(root / "cmake/ConvlabStaff.cmake");
  REQUIRE(in);
  std::vector<std::string> staff_dirs;
  for (std::string line; std::getline(in, line);) {
    for (const char* list : {"set(CONVLAB_STAFF_DIRS ", "set(CONVLAB_STAFF_TEST_DIRS "}) {
      if (!line.starts_with(list)) continue;
      std::istringstream words(line.substr(std::string(list).size()));
      for (std::string w; words >> w;) {
        if (w.ends_with(")")) w.pop_back();
        if (!w.empty()) staff_dirs.push_back(w);
      }
    }
  }
  REQUIRE(staff_dirs.size() >= 4);
  const auto plan = convlab::grader::plan_release(root);
  // No build file or source of those parts ships (tools/ keeps the team's scripts).
  const auto is_code = [](const std::string& f) {
    const std::string ext = fs::path(f).extension().string();
    return fs::path(f).filename() == "CMakeLists.txt" || ext == ".cpp" || ext == ".hpp" ||
           ext == ".cu" || ext == ".cuh" || ext == ".cmake";
  };
  for (const std::string& dir : staff_dirs) {
    CAPTURE(dir);
    CHECK(fs::exists(root / dir / "CMakeLists.txt"));
    CHECK(std::none_of(plan.files.begin(), plan.files.end(), [&](const std::string& f) {
      return (f == dir || f.starts_with(dir + "/")) && is_code(f);
    }));
  }
  CHECK(std::find(plan.files.begin(), plan.files.end(), "cmake/ConvlabStaff.cmake") ==
        plan.files.end());
  CHECK(std::find(plan.files.begin(), plan.files.end(), "cmake/ConvlabVariants.cmake") !=
        plan.files.end());
}

}  // namespace test_release
