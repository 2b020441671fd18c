// `convlab bench`: checks the options and the network description (in every build, so a bad
// file is reported even without CUDA), then measures on the GPU (bench_gpu.cpp) and prints.
#include "reference/bench/bench.hpp"

#include <fstream>
#include <ostream>

#include "reference/bench/bench_report.hpp"
#include "reference/bench/net_description.hpp"
#include "reference/core/error.hpp"
#include "reference/driver/milestone.hpp"

#ifdef CONVLAB_HAVE_CUDA
#include "reference/bench/bench_gpu.hpp"
#endif

namespace convlab {

int run_bench(const BenchOptions& opt, std::ostream& out, std::ostream& err) {
  if (opt.runs < 1 || opt.runs > 1000) {
    throw Error("--runs must be between 1 and 1000, got " + std::to_string(opt.runs));
  }
  const NetDescription net = load_net(find_net(opt.net, convlab_root() / "datasets" / "nets"));
  const int batch = opt.batch.value_or(net.batch);
  if (batch < 1) throw Error("--batch must be a positive integer, got " + std::to_string(batch));
  const std::vector<ConvShape> shapes = net.shapes(batch);
  if (opt.impl == Impl::solution && !solutions_available()) {
    throw Error("the staff solutions are not part of this build; run with --impl student");
  }
#ifdef CONVLAB_HAVE_CUDA
  const BenchReport report = measure_bench(net, shapes, bench_candidates(opt), opt, err);
  out << format_bench_report(report) << std::flush;
  if (opt.json) {
    std::ofstream f(*opt.json);
    f << bench_report_json(report, CONVLAB_VERSION);
    if (!f) throw Error("cannot write the JSON report to " + opt.json->string());
  }
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
