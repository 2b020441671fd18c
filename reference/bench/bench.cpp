// `convlab bench`: checks the options and the network description (in every build, so a bad
// file is reported even without CUDA), then measures on the GPU (bench_gpu.cpp) and prints.
#include "reference/bench/bench.hpp"

#include <fstream>
#include <ostream>
#include <sstream>

#include "reference/bench/bench_markdown.hpp"
#include "reference/bench/bench_report.hpp"
#include "reference/bench/net_description.hpp"
#include "reference/bench/roofline_svg.hpp"
#include "reference/core/error.hpp"
#include "reference/core/files.hpp"
#include "reference/milestones/milestone.hpp"

#ifdef CONVLAB_HAVE_CUDA
#include "reference/bench/bench_gpu.hpp"
#endif

namespace convlab {

void write_report_file(const std::filesystem::path& path, const std::string& text,
                       const char* what) {
  std::ofstream f(path, std::ios::binary);
  f << text;
  if (!f) throw Error(std::string("cannot write the ") + what + " to " + path.string());
}

CheckedNet check_bench_options(const std::string& net, std::optional<int> batch, int runs,
                               Impl impl) {
  if (runs < 1 || runs > 1000) {
    throw Error("--runs must be between 1 and 1000, got " + std::to_string(runs));
  }
  CheckedNet c{load_net(find_net(net, convlab_root() / "datasets" / "nets")), 0, {}};
  c.batch = batch.value_or(c.net.batch);
  if (c.batch < 1) {
    throw Error("--batch must be a positive integer, got " + std::to_string(c.batch));
  }
  c.shapes = c.net.shapes(c.batch);
  if (impl == Impl::solution && !solutions_available()) {
    throw Error("the staff solutions are not part of this build; run with --impl student");
  }
  return c;
}

namespace {

// `path` as a link from the folder of the page `page`: relative, so that a page and its files
// can move together.
std::string link_from(const std::filesystem::path& page, const std::filesystem::path& path) {
  const std::filesystem::path folder = std::filesystem::absolute(page).parent_path();
  const std::filesystem::path rel =
      std::filesystem::absolute(path).lexically_normal().lexically_relative(
          folder.lexically_normal());
  return (rel.empty() ? path : rel).generic_string();
}

// Draws `reports` (JSON texts; `files`: where each was read from, empty for this run's) into the
// --svg file and the --markdown page, where asked, and says so on `out`.
void write_drawings(const std::vector<BenchJson>& reports,
                    const std::vector<std::filesystem::path>& files, const BenchOptions& opt,
                    std::ostream& out) {
  if (opt.svg) {
    const RooflineChart chart = roofline_chart(reports);
    write_report_file(*opt.svg, roofline_svg(chart), "roofline plot");
    out << "roofline plot: " << opt.svg->string() << " (" << chart.points.size() << " points)\n";
  }
  if (opt.markdown) {
    BenchPageLinks links;
    for (const std::filesystem::path& f : files) {
      links.reports.push_back(f.empty() ? "" : link_from(*opt.markdown, f));
    }
    if (opt.svg) links.svg = link_from(*opt.markdown, *opt.svg);
    write_report_file(*opt.markdown, bench_markdown(reports, links), "Markdown page");
    out << "Markdown page: " << opt.markdown->string() << "\n";
  }
}

// --from-json: the plot and page of earlier reports, no measuring.
int draw_reports(const BenchOptions& opt, std::ostream& out) {
  if (!opt.svg && !opt.markdown) {
    throw Error(
        "--from-json only draws earlier reports: add --svg FILE (the roofline plot) or "
        "--markdown FILE (the page of figures) to say what to write");
  }
  std::vector<BenchJson> reports;
  for (const std::filesystem::path& p : opt.from_json)
    reports.push_back({p.string(), read_file(p, "the bench report")});
  write_drawings(reports, opt.from_json, opt, out);
  return 0;
}

}  // namespace

int run_bench(const BenchOptions& opt, std::ostream& out, std::ostream& err) {
  if (!opt.from_json.empty()) return draw_reports(opt, out);
  const CheckedNet checked = check_bench_options(opt.net, opt.batch, opt.runs, opt.impl);
#ifdef CONVLAB_HAVE_CUDA
  const BenchReport report =
      measure_bench(checked.net, checked.shapes, bench_candidates(opt), opt, err);
  out << format_bench_report(report) << std::flush;
  const std::string json = bench_report_json(report, CONVLAB_VERSION);
  if (opt.json) write_report_file(*opt.json, json, "JSON report");
  write_drawings({{"this run", json}}, {opt.json.value_or(std::filesystem::path())}, opt, out);
  return bench_exit_code(report);
#else
  (void)out;
  (void)err;
  throw Error(
      "convlab bench times GPU kernels against cuDNN, and this convlab was built without CUDA. "
      "Build with the default preset on a machine with the CUDA toolkit and cuDNN "
      "(cmake --preset default && cmake --build --preset default) and run it there.");
#endif
}

}  // namespace convlab
