// Building a submission with the GPU parts: nvcc's errors reach the student with their file and
// line, and cuDNN or cuBLAS called from a team file is refused. Skipped in a CPU-only build.
#include <doctest/doctest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "reference/conv/variant_table.hpp"
#include "tests/grader/builder/build_test_support.hpp"

namespace test_build_cuda {

using namespace convlab;
using test::write_file;

namespace {

void require_cuda_build() {
  if (!test::kCudaBuild) {
    test::skip(
        "this build has no CUDA (CONVLAB_CUDA=OFF): submissions are built without their "
        "GPU files, so there is no cuDNN to refuse; run it in a CUDA build");
  }
}

}  // namespace

TEST_CASE("build: cuDNN or cuBLAS called from student/m2/conv_cpu.cpp is refused") {
  require_cuda_build();
  test::BuildFixture f;
  write_file(
      f.submission.path(), "student/m2/conv_cpu.cpp",
      "#include <cublas_v2.h>\n#include <cudnn.h>\n\n"
      "#include \"reference/conv/student_api.hpp\"\n\n"
      "namespace convlab::student {\n"
      "void conv_forward_cpu(float* y, const float* x, const float* k, const ConvShape& s) {\n"
      "  (void)y; (void)x; (void)k; (void)s;\n"
      "  cudnnHandle_t h;\n  cudnnCreate(&h);\n"
      "  cublasHandle_t b;\n  cublasCreate(&b);\n"
      "}\n}  // namespace convlab::student\n");
  const auto r = test::build_and_report(f.request({"student/m2/conv_cpu.cpp"}), "cuDNN call");
  CAPTURE(test::summary(r));
  CHECK(r.reason == "forbidden_symbol");
  REQUIRE(r.forbidden.size() == 2);
  CHECK(r.forbidden[0] ==
        "student/m2/conv_cpu.cpp: calls cublasCreate_v2 (cuBLAS is not allowed in your code: "
        "write the convolution yourself)");
  CHECK(r.forbidden[1] ==
        "student/m2/conv_cpu.cpp: calls cudnnCreate (cuDNN is not allowed in your code: write "
        "the convolution yourself)");
}

TEST_CASE(
    "build: the staff solutions of m3 and final, handed in as the team's files, pass "
    "every check") {
  require_cuda_build();
  // Every GPU variant's file, and the files of its staff folder in its student folder.
  std::vector<std::string> declared, folders, files;
  for (const Variant& v : variants()) {
    if (!v.gpu()) continue;
    declared.emplace_back(v.student_file);
    folders.push_back(v.student_folder());
    const std::filesystem::path staff = test::source_dir() / v.staff_folder();
    if (!std::filesystem::is_directory(staff)) continue;
    for (const auto& e : std::filesystem::directory_iterator(staff)) {
      files.push_back(v.student_folder() + e.path().filename().string());
    }
  }
  files.insert(files.begin(), declared.begin(), declared.end());
  test::BuildFixture f;
  for (const std::string& file : files) {
    const std::string code = test::solution_as_team_file(file);
    if (code.empty()) {
      MESSAGE("no reference/solutions in this tree (a student release): nothing to hand in");
      return;
    }
    write_file(f.submission.path(), file, code);
  }
  const auto r = test::build_and_report(f.request(declared, folders), "m3 and final solutions");
  CAPTURE(test::summary(r));
  CHECK(r.reason == "ok");
  CHECK(r.files.accepted.size() == files.size());
  CHECK(r.forbidden.empty());
}

TEST_CASE("build: an nvcc error names the student's .cu file and line") {
  require_cuda_build();
  test::BuildFixture f;
  write_file(f.submission.path(), "conv_baseline.cu",
             "#include \"reference/conv/student_api.hpp\"\n"
             "namespace convlab::student {\n"
             "void conv_baseline(float* y, const float* x, const float* k, const ConvShape& s,\n"
             "                   cudaStream_t stream) {\n"
             "  undeclared_kernel<<<1, 1, 0, stream>>>(y, x, k, s);\n"  // line 5
             "}\n}  // namespace convlab::student\n");
  const auto r = test::build_and_report(f.request({"student/m3/conv_baseline.cu"}), "nvcc error");
  CAPTURE(test::summary(r));
  CHECK(r.reason == "build_failed");
  CHECK(r.files.accepted == std::vector<std::string>{"student/m3/conv_baseline.cu"});
  CHECK(r.log.find("student/m3/conv_baseline.cu(5)") != std::string::npos);
  CHECK(r.log.find("undeclared_kernel") != std::string::npos);
}

}  // namespace test_build_cuda
