/// @file
/// @brief `convlab bench`: times every conv layer of a network description with a GPU variant
/// and with cuDNN's fastest algorithm of the variant's precision class, checks the variant's
/// output, and places both under the layer's roofline (roofline.hpp; `--svg` draws it).
///
/// Method (the same for the variants and cuDNN; docs/performance.md explains it):
/// - inputs are uniform in [-1, 1) from a fixed seed, generated on the device; x, k and y stay
///   device-resident, nothing is copied inside the timed interval;
/// - one call whose output (poisoned with NaN first) is checked against cuDNN's
///   IMPLICIT_GEMM algorithm (a direct fp32 sum: the oracle), then `kBenchWarmup` untimed
///   warm-up calls;
/// - `runs` timed runs; before each, y is poisoned again and (unless --no-flush) a buffer of
///   twice the L2 size is written so every run starts with a cold L2 cache; each run is timed
///   with a pair of CUDA events on the stream;
/// - min, median and spread (max - min) / median are reported; the output of the last timed run
///   is checked again, so a kernel that only works once is caught;
/// - cuDNN's algorithm is the fastest that cudnnFindConvolutionForwardAlgorithmEx finds with
///   CUDNN_FMA_MATH (fp32 FMA, no TF32 tensor cores) within the free device memory.
#pragma once

#include <cstdint>
#include <filesystem>
#include <iosfwd>
#include <optional>
#include <string>
#include <vector>

#include "reference/bench/net_description.hpp"
#include "reference/conv/variants.hpp"

namespace convlab {

/// Untimed calls after the checked one, before the timed runs.
inline constexpr int kBenchWarmup = 1;
/// Seed of the random inputs (the same data on every run of the bench).
inline constexpr std::uint64_t kBenchSeed = 2017;

/// Everything `convlab bench` accepts.
struct BenchOptions {
  std::string net = "ece408";                 ///< a name in datasets/nets or a .json path
  std::string variant = "best";               ///< a GPU variant name, or "all"
  std::optional<int> batch;                   ///< images per call; default: the net's batch
  int runs = 10;                              ///< timed runs per layer and implementation
  Impl impl = Impl::student;                  ///< the team's code or the staff solutions
  std::optional<std::filesystem::path> json;  ///< where to write the JSON report
  bool flush_l2 = true;                       ///< flush L2 before every timed run
  std::optional<std::filesystem::path> svg;   ///< where to write the roofline plot
  /// Where to write the Markdown page of figures (bench_markdown.hpp).
  std::optional<std::filesystem::path> markdown;
  /// Bench reports (--json files) to draw instead of measuring: needs `svg` or `markdown`.
  std::vector<std::filesystem::path> from_json;
};

/// A network description and the batch to run it with, from options already checked.
struct CheckedNet {
  NetDescription net;             ///< the description `--net` named
  int batch = 0;                  ///< images per call: `--batch`, else the net's own
  std::vector<ConvShape> shapes;  ///< its conv layers at that batch
};

/// The options `convlab bench` and `convlab sweep` share, checked before any GPU work and in
/// this order: `runs` in 1..1000, the net found and read, the batch positive, the layers'
/// sizes at that batch (NetDescription::shapes), the staff solutions built in when `impl` asks
/// for them. Throws Error naming the bad option.
CheckedNet check_bench_options(const std::string& net, std::optional<int> batch, int runs,
                               Impl impl);

/// Writes `text` to `path`; throws Error("cannot write the <what> to <path>") on failure.
void write_report_file(const std::filesystem::path& path, const std::string& text,
                       const char* what);

/// Runs the benchmark and prints the report to `out` (progress goes to `err` when it is a
/// terminal); with options.from_json, draws those reports' roofline and page instead (no GPU
/// needed).
/// Returns 0, or 3 when a variant was WRONG or failed. Throws Error for bad options (unknown
/// net or variant, bad batch or runs, --from-json without --svg or --markdown), for an unreadable
/// or foreign
/// report, in a build without CUDA (unless plotting), or when no GPU is usable.
int run_bench(const BenchOptions& options, std::ostream& out, std::ostream& err);

}  // namespace convlab
