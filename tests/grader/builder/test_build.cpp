// Building a submission: which files are graded, the checks on the team's sources, headers and
// symbols, and real builds of the pristine stubs and of broken or cheating submissions against
// the framework cached in this build tree.
#include <doctest/doctest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <regex>
#include <string>

#include "grader/builder/build_detail.hpp"
#include "reference/conv/variant_table.hpp"
#include "reference/core/error.hpp"
#include "tests/grader/builder/build_test_support.hpp"

namespace test_build {

using convlab::test::read_all;
using namespace convlab;
namespace fs = std::filesystem;
namespace detail = convlab::grader::build_detail;
using test::write_file;

namespace {

// The files of a milestone, from the variant declarations (sorted, as the scan lists them).
std::vector<std::string> files_of(std::string_view milestone) {
  std::vector<std::string> files;
  for (const Variant& v : variants()) {
    if (v.milestone == milestone) files.emplace_back(v.student_file);
  }
  std::sort(files.begin(), files.end());
  return files;
}
const std::vector<std::string> kFinal = files_of("final");
const std::vector<std::string> kM2 = files_of("m2");

// The folders of a milestone's variants, where a team's own files are graded too.
std::vector<std::string> folders_of(std::string_view milestone) {
  std::vector<std::string> folders;
  for (const Variant& v : variants()) {
    if (v.milestone == milestone) folders.push_back(v.student_folder());
  }
  return folders;
}

// The file name of `path`.
std::string base_name(const std::string& path) {
  return fs::path(path).filename().string();
}

bool contains(const std::vector<std::string>& list, const std::string& item) {
  return std::find(list.begin(), list.end(), item) != list.end();
}

// The reason given for `file`, or "" when it was not refused.
std::string refusal(const grader::SubmissionFiles& files, const std::string& file) {
  for (const auto& [path, why] : files.rejected) {
    if (path == file) return why;
  }
  return {};
}

std::string refused_list(const grader::SubmissionFiles& files) {
  std::string text;
  for (const auto& [path, why] : files.rejected) text += path + ": " + why + "\n";
  return text;
}

// A CPU convolution that compiles, with `extra` before it.
std::string m2_file(const std::string& extra, const std::string& body = "") {
  return "#include \"reference/conv/student_api.hpp\"\n" + extra +
         "\nnamespace convlab::student {\n"
         "void conv_forward_cpu(float* y, const float* x, const float* k, const ConvShape& s) {\n"
         "  (void)y; (void)x; (void)k; (void)s;\n" +
         body + "}\n}  // namespace convlab::student\n";
}

}  // namespace

// ---- Which files are graded ---------------------------------------------------------------------

TEST_CASE("scan: files at their paths are graded and the others are listed as missing") {
  REQUIRE(kFinal.size() >= 3);
  test::TempDir sub;
  write_file(sub.path(), kFinal.back(), "// last\n");
  write_file(sub.path(), kFinal.front(), "// first\n");
  const auto files = grader::scan_submission(sub.path(), kFinal, test::source_dir());
  CAPTURE(refused_list(files));
  CHECK(files.accepted == std::vector<std::string>{kFinal.front(), kFinal.back()});
  REQUIRE(files.accepted_sources.size() == 2);
  CHECK(files.accepted_sources[1] == sub.path() / kFinal.back());
  CHECK(files.missing == std::vector<std::string>(kFinal.begin() + 1, kFinal.end() - 1));
  CHECK(files.rejected.empty());
}

TEST_CASE("scan: a flat upload is matched by file name") {
  REQUIRE(kFinal.size() >= 3);
  test::TempDir sub;
  write_file(sub.path(), base_name(kFinal.back()), "// last\n");
  write_file(sub.path(), base_name(kFinal[1]), "// second\n");
  const auto files = grader::scan_submission(sub.path(), kFinal, test::source_dir());
  CAPTURE(refused_list(files));
  CHECK(files.accepted == std::vector<std::string>{kFinal[1], kFinal.back()});
  REQUIRE(files.accepted_sources.size() == 2);
  CHECK(files.accepted_sources[0] == sub.path() / base_name(kFinal[1]));
  CHECK(files.missing.size() == kFinal.size() - 2);
  CHECK(files.rejected.empty());
}

TEST_CASE("scan: a zip unpacked into one folder is graded from inside it") {
  test::TempDir sub;
  write_file(sub.path(), "team-7/student/m2/conv_cpu.cpp", "// mine\n");
  const auto files = grader::scan_submission(sub.path(), kM2, test::source_dir());
  CHECK(files.accepted == kM2);
  CHECK(files.missing.empty());
  CHECK(files.rejected.empty());
}

TEST_CASE("scan: a whole checkout: unchanged framework files are ignored, changed ones refused") {
  test::TempDir sub;
  const fs::path root = test::source_dir();
  for (const std::string& rel : {std::string("README.md"), std::string("reference/network/network.cpp"),
                                 std::string("CMakeLists.txt"), kFinal.back()}) {
    fs::create_directories((sub.path() / rel).parent_path());
    fs::copy_file(root / rel, sub.path() / rel);
  }
  write_file(sub.path(), "student/m2/conv_cpu.cpp", "// our loops\n");
  write_file(sub.path(), "reference/core/error.cpp", "// patched\n");
  write_file(sub.path(), ".git/config", "[core]\n");
  write_file(sub.path(), "build/cpu/CMakeCache.txt", "junk\n");
  write_file(sub.path(), "notes.txt", "ideas\n");
  const auto files = grader::scan_submission(sub.path(), kM2, test::source_dir());
  CAPTURE(refused_list(files));
  CHECK(files.accepted == kM2);
  REQUIRE(files.rejected.size() == 2);
  CHECK(files.rejected[0].first == "notes.txt");
  CHECK(files.rejected[1].first == "reference/core/error.cpp");
  // The reason names the file that is graded.
  CHECK(files.rejected[1].second.find("only these files are graded: student/m2/conv_cpu.cpp") !=
        std::string::npos);
}

TEST_CASE("scan: a whole checkout of the student release grades without refusals") {
  test::TempDir sub;
  const fs::path root = test::source_dir();
  // Model files (over 1 MiB), the kit's own README and setup script, its manifest.
  for (const char* rel : {"datasets/models/ece408-high.safetensors",
                          "datasets/models/two-conv.safetensors", "LICENSE", "CMakePresets.json"}) {
    fs::create_directories((sub.path() / rel).parent_path());
    fs::copy_file(root / rel, sub.path() / rel);
  }
  REQUIRE(fs::file_size(sub.path() / "datasets/models/ece408-high.safetensors") > (1u << 20));
  for (const char* rel : {"README.md", "tools/setup.sh"}) {
    fs::create_directories((sub.path() / rel).parent_path());
    fs::copy_file(root / "grader/release/kit" / rel, sub.path() / rel);
  }
  write_file(sub.path(), "RELEASE", "# convlab student release (convlab 0.1.0)\nabc  README.md\n");
  write_file(sub.path(), "student/m2/conv_cpu.cpp", "// our loops\n");
  const auto files = grader::scan_submission(sub.path(), kM2, test::source_dir());
  CAPTURE(refused_list(files));
  CHECK(files.accepted == kM2);
  CHECK(files.rejected.empty());

  // A changed model file is still refused, and another RELEASE is not the manifest.
  write_file(sub.path(), "RELEASE", "notes\n");
  std::ofstream(sub.path() / "datasets/models/ece408-high.safetensors", std::ios::app) << "x";
  std::ofstream(sub.path() / "datasets/models/two-conv.safetensors", std::ios::app) << "x";
  const auto changed = grader::scan_submission(sub.path(), kM2, test::source_dir());
  CHECK(refusal(changed, "RELEASE").find("only these files are graded") != std::string::npos);
  CHECK(refusal(changed, "datasets/models/ece408-high.safetensors").find("1 MiB") !=
        std::string::npos);
  CHECK(refusal(changed, "datasets/models/two-conv.safetensors")
            .find("only these files are graded") != std::string::npos);
}

TEST_CASE("scan: links, devices, large files and odd names are refused with a reason") {
  test::TempDir sub;
  fs::create_directories(sub.path() / "student/m2");
  fs::create_symlink("/etc/passwd", sub.path() / "student/m2/conv_cpu.cpp");
  fs::create_directory_symlink("/etc", sub.path() / "etc");
  REQUIRE(mkfifo((sub.path() / "pipe.cpp").c_str(), 0600) == 0);
  write_file(sub.path(), "big.cpp", std::string((1u << 20) + 1, 'x'));
  write_file(sub.path(), "odd..cpp", "//\n");
  const auto files = grader::scan_submission(sub.path(), kM2, test::source_dir());
  CAPTURE(refused_list(files));
  CHECK(files.accepted.empty());
  CHECK(files.missing == kM2);
  CHECK(refusal(files, "student/m2/conv_cpu.cpp").find("symbolic links") != std::string::npos);
  CHECK(refusal(files, "etc").find("symbolic links") != std::string::npos);
  CHECK(refusal(files, "pipe.cpp").find("not a regular file") != std::string::npos);
  CHECK(refusal(files, "big.cpp").find("1 MiB") != std::string::npos);
  CHECK(refusal(files, "odd..cpp").find("'..'") != std::string::npos);
}

TEST_CASE("scan: ambiguous names are refused instead of guessed") {
  REQUIRE(kFinal.size() >= 2);
  const std::string twice = base_name(kFinal.back()), placed = kFinal.front();
  test::TempDir sub;
  write_file(sub.path(), "a/" + twice, "// a\n");
  write_file(sub.path(), "b/" + twice, "// b\n");
  write_file(sub.path(), placed, "// at its path\n");
  write_file(sub.path(), base_name(placed), "// flat copy\n");
  const auto files = grader::scan_submission(sub.path(), kFinal, test::source_dir());
  CAPTURE(refused_list(files));
  CHECK(files.accepted == std::vector<std::string>{placed});
  CHECK(refusal(files, "a/" + twice).find("several files are named " + twice) !=
        std::string::npos);
  CHECK(refusal(files, "b/" + twice).find("several files are named " + twice) !=
        std::string::npos);
  CHECK(refusal(files, base_name(placed)).find("already provides " + placed) !=
        std::string::npos);
  CHECK(contains(files.missing, kFinal.back()));
}

TEST_CASE("scan: the team's own files in a variant's folder are graded at their paths") {
  test::TempDir sub;
  write_file(sub.path(), "student/final/5_best.cu", "// the entry points\n");
  write_file(sub.path(), "student/final/best/tiles.cu", "// a kernel of it\n");
  write_file(sub.path(), "student/final/best/tiles.cuh", "// its header\n");
  // Not sources, not directly in the folder, not in a variant's folder, or another milestone's.
  for (const char* rel : {"student/final/best/notes.txt", "student/final/best/deeper/more.cu",
                          "student/final/tiles.cu", "student/final/tiles/tiles.cu",
                          "student/m2/cpu/loops.cpp", "reference/conv/best/tiles.cu"}) {
    write_file(sub.path(), rel, "//\n");
  }
  // The kit's README there, unchanged, is ignored like any framework file.
  fs::copy_file(test::source_dir() / "student/final/best/README.md",
                sub.path() / "student/final/best/README.md");
  const auto files =
      grader::scan_submission(sub.path(), kFinal, test::source_dir(), folders_of("final"));
  CAPTURE(refused_list(files));
  CHECK(files.accepted == std::vector<std::string>{"student/final/5_best.cu",
                                                   "student/final/best/tiles.cu",
                                                   "student/final/best/tiles.cuh"});
  REQUIRE(files.accepted_sources.size() == 3);
  CHECK(files.accepted_sources[1] == sub.path() / "student/final/best/tiles.cu");
  CHECK_FALSE(contains(files.missing, "student/final/5_best.cu"));
  CHECK(files.rejected.size() == 6);
  // The reason says where such files go.
  CHECK(refusal(files, "student/final/best/notes.txt")
            .find("files of your own in a variant's folder, at their paths (.cu and .cuh files "
                  "directly in student/final/best/, beside student/final/5_best.cu)") !=
        std::string::npos);
  CHECK(refusal(files, "reference/conv/best/tiles.cu").find("only these files are graded") !=
        std::string::npos);

  // A checkout that holds only student/ keeps its paths (a zip of one folder is unwrapped).
  test::TempDir only_student;
  write_file(only_student.path(), "student/final/5_best.cu", "// the launcher\n");
  write_file(only_student.path(), "student/final/best/tiles.cu", "// a kernel of it\n");
  const auto kept = grader::scan_submission(only_student.path(), kFinal, test::source_dir(),
                                            folders_of("final"));
  CAPTURE(refused_list(kept));
  CHECK(kept.accepted == std::vector<std::string>{"student/final/5_best.cu",
                                                  "student/final/best/tiles.cu"});
  CHECK(kept.rejected.empty());
  test::TempDir zipped;
  write_file(zipped.path(), "team7/student/final/best/tiles.cu", "// a kernel of it\n");
  const auto unwrapped =
      grader::scan_submission(zipped.path(), kFinal, test::source_dir(), folders_of("final"));
  CHECK(unwrapped.accepted == std::vector<std::string>{"student/final/best/tiles.cu"});

  // A flat upload has no folder: a file of the team's own is taken by its path only.
  test::TempDir flat;
  write_file(flat.path(), "tiles.cu", "// a kernel of it\n");
  const auto flat_files =
      grader::scan_submission(flat.path(), kFinal, test::source_dir(), folders_of("final"));
  CHECK(flat_files.accepted.empty());
  CHECK(refusal(flat_files, "tiles.cu").find("at their paths") != std::string::npos);

  // m2's folder takes CPU sources; without the folders, no file of the team's own is graded.
  const auto m2 = grader::scan_submission(sub.path(), kM2, test::source_dir(), folders_of("m2"));
  CHECK(contains(m2.accepted, "student/m2/cpu/loops.cpp"));
  CHECK_FALSE(contains(m2.accepted, "student/final/best/tiles.cu"));
  const auto none = grader::scan_submission(sub.path(), kFinal, test::source_dir());
  CHECK(none.accepted == std::vector<std::string>{"student/final/5_best.cu"});
  CHECK(refusal(none, "student/final/best/tiles.cu").find("only these files are graded") !=
        std::string::npos);
}

TEST_CASE("scan: a milestone with nothing to hand in refuses every file, and bad folders throw") {
  test::TempDir sub;
  write_file(sub.path(), "conv.cpp", "//\n");
  const auto files = grader::scan_submission(sub.path(), {}, test::source_dir());
  REQUIRE(files.rejected.size() == 1);
  CHECK(files.rejected[0].second.find("grades no file") != std::string::npos);
  CHECK_THROWS_AS(grader::scan_submission(sub.path() / "nope", kM2, test::source_dir()), Error);
}

// ---- The checks, one by one ---------------------------------------------------------------------

TEST_CASE("source scan: includes from outside the framework are found however they are written") {
  const auto found = [](const std::string& text) {
    return detail::scan_source(text, "student/m2/conv_cpu.cpp");
  };
  CHECK(found("#include \"reference/core/error.hpp\"\n#include <vector>\n#include <cuda.h>\n")
            .empty());
  // Text that only looks like a directive.
  CHECK(found("// #include \"/etc/passwd\"\n/* #include </etc/passwd> */\n"
              "const char* s = \"#include </etc/passwd>\";\n"
              "const char* r = R\"x(\n#include \"/etc/passwd\"\n)x\";\n")
            .empty());

  auto f = found("int a;\n#include \"/work/reference/solutions/final/x.cu\"\n");
  REQUIRE(f.size() == 1);
  CHECK(f[0].starts_with("student/m2/conv_cpu.cpp:2: includes \"/work/reference/solutions"));
  f = found("\n\n#include \"../../reference/solutions/m2/conv_cpu.cpp\"\n");
  REQUIRE(f.size() == 1);
  CHECK(f[0].starts_with("student/m2/conv_cpu.cpp:3: "));
  CHECK(found("#  include <../secret.h>\n").size() == 1);
  CHECK(found("#define F \"/etc/passwd\"\n#include F\n").size() == 1);  // computed
  CHECK(found("# /* hidden */ include \"/etc/passwd\"\n").size() == 1);
  CHECK(found("#inc\\\nlude \"/etc/passwd\"\n").size() == 1);  // line splice
  CHECK(found("%:include \"/etc/passwd\"\n").size() == 1);     // digraph
  CHECK(found("#include_next </etc/passwd>\n").size() == 1);
  f = found("asm(\".inc\" \"bin \\\"/data/labels\\\"\");\n");
  REQUIRE(f.size() == 1);
  CHECK(f[0].find(".incbin") != std::string::npos);
}

TEST_CASE("dependency check: every header a team object read lies in the copy or the system") {
  test::TempDir dir;
  const fs::path src = dir.path() / "src";
  const fs::path build = dir.path() / "build";
  fs::create_directories(src);
  fs::create_directories(build);
  const std::string deps =
      "student/CMakeFiles/convlab_student.dir/m2/conv_cpu.cpp.o: #deps 4, deps mtime 1 (VALID)\n"
      "    " +
      (src / "student/m2/conv_cpu.cpp").string() +
      "\n"
      "    /usr/include/c++/12/vector\n"
      "    " +
      (src / "reference/../reference/core/error.hpp").string() +
      "\n"
      "    /work/main/reference/solutions/m2/conv_cpu.cpp\n"
      "\n"
      "worker/CMakeFiles/convlab-check.dir/convlab_check.cpp.o: #deps 1, deps mtime 1 (VALID)\n"
      "    /opt/elsewhere/harness.hpp\n";
  const auto found = detail::check_dependencies(
      deps, build, src, {"/usr/include/c++/12"},
      {{"student/CMakeFiles/convlab_student.dir/m2/conv_cpu.cpp.o", "student/m2/conv_cpu.cpp"}});
  REQUIRE(found.size() == 1);
  CHECK(found[0].starts_with(
      "student/m2/conv_cpu.cpp: includes /work/main/reference/solutions/m2/conv_cpu.cpp"));

  const auto log_paths = detail::foreign_paths_in_log(
      "In file included from /secret/x.h:3,\n" + (src / "student/a.cpp").string() +
          ":4:1: error: x\n/usr/include/c++/12/vector:1: note\n/usr/bin/ld: cannot find -lx\n",
      src, {"/usr/include/c++/12"});
  CHECK(log_paths == std::vector<std::string>{"/secret/x.h"});
}

TEST_CASE("symbol check: library calls, the library convolution and redefinitions are refused") {
  detail::Framework fw;
  fw.framework_symbols = {{"_ZN7convlab11cpu_threadsEv", true},
                          {"_ZN7convlab8ceil_divIiEET_S1_S1_", false}};
  fw.library_conv_symbols = {"_ZN7convlab22conv_forward_referenceEPfPKfS2_RKNS_9ConvShapeE"};
  fw.library_symbols = {{"cudaEventElapsedTime", "libcudart_static.a"},
                        {"_ZNSt6chrono3_V212steady_clock3nowEv", "libstdc++.so.6"},
                        {"_ZNSt6vectorIfSaIfEE17_M_realloc_insertEv", "libstdc++.so.6"}};
  const std::vector<detail::NmSymbol> ok = {
      {"_ZN7convlab7student16conv_forward_cpuEPfPKfS3_RKNS_9ConvShapeE", 'T'},
      {"_ZN7convlab8ceil_divIiEET_S1_S1_", 'W'},  // an inline function of a framework header
      {"_ZNSt6vectorIfSaIfEE17_M_realloc_insertEv", 'W'},
      {"cudaMalloc", 'U'},
      {"_Z11conv_kernelPfPKfS1_iiiiii", 'T'},  // the team's own kernel
      {"_ZN7convlab11cpu_threadsEv", 'U'}};    // calling the framework is fine
  CHECK(detail::check_symbols("student/m2/conv_cpu.cpp", ok, fw, {}).empty());

  const std::vector<detail::NmSymbol> bad = {
      {"cudnnConvolutionForward", 'U'},
      {"cublasSgemm_v2", 'U'},
      {"_ZN7convlab22conv_forward_referenceEPfPKfS2_RKNS_9ConvShapeE", 'U'},
      {"_ZN7convlab8solution4stubEv", 'U'},
      {"dlsym", 'U'},
      {"cudaLibraryLoadData", 'U'},
      {"cuModuleLoadDataEx", 'U'},
      {"cudaGetDriverEntryPointByVersion", 'U'},
      {"_ZN7convlab11cpu_threadsEv", 'T'},
      {"_ZN7convlab8ceil_divIiEET_S1_S1_", 'T'},
      {"_ZNSt6chrono3_V212steady_clock3nowEv", 'W'},
      {"cudaEventElapsedTime", 'T'},
      {"_ZN7convlab3run5checkEv", 'T'}};
  // A GPU variant's file that may call no library.
  std::string file;
  for (const Variant& v : variants()) {
    if (v.gpu() && v.libraries == Library::none) file = v.student_file;
  }
  REQUIRE(!file.empty());
  const auto found = detail::check_symbols(file, bad, fw, {{"_ZN7convlab3run5checkEv", true}});
  CAPTURE(found);
  CHECK(found.size() == 13);
  const auto has = [&](const std::string& text) {
    return std::any_of(found.begin(), found.end(), [&](const std::string& line) {
      return line.find(text) != std::string::npos;
    });
  };
  CHECK(
      has(file + ": calls cudnnConvolutionForward (cuDNN is not allowed in "
          "your code: write the convolution yourself)"));
  CHECK(has("calls cublasSgemm_v2 (cuBLAS is not allowed"));
  CHECK(
      has("calls convlab::conv_forward_reference(float*, float const*, float const*, "
          "convlab::ConvShape const&) (the library convolution is not allowed"));
  CHECK(has("(the staff solutions are not part of your code"));
  CHECK(has("calls dlsym (loading libraries at run time is not allowed"));
  CHECK(has("calls cudaLibraryLoadData (loading GPU code at run time (cudaLibraryLoadData) is not"));
  CHECK(has("calls cuModuleLoadDataEx (loading GPU code at run time"));
  CHECK(has("calls cudaGetDriverEntryPointByVersion (loading GPU code at run time"));
  CHECK(has("defines convlab::cpu_threads(), which the framework defines too"));
  CHECK(has("defines std::chrono::_V2::steady_clock::now(), which libstdc++.so.6 defines"));
  CHECK(has("defines cudaEventElapsedTime, which libcudart_static.a defines"));
  CHECK(has("defines convlab::run::check(), which the framework defines too"));
}

TEST_CASE("symbol check: cuBLAS only from the file of a variant declared to call it") {
  detail::Framework fw;
  const std::vector<detail::NmSymbol> calls = {{"cublasSgemm_v2", 'U'}, {"cudnnCreate", 'U'}};
  for (const Variant& v : variants()) {
    CAPTURE(v.id);
    const auto found = detail::check_symbols(std::string(v.student_file), calls, fw, {});
    const bool may = v.libraries == Library::cublas;
    CHECK(found.size() == (may ? 1u : 2u));  // cuDNN never
    CHECK(std::none_of(found.begin(), found.end(), [&](const std::string& line) {
      return may && line.find("cublasSgemm_v2") != std::string::npos;
    }));
  }
  // A file of no variant may call no library.
  CHECK(detail::check_symbols("student/notes.cpp", calls, fw, {}).size() == 2);
}

TEST_CASE("build log: progress and commands dropped, paths relative, cut after the first errors") {
  std::string output =
      "[1/3] Building CXX object student/CMakeFiles/convlab_student.dir/m2/conv_cpu.cpp.o\n"
      "FAILED: student/CMakeFiles/convlab_student.dir/m2/conv_cpu.cpp.o\n"
      "/usr/bin/c++ -I/w/src -O3 -c /w/src/student/m2/conv_cpu.cpp\n"
      "/w/src/student/m2/conv_cpu.cpp: In function 'void f()':\n"
      "/w/src/student/m2/conv_cpu.cpp:12:3: error: expected ';' before '}' token\n"
      "   12 |   }\n";
  for (int i = 0; i < 100; ++i) output += "/w/src/student/m2/conv_cpu.cpp:13:1: error: more\n";
  output += "ninja: build stopped: subcommand failed.\n";
  const std::string log = detail::trim_build_log(output, {{"/w/src/", ""}}, 20);
  CAPTURE(log);
  CHECK(
      log.starts_with("student/m2/conv_cpu.cpp: In function 'void f()':\n"
                      "student/m2/conv_cpu.cpp:12:3: error: expected ';'"));
  CHECK(log.find("/usr/bin/c++") == std::string::npos);
  CHECK(log.find("[1/3]") == std::string::npos);
  CHECK(log.find("ninja:") == std::string::npos);
  CHECK(log.find("/w/src") == std::string::npos);
  CHECK(log.find("(83 more lines: fix the first errors") != std::string::npos);
}

TEST_CASE("pristine copy: the build's folders, never the solutions, tests, tools or docs") {
  CHECK(detail::in_pristine_copy("CMakeLists.txt"));
  CHECK(detail::in_pristine_copy("reference/conv/variants.cpp"));
  CHECK(detail::in_pristine_copy("grader/worker/convlab_check.cpp"));
  CHECK(detail::in_pristine_copy("grader/builder/project/CMakeLists.txt"));
  CHECK(!detail::in_pristine_copy("reference/solutions/final/x.cu"));
  CHECK(!detail::in_pristine_copy("reference/solutions"));
  CHECK(!detail::in_pristine_copy("tests/CMakeLists.txt"));
  CHECK(!detail::in_pristine_copy("tools/train/trainer.cpp"));
  CHECK(!detail::in_pristine_copy("docs/grader.md"));
  // The staff tree's hook stays out: the copy builds as the student kit does.
  CHECK(!detail::in_pristine_copy("cmake/ConvlabStaff.cmake"));
  CHECK(detail::in_pristine_copy("cmake/ConvlabVariants.cmake"));
  CHECK(!detail::in_pristine_copy("build/default/CMakeCache.txt"));
  CHECK(!detail::in_pristine_copy("student/.git/config"));
  const auto files = detail::pristine_files(test::source_dir());
  CHECK(contains(files, "student/m2/conv_cpu.cpp"));
  CHECK(std::none_of(files.begin(), files.end(),
                     [](const std::string& f) { return f.starts_with("reference/solutions"); }));
}

TEST_CASE("build tools run with HOME and TMPDIR in the work folder, unable to write elsewhere") {
  test::TempDir dir;
  const fs::path work = dir.path() / "work";
  const fs::path outside = dir.path() / "outside";
  fs::create_directories(work);
  const auto run = detail::run_tool(
      {"/bin/sh", "-c",
       "echo \"$HOME|$TMPDIR\"; touch " + outside.string() + " 2>/dev/null; touch inside"},
      work, work, 30.0);
  CAPTURE(run.stdout_text);
  REQUIRE(run.outcome == grader::Outcome::exited);
  // Both the run's private folder, inside work/tmp.
  const std::string home = run.stdout_text.substr(0, run.stdout_text.find('|'));
  CHECK(home.starts_with((work / "tmp" / "convlab-run-").string()));
  CHECK(run.stdout_text == home + "|" + home + "\n");
  CHECK(fs::exists(work / "inside"));
  if (run.features.read_only_root) {
    CHECK(!fs::exists(outside));
  } else {
    MESSAGE("this machine gives the sandbox no mount namespace: writes outside are not blocked");
  }
}

TEST_CASE(
    "a team's build step runs unprivileged and sees only the system, its tree and the cache") {
  test::TempDir dir;
  const fs::path work = dir.path() / "work";
  const fs::path cache = dir.path() / "cache-entry";
  const fs::path secret = dir.path() / "other-checkout";
  for (const fs::path& d : {work, cache, secret}) fs::create_directories(d);
  std::ofstream(cache / "lib.a") << "archive";
  std::ofstream(secret / "solution.cpp") << "staff";
  detail::TeamBuild team;
  team.uid = grader::sandbox_uid(work.string());
  team.visible = detail::team_build_visible_paths(cache, {});
  detail::give_to_build_user(work, team.uid);
  const auto run = detail::run_tool(
      {"/bin/sh", "-c",
       "id -u; cat " + (cache / "lib.a").string() + "; echo; cat " +
           (secret / "solution.cpp").string() + " 2>&1 | head -c 0 || true; test -e " +
           secret.string() +
           " && echo secret-visible; "
           "echo shadow=$(cat /etc/shadow 2>/dev/null | wc -c); "
           "touch " +
           (cache / "x").string() +
           " 2>/dev/null && echo cache-writable; "
           "touch inside && echo wrote; command -v c++ >/dev/null && echo compiler"},
      work, work, 60.0, {}, &team);
  CAPTURE(run.stdout_text);
  CAPTURE(run.describe());
  REQUIRE(run.outcome == grader::Outcome::exited);
  CHECK(run.stdout_text.find("archive") != std::string::npos);
  CHECK(run.stdout_text.find("wrote") != std::string::npos);
  CHECK(run.stdout_text.find("compiler") != std::string::npos);
  CHECK(run.stdout_text.find("cache-writable") == std::string::npos);
  if (!run.features.allow_list_view) {
    MESSAGE("no mount namespace here: the build sees the whole file system");
    return;
  }
  CHECK(run.stdout_text.find("secret-visible") == std::string::npos);
  if (geteuid() == 0) {
    CHECK(run.features.dropped_privileges);
    CHECK(run.stdout_text.starts_with(std::to_string(team.uid) + "\n"));
  }
  // Unreadable or mounted over, whoever runs it.
  CHECK(run.stdout_text.find("shadow=0\n") != std::string::npos);
  CHECK(run.features.memory_limit != grader::MemoryLimitKind::none);
}

TEST_CASE("the CUDA compiler works as the build user in the team's view") {
  const fs::path nvcc = "/usr/local/cuda/bin/nvcc";
  if (!fs::exists(nvcc)) test::skip("no CUDA toolkit at /usr/local/cuda: nothing to check");
  test::TempDir dir;
  const fs::path work = dir.path() / "work";
  fs::create_directories(work);
  std::ofstream(work / "k.cu") << "__global__ void k(float* y) { y[threadIdx.x] = 1.0f; }\n"
                                  "void launch(float* y) { k<<<1, 32>>>(y); }\n";
  detail::TeamBuild team;
  team.uid = grader::sandbox_uid(work.string());
  team.visible = detail::team_build_visible_paths(dir.path() / "no-cache", {});
  detail::give_to_build_user(work, team.uid);
  const auto run =
      detail::run_tool({nvcc.string(), "-c", "k.cu", "-o", "k.o"}, work, work, 300.0, {}, &team);
  CAPTURE(run.stdout_text);
  CAPTURE(run.describe());
  CHECK(run.outcome == grader::Outcome::exited);
  CHECK(run.exit_code == 0);
  CHECK(fs::exists(work / "k.o"));
}

// ---- Real builds --------------------------------------------------------------------------------

TEST_CASE("build: the pristine stubs build; the next submission reuses the cached framework") {
  test::BuildFixture first;
  const auto a = test::build_and_report(first.request(kM2), "pristine stubs");
  CAPTURE(test::summary(a));
  REQUIRE(a.reason == "ok");
  CHECK(a.ok);
  CHECK(a.files.missing == kM2);
  CHECK(fs::is_regular_file(a.worker));
  CHECK((fs::status(a.worker).permissions() & fs::perms::owner_exec) != fs::perms::none);
  const fs::path src = first.request(kM2).work_dir / "src";
  CHECK(fs::exists(src / "reference/conv/student_api.hpp"));
  CHECK(!fs::exists(src / "reference/solutions"));
  CHECK(!fs::exists(src / "tests"));
  CHECK(!fs::exists(src / "tools"));

  test::BuildFixture second;
  write_file(second.submission.path(), "conv_cpu.cpp",
             m2_file("", "  for (int i = 0; i < s.B; ++i) y[i] = x[i] * k[0];\n"));
  const auto b = test::build_and_report(second.request(kM2), "second submission");
  CAPTURE(test::summary(b));
  REQUIRE(b.reason == "ok");
  CHECK(b.files.accepted == kM2);
  CHECK(b.framework_reused);
  CHECK(b.framework_build == a.framework_build);
  CHECK(read_all(second.request(kM2).work_dir / "src/student/m2/conv_cpu.cpp")
            .find("y[i] = x[i] * k[0]") != std::string::npos);
  if (!a.framework_reused) {
    // The first build paid for the framework; the second only for the team's files.
    CHECK(b.wall_s < a.wall_s / 2);
  }
}

TEST_CASE("build: the staff solution of m2, handed in as the team's file, passes every check") {
  const std::string code = test::solution_as_team_file("student/m2/conv_cpu.cpp");
  if (code.empty()) {
    MESSAGE("no reference/solutions in this tree (a student release): nothing to hand in");
    return;
  }
  test::BuildFixture f;
  write_file(f.submission.path(), "conv_cpu.cpp", code);
  const auto r = test::build_and_report(f.request(kM2), "m2 solution as the team's file");
  CAPTURE(test::summary(r));
  CHECK(r.reason == "ok");
  CHECK(r.forbidden.empty());
}

TEST_CASE("build: a build past its time limit is a timeout") {
  test::BuildFixture f;
  auto request = f.request(kM2);
  // Warm the cache first, so the limit applies to the team's build alone.
  REQUIRE(test::build_and_report(request, "warm-up").reason == "ok");
  // A file of the team's to compile: far more than 50 ms of configure, compile and link.
  write_file(f.submission.path(), "conv_cpu.cpp", m2_file(""));
  request.time_limit_s = 0.05;
  const auto r = test::build_and_report(request, "time limit 0.05 s");
  CAPTURE(test::summary(r));
  CHECK(r.reason == "timeout");
  CHECK(r.log.starts_with("the build passed its time limit of 0.05 s"));
  CHECK(r.submission_build_s < 30.0);
}

TEST_CASE("build: a syntax error is build_failed with the student's file and line") {
  test::BuildFixture f;
  write_file(f.submission.path(), "student/m2/conv_cpu.cpp",
             m2_file("", "  y[0] = undeclared_name;\n"));  // line 6
  const auto r = test::build_and_report(f.request(kM2), "syntax error");
  CAPTURE(test::summary(r));
  CHECK(r.reason == "build_failed");
  CHECK(!r.ok);
  CHECK(std::regex_search(r.log,
                          std::regex(R"(^student/m2/conv_cpu\.cpp:6:\d+: error: .*undeclared_name)",
                                     std::regex::multiline)));
  CHECK(r.log.find(f.work.path().string()) == std::string::npos);  // paths shown relative
}

TEST_CASE(
    "build: includes from outside the framework are refused, and the solutions are not "
    "in the copy") {
  test::BuildFixture f;
  const std::string outside = (test::source_dir() / "reference/solutions/m2/conv_cpu.cpp").string();
  write_file(f.submission.path(), "student/m2/conv_cpu.cpp",
             "// ours\n#include \"" + outside + "\"\n");
  const auto r = test::build_and_report(f.request(kM2), "absolute include");
  CAPTURE(test::summary(r));
  CHECK(r.reason == "forbidden_include");
  REQUIRE(r.forbidden.size() == 1);
  CHECK(r.forbidden[0].starts_with("student/m2/conv_cpu.cpp:2: includes \"" + outside));

  // By a relative name the solutions are simply not there.
  test::BuildFixture g;
  write_file(g.submission.path(), "student/m2/conv_cpu.cpp",
             "#include \"reference/solutions/m2/conv_cpu.cpp\"\n");
  const auto s = test::build_and_report(g.request(kM2), "solutions by name");
  CAPTURE(test::summary(s));
  CHECK(s.reason == "build_failed");
  CHECK(s.log.find("reference/solutions/m2/conv_cpu.cpp") != std::string::npos);
}

TEST_CASE("build: calling the library convolution or loading libraries is refused") {
  test::BuildFixture f;
  write_file(f.submission.path(), "student/m2/conv_cpu.cpp",
             m2_file("#include <dlfcn.h>\n#include \"reference/conv/library_conv.hpp\"\n",
                     "  conv_forward_reference(y, x, k, s);\n"
                     "  if (dlsym(nullptr, \"x\") == nullptr) y[0] = 0;\n"));
  const auto r = test::build_and_report(f.request(kM2), "library convolution");
  CAPTURE(test::summary(r));
  CHECK(r.reason == "forbidden_symbol");
  REQUIRE(r.forbidden.size() == 2);
  CHECK(r.forbidden[0] ==
        "student/m2/conv_cpu.cpp: calls convlab::conv_forward_reference(float*, float const*, "
        "float const*, convlab::ConvShape const&) (the library convolution is not allowed in "
        "your code: write the convolution yourself)");
  CHECK(r.forbidden[1].starts_with("student/m2/conv_cpu.cpp: calls dlsym"));
}

TEST_CASE("build: a team file defining a framework or library function is refused") {
  test::BuildFixture f;
  write_file(f.submission.path(), "student/m2/conv_cpu.cpp",
             m2_file("#include <chrono>\n#include \"reference/core/parallel.hpp\"\n"
                     "namespace convlab { int cpu_threads() { return 1; } }\n"
                     "std::chrono::steady_clock::time_point std::chrono::steady_clock::now() "
                     "noexcept { return time_point(); }\n"));
  const auto r = test::build_and_report(f.request(kM2), "redefinitions");
  CAPTURE(test::summary(r));
  CHECK(r.reason == "forbidden_symbol");
  REQUIRE(r.forbidden.size() == 2);
  CHECK(r.forbidden[0].starts_with(
      "student/m2/conv_cpu.cpp: defines convlab::cpu_threads(), which the framework defines too"));
  CHECK(r.forbidden[1].starts_with(
      "student/m2/conv_cpu.cpp: defines std::chrono::_V2::steady_clock::now(), which "
      "libstdc++.so.6 defines"));
}

}  // namespace test_build
