// `convlab bench` end to end, the paths that need no GPU: bad options and bad description files
// give one clear error and a non-zero exit; a build without CUDA says that bench needs one;
// --from-json draws the roofline plot and the page of earlier reports anywhere, and docs/perf's
// committed pages are what their reports give.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "reference/bench/bench_report.hpp"
#include "reference/conv/variant_table.hpp"
#include "tests/bench/sample_report.hpp"
#include "tests/support/test_support.hpp"

#ifdef CONVLAB_HAVE_CUDA
#include "reference/core/cuda_check.hpp"
#endif

namespace test_bench_cli {

namespace {

struct Result {
  int code = 0;
  std::string output;
};

Result convlab_command(const std::string& command, const std::string& args) {
  Result r;
  r.code = convlab::test::run_command(
      convlab::test::convlab_binary().string() + " " + command + " " + args, &r.output);
  return r;
}

Result convlab_bench(const std::string& args) {
  return convlab_command("bench", args);
}

std::size_t count_of(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (auto pos = text.find(what); pos != std::string::npos; pos = text.find(what, pos + 1)) ++n;
  return n;
}

// One clear error: non-zero exit, no signal, the expected words, said once, no internal error.
void check_clear_error(const Result& r, const std::string& words) {
  CAPTURE(r.output);
  CHECK(r.code != 0);
  CHECK(r.code < 128);
  CHECK(r.output.find(words) != std::string::npos);
  CHECK(count_of(r.output, "error:") == 1);
  CHECK(r.output.find("internal error") == std::string::npos);
}

}  // namespace

TEST_CASE("bench: bad options and bad net files") {
  check_clear_error(convlab_bench("--net resnet"),
                    "unknown net 'resnet': choose one of ece408, lenet, odd-shapes, "
                    "random-layers, two-conv, vgg16");
  check_clear_error(convlab_bench("--net /nonexistent/net.json"),
                    "network description /nonexistent/net.json not found");
  check_clear_error(convlab_bench("--runs 0"), "--runs must be between 1 and 1000");
  check_clear_error(convlab_bench("--batch 0"), "--batch must be a positive integer");
  check_clear_error(convlab_bench("--net vgg16 --batch 100000"), "use a smaller batch");
  // Rejected by the option parser, which words its own message.
  // A bad argument exits 1 and lists the valid values.
  const Result fast = convlab_bench("--variant fast");
  CHECK(fast.code == 1);
  for (const std::string& name : convlab::variant_ids({}, "gpu")) {
    CHECK(fast.output.find(name) != std::string::npos);
  }

  const Result teacher = convlab_bench("--impl teacher");
  CAPTURE(teacher.output);
  CHECK(teacher.code != 0);
  CHECK(teacher.code < 128);
  CHECK(teacher.output.find("--impl") != std::string::npos);
  CHECK(teacher.output.find("teacher") != std::string::npos);

  convlab::test::TempDir dir;
  const std::string bad = (dir.path() / "bad.json").string();
  std::ofstream(bad) << R"({"name": "bad", "batch": 2, "layers": [)";
  check_clear_error(convlab_bench("--net " + bad), bad + ": not valid JSON");
  const std::string big_k = (dir.path() / "big_k.json").string();
  std::ofstream(big_k) << R"({"name": "big_k", "batch": 2, "layers": [)"
                       << R"({"name": "c", "C": 1, "M": 1, "H": 4, "W": 4, "K": 5}]})";
  check_clear_error(convlab_bench("--net " + big_k),
                    big_k + ": layer 1 (c): the filter (K=5) is larger than the input (4x4)");
}

#ifndef CONVLAB_HAVE_CUDA
TEST_CASE("bench in a build without CUDA says it needs one") {
  const Result r = convlab_bench("--net ece408");
  check_clear_error(r, "built without CUDA");
  CHECK(r.output.find("cmake --preset default") != std::string::npos);
  CHECK(r.code == 1);
}
#else
// Where a GPU is present test_bench_gpu runs the bench itself, and this case is skipped.
TEST_CASE("bench on a machine without a GPU says it needs one" *
          doctest::skip(convlab::cuda_device_available())) {
  check_clear_error(convlab_bench("--net ece408 --runs 1"), "convlab bench needs a CUDA GPU");
}
#endif

TEST_CASE("sweep: only a variant that declares a grid; bad options; it needs a GPU") {
  std::string with_grid, without_grid, grids;
  for (const convlab::Variant& v : convlab::variants()) {
    if (!v.gpu()) continue;
    if (v.sweep) grids += (grids.empty() ? "" : ", ") + std::string(v.id);
    std::string& slot = v.sweep ? with_grid : without_grid;
    if (slot.empty()) slot = v.id;
  }
  REQUIRE(!with_grid.empty());
  REQUIRE(!without_grid.empty());
  const auto sweep = [](const std::string& args) { return convlab_command("sweep", args); };
  check_clear_error(sweep("--variant " + without_grid),
                    "variant " + without_grid +
                        " declares no parameter grid; the variants that do: " + grids);
  check_clear_error(sweep("--variant fastest"), "unknown variant 'fastest'");
  check_clear_error(sweep("--variant " + with_grid + " --runs 0"),
                    "--runs must be between 1 and 1000");
  check_clear_error(sweep("--variant " + with_grid + " --net resnet"), "unknown net 'resnet'");
  const Result missing = sweep("");
  CAPTURE(missing.output);
  CHECK(missing.code == 1);
  CHECK(missing.output.find("--variant") != std::string::npos);
#ifndef CONVLAB_HAVE_CUDA
  check_clear_error(sweep("--variant " + with_grid), "built without CUDA");
#else
  if (!convlab::cuda_device_available()) {
    check_clear_error(sweep("--variant " + with_grid), "convlab sweep needs a CUDA GPU");
  }
#endif
}

TEST_CASE("bench --from-json draws the roofline plot of earlier reports, no GPU needed") {
  convlab::test::TempDir dir;
  const std::string report = (dir.path() / "two-conv.json").string();
  const std::string svg = (dir.path() / "roofline.svg").string();
  std::ofstream(report) << convlab::bench_report_json(convlab::test::sample_report(), "0.1.0");

  const Result ok = convlab_bench("--from-json " + report + " --svg " + svg);
  CAPTURE(ok.output);
  CHECK(ok.code == 0);
  CHECK(ok.output.find("roofline plot: " + svg + " (5 points)") != std::string::npos);
  std::ifstream in(svg);
  const std::string drawn((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  CHECK(drawn.rfind("<svg xmlns=", 0) == 0);
  CHECK(count_of(drawn, "<g class=\"point ") == 5);
  // Two reports, one plot.
  CHECK(convlab_bench("--from-json " + report + " " + report + " --svg " + svg).code == 0);

  check_clear_error(convlab_bench("--from-json " + report),
                    "--from-json only draws earlier reports: add --svg FILE");
  check_clear_error(
      convlab_bench("--from-json " + (dir.path() / "absent.json").string() + " --svg " + svg),
      "cannot read the bench report");
  const std::string broken = (dir.path() / "broken.json").string();
  std::ofstream(broken) << "{";
  check_clear_error(convlab_bench("--from-json " + broken + " --svg " + svg),
                    broken + ": not a bench report this convlab can draw");
  check_clear_error(convlab_bench("--from-json " + report + " --svg /nonexistent/dir/r.svg"),
                    "cannot write the roofline plot to /nonexistent/dir/r.svg");
  // Options of a measurement have no meaning for a plot of earlier reports.
  const Result mixed = convlab_bench("--from-json " + report + " --svg " + svg + " --net vgg16");
  CHECK(mixed.code != 0);
  CHECK(mixed.code < 128);
  CHECK(mixed.output.find("--net excludes --from-json") != std::string::npos);
}

// docs/perf/GPU.md and docs/perf/GPU/roofline.svg are generated from docs/perf/GPU/bench-*.json
// alone (tools/performance-page.sh --draw runs the same command); CONVLAB_UPDATE_DOCS=1 makes
// this test rewrite them.
TEST_CASE("docs/perf's pages and plots are the ones their reports give") {
  namespace fs = std::filesystem;
  const fs::path perf = convlab::test::source_dir() / "docs" / "perf";
  const auto read = [](const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  };
  std::vector<std::string> gpus;
  for (const fs::directory_entry& e : fs::directory_iterator(perf)) {
    const std::string name = e.path().filename().string();
    if (e.is_directory()) {
      gpus.push_back(name);
    } else {
      // Nothing but pages, each beside its folder of reports.
      CHECK_MESSAGE(e.path().extension() == ".md", "docs/perf/" << name << ": not a page");
      CHECK_MESSAGE(fs::is_directory(perf / e.path().stem()),
                    "docs/perf/" << name << " has no folder of reports");
    }
  }
  std::sort(gpus.begin(), gpus.end());
  REQUIRE(!gpus.empty());
  const std::string method = read(perf.parent_path() / "performance.md");
  const bool update = std::getenv("CONVLAB_UPDATE_DOCS") != nullptr;
  for (const std::string& gpu : gpus) {
    CAPTURE(gpu);
    CHECK_MESSAGE(method.find("](perf/" + gpu + ".md)") != std::string::npos,
                  "docs/performance.md's table of pages does not link docs/perf/" << gpu << ".md");
    // The reports copied as they lie, so that the page's links are the committed page's.
    convlab::test::TempDir dir;
    fs::create_directories(dir.path() / gpu);
    std::vector<std::string> reports;
    for (const fs::directory_entry& e : fs::directory_iterator(perf / gpu)) {
      const std::string name = e.path().filename().string();
      if (!name.starts_with("bench-") || !name.ends_with(".json")) continue;
      fs::copy_file(e.path(), dir.path() / gpu / name);
      reports.push_back((dir.path() / gpu / name).string());
    }
    std::sort(reports.begin(), reports.end());  // the order tools/performance-page.sh gives
    REQUIRE(!reports.empty());
    std::string args;
    for (const std::string& r : reports) args += " " + r;
    const fs::path svg = dir.path() / gpu / "roofline.svg", md = dir.path() / (gpu + ".md");
    const Result r = convlab_bench("--from-json" + args + " --svg " + svg.string() +
                                   " --markdown " + md.string());
    REQUIRE_MESSAGE(r.code == 0, r.output);
    const std::string page = read(md), plot = read(svg);
    if (update) {
      std::ofstream(perf / (gpu + ".md"), std::ios::binary | std::ios::trunc) << page;
      std::ofstream(perf / gpu / "roofline.svg", std::ios::binary | std::ios::trunc) << plot;
      continue;
    }
    const std::string redraw =
        "run tools/performance-page.sh --draw, or this test with CONVLAB_UPDATE_DOCS=1";
    CHECK_MESSAGE(plot == read(perf / gpu / "roofline.svg"),
                  "docs/perf/" << gpu << "/roofline.svg is not what its reports draw: " << redraw);
    CHECK_MESSAGE(page == read(perf / (gpu + ".md")),
                  "docs/perf/" << gpu << ".md is not what its reports give: " << redraw);
    // A section per net, a row per variant, links to the reports and the plot.
    for (const std::string& report : reports) {
      const std::string name = fs::path(report).filename().string();
      const std::string net = fs::path(report).stem().string().substr(6);  // bench-NET.json
      CHECK(page.find("## `--net " + net + "`") != std::string::npos);
      CHECK(page.find("](" + gpu + "/" + name + ")") != std::string::npos);
    }
    CHECK(page.find("](" + gpu + "/roofline.svg)") != std::string::npos);
    CHECK(page.find("| best | fp32 |") != std::string::npos);
  }
}

}  // namespace test_bench_cli
