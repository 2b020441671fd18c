#include "tests/support/test_support.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <random>
#include <sstream>

#include "reference/data/fashion_mnist.hpp"

namespace convlab::test {

namespace fs = std::filesystem;

fs::path source_dir() {
  return CONVLAB_SOURCE_DIR;
}

std::string read_all(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

bool contains(const std::string& text, const std::string& what) {
  return text.find(what) != std::string::npos;
}

std::size_t occurrences(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (std::size_t p = text.find(what); p != std::string::npos; p = text.find(what, p + 1)) ++n;
  return n;
}

std::vector<fs::path> shipped_models() {
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(source_dir() / "datasets" / "models")) {
    if (e.path().extension() == ".safetensors") files.push_back(e.path());
  }
  std::sort(files.begin(), files.end());
  return files;
}
fs::path convlab_binary() {
  return CONVLAB_BINARY;
}

std::optional<fs::path> real_data_dir(std::string* why) {
  const fs::path dir = data::data_dir(std::nullopt);
  if (fs::exists(dir / "t10k-images-idx3-ubyte.gz") &&
      fs::exists(dir / "t10k-labels-idx1-ubyte.gz")) {
    return dir;
  }
  if (why != nullptr) {
    *why = "Fashion-MNIST not found in " + dir.string() +
           " (apt-get install dataset-fashion-mnist, or set CONVLAB_DATA)";
  }
  return std::nullopt;
}

const data::Dataset& real_test_set() {
  static const data::Dataset test_set = [] {
    std::string why;
    const auto dir = real_data_dir(&why);
    if (!dir) skip(why);
    return data::load_fashion_mnist(*dir, data::Split::test);
  }();
  return test_set;
}

namespace {
std::vector<std::string>& notes() {
  static std::vector<std::string> list;
  return list;
}

// Test cases the run's filters selected: a test whose --source-file filter names no file of its
// suite would otherwise pass having run nothing.
unsigned selected_cases = 0;

struct SelectedCases : doctest::IReporter {
  explicit SelectedCases(const doctest::ContextOptions&) {}
  void report_query(const doctest::QueryData&) override {}
  void test_run_start() override {}
  void test_run_end(const doctest::TestRunStats& stats) override {
    selected_cases = stats.numTestCasesPassingFilters;
  }
  void test_case_start(const doctest::TestCaseData&) override {}
  void test_case_reenter(const doctest::TestCaseData&) override {}
  void test_case_end(const doctest::CurrentTestCaseStats&) override {}
  void test_case_exception(const doctest::TestCaseException&) override {}
  void subcase_start(const doctest::SubcaseSignature&) override {}
  void subcase_end() override {}
  void log_assert(const doctest::AssertData&) override {}
  void log_message(const doctest::MessageData&) override {}
  void test_case_skipped(const doctest::TestCaseData&) override {}
};
DOCTEST_REGISTER_LISTENER("selected_cases", 1, SelectedCases);
}  // namespace

void note_not_implemented(const std::string& what) {
  if (std::find(notes().begin(), notes().end(), what) == notes().end()) notes().push_back(what);
}

int finish(int result) {
  if (result == 0 && selected_cases == 0) {
    std::cout << "FAILED: no test case matches this test's filter (--source-file, --test-case); "
                 "is the file in the SOURCES of its convlab_test() in CMakeLists.txt?"
              << std::endl;
    return 1;
  }
  if (result != 0 || notes().empty()) return result;
  // One line, so that tools/test.sh's list of skip reasons shows all of it.
  std::string text;
  for (const std::string& n : notes()) text += (text.empty() ? "" : " | ") + n;
  std::cout << "SKIPPED: " << text << std::endl;
  return 77;
}

void skip(const std::string& reason) {
  std::cout << "SKIPPED: " << reason << std::endl;
  std::exit(77);
}

TempDir::TempDir() {
  std::string pattern = (fs::temp_directory_path() / "convlab-test-XXXXXX").string();
  if (mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
  path_ = pattern;
}

TempDir::~TempDir() {
  std::error_code ec;
  fs::remove_all(path_, ec);
}

std::vector<float> random_values(std::int64_t n, std::uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(static_cast<std::size_t>(n));
  for (float& x : v) x = dist(gen);
  return v;
}

Comparison compare_conv_output(const std::vector<float>& out, const std::vector<float>& ref,
                               const ConvShape& shape, double atol, double rtol) {
  return compare_conv_output(out, ref, shape, {}, atol, rtol);
}

Comparison compare_conv_output(const std::vector<float>& out, const std::vector<float>& ref,
                               const ConvShape& shape, std::span<const double> extra,
                               double atol, double rtol) {
  Comparison c;
  std::ostringstream report;
  if (out.size() != ref.size()) {
    c.ok = false;
    c.report = "size mismatch: " + std::to_string(out.size()) + " vs " + std::to_string(ref.size());
    return c;
  }
  const std::int64_t hw = std::int64_t{shape.H_out()} * shape.W_out();
  for (std::size_t i = 0; i < out.size(); ++i) {
    const double err = std::fabs(static_cast<double>(out[i]) - ref[i]);
    const double allowed = atol + rtol * std::fabs(static_cast<double>(ref[i])) +
                           (extra.empty() ? 0.0 : extra[i]);
    const bool bad = !(err <= allowed);  // NaN fails
    if (std::isfinite(err) && err > c.worst_error) c.worst_error = err;
    if (bad) {
      if (c.mismatches < 10) {
        const auto idx = static_cast<std::int64_t>(i);
        const std::int64_t b = idx / (hw * shape.M), m = idx / hw % shape.M;
        const std::int64_t h = idx % hw / shape.W_out(), w = idx % shape.W_out();
        report << "  y[" << b << "][" << m << "][" << h << "][" << w << "] = " << out[i]
               << ", expected " << ref[i] << "\n";
      }
      ++c.mismatches;
      c.ok = false;
    }
  }
  c.report = report.str();
  return c;
}

int run_command(const std::string& command, std::string* output) {
  FILE* pipe = popen((command + " 2>&1").c_str(), "r");
  if (pipe == nullptr) return -1;
  std::array<char, 4096> buf{};
  std::string text;
  while (std::fgets(buf.data(), buf.size(), pipe) != nullptr) text += buf.data();
  const int status = pclose(pipe);
  if (output != nullptr) *output = text;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

}  // namespace convlab::test
