/// @file
/// @brief What `convlab bench` measured, and how it prints it: the roofline of every layer, one
/// text table per variant in the shape of the classic per-layer "ours vs cuDNN" tables, and a
/// JSON report (which the roofline plot, roofline_svg.hpp, is drawn from).
///
/// These types hold plain numbers, so the formatting is the same with or without CUDA and can
/// be tested anywhere; reference/bench/bench_gpu.cpp fills them on the GPU.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "reference/bench/roofline.hpp"
#include "reference/conv/conv_shape.hpp"

namespace convlab {

/// Summary of the timed runs of one implementation on one layer.
struct TimingStats {
  std::vector<double> samples_s;  ///< every timed run, in order, in seconds
  double min_s = 0.0;             ///< fastest run
  double median_s = 0.0;          ///< median run
  double max_s = 0.0;             ///< slowest run

  /// (max - min) / median: how far apart the runs were (0 for a single run).
  double spread() const;
};

/// Min, median and max of `samples_s` (seconds); throws Error when it is empty.
TimingStats summarize(std::vector<double> samples_s);

/// Absolute and relative tolerance of an element-wise check.
struct Tolerance {
  double atol = 0.0;  ///< absolute part
  double rtol = 0.0;  ///< relative part, times |ref|
};

/// Result of checking an output element-wise against the oracle's.
struct OutputCheck {
  bool ok = true;               ///< every element within atol + rtol * |ref|
  double atol = 0.0;            ///< absolute tolerance used
  double rtol = 0.0;            ///< relative tolerance used
  double worst_error = 0.0;     ///< largest finite |out - ref|
  std::int64_t mismatches = 0;  ///< elements outside the tolerance (NaN counts)
  std::string first_mismatch;   ///< "y[b][m][h][w] = v, expected r" for the first one
};

/// Compares `out` with `ref` (both y of `shape`, NCHW): |out - ref| <= atol + rtol * |ref| for
/// every element; a NaN (an output never written: the bench poisons y) is a mismatch.
OutputCheck check_output(const std::vector<float>& out, const std::vector<float>& ref,
                         const ConvShape& shape, const Tolerance& tolerance);

/// The tolerance the bench checks a layer with: rtol 1e-4 and atol 1e-4 * sqrt(C*K*K). The
/// inputs are uniform in [-1, 1), so an output is a sum of C*K*K terms whose spread grows with
/// the square root of their number, and so does the rounding error of an fp32 sum in any order:
/// fp32 stays well inside. An indexing bug errs by the size of the output itself (about
/// sqrt(C*K*K)/3), and TF32 or FP16 arithmetic (10-bit mantissas) by about the tolerance on a
/// typical element and several times it on many: both fail an fp32 variant. A tf32 or fp16
/// variant's atol adds its class's worst-case bound (elementwise_bound(), reference/conv/
/// precision.hpp) for inputs below 1 in magnitude: sum |x||k| <= C*K*K.
Tolerance tolerance_for(const ConvShape& shape, Precision precision = Precision::fp32);

/// How one variant fared on one layer.
enum class BenchStatus {
  ok,               ///< ran and matched the oracle
  wrong,            ///< ran but its output differs from the oracle (WRONG)
  not_implemented,  ///< the stub has not been written yet
  error             ///< it threw (CUDA error, unsupported shape...)
};

/// "ok", "wrong", "not_implemented" or "error" (the JSON's words).
const char* bench_status_name(BenchStatus status);

/// One variant on one layer.
struct VariantResult {
  std::string variant;                   ///< registry name (reference/conv/variants.def)
  BenchStatus status = BenchStatus::ok;  ///< outcome
  std::string message;                   ///< what went wrong, when status is not ok
  TimingStats time;                      ///< timed runs (ok and wrong only)
  OutputCheck check;                     ///< against the oracle (ok and wrong only)
};

/// One algorithm cudnnFindConvolutionForwardAlgorithmEx tried.
struct CudnnCandidate {
  int algo_id = -1;                 ///< its cudnnConvolutionFwdAlgo_t value
  std::string algorithm;            ///< e.g. "IMPLICIT_PRECOMP_GEMM"
  std::string status;               ///< cuDNN's status for it, e.g. "CUDNN_STATUS_SUCCESS"
  double time_s = 0.0;              ///< cuDNN's own measurement (one run, warm L2)
  std::size_t workspace_bytes = 0;  ///< workspace it needs
  std::string math;                 ///< math type it ran with, e.g. "FMA"
  bool eligible = false;            ///< succeeded with fp32 FMA math (no tensor cores)
};

/// cuDNN on one layer in one precision class: the fastest eligible algorithm, timed like the
/// variants.
struct CudnnResult {
  Precision precision = Precision::fp32;   ///< the class it was held to
  std::string not_measured;                ///< why it was not measured ("" when it was)
  int algo_id = -1;                        ///< chosen algorithm's cudnnConvolutionFwdAlgo_t value
  std::string algorithm;                   ///< chosen algorithm
  std::size_t workspace_bytes = 0;         ///< its workspace
  std::string math;                        ///< its math type
  double find_time_s = 0.0;                ///< what cudnnFind measured for it
  std::size_t workspace_limit = 0;         ///< workspace offered to cudnnFind
  TimingStats time;                        ///< timed runs, same method as the variants
  OutputCheck check;                       ///< its output against the oracle (reported, not judged)
  std::vector<CudnnCandidate> candidates;  ///< every algorithm cudnnFind returned, fastest first
};

/// One conv layer: its shape, cuDNN, and every variant asked for.
struct LayerResult {
  std::string name;                     ///< layer name from the net description
  ConvShape shape;                      ///< sizes, B included
  std::vector<CudnnResult> cudnn;       ///< the library, one per precision class the variants use
  std::vector<VariantResult> variants;  ///< one per variant, registry order

  /// cuDNN of class `precision`; throws Error when the layer has none.
  const CudnnResult& cudnn_for(Precision precision) const;
};

/// The GPU and libraries a report was measured with.
struct BenchMachine {
  std::string gpu;               ///< device name
  std::string driver;            ///< kernel driver version
  std::string cuda_driver;       ///< CUDA version the driver supports
  std::string cuda_runtime;      ///< CUDA runtime version
  std::string cudnn;             ///< cuDNN version
  DeviceSpec device;             ///< compute capability, SMs, clocks, memory bus
  std::int64_t l2_bytes = 0;     ///< L2 cache size
  double fp32_peak = 0.0;        ///< measured fp32 FLOP/s (cuBLAS SGEMM)
  std::string fp32_peak_method;  ///< how it was measured
  double hbm_bandwidth = 0.0;    ///< measured bytes/s (device-to-device copy)
  std::string hbm_method;        ///< how it was measured
  double write_bandwidth = 0.0;  ///< measured bytes/s of stores alone (0: not measured)
  std::string write_method;      ///< how it was measured

  /// The roofline's ceilings: the device's physical peaks and the measured bandwidth.
  Ceilings ceilings() const { return physical_ceilings(device, hbm_bandwidth); }
};

/// A variant as the report names it.
struct VariantInfo {
  std::string name;  ///< registry name
  std::string file;  ///< where its code lives (the student file or the staff solution)
  Precision precision = Precision::fp32;  ///< its class: it is compared with cuDNN of it
};

/// Everything one `convlab bench` run measured.
struct BenchReport {
  std::string net;                    ///< net description name
  std::string net_file;               ///< its file
  int batch = 0;                      ///< B of every layer
  std::string impl;                   ///< "student" or "solution"
  int warmup = 0;                     ///< untimed calls after the checked one
  int runs = 0;                       ///< timed runs per layer and implementation
  bool l2_flush = true;               ///< L2 flushed before every timed run
  std::int64_t flush_bytes = 0;       ///< bytes written to flush it
  std::uint64_t seed = 0;             ///< seed of the random inputs
  BenchMachine machine;               ///< where it ran
  std::vector<VariantInfo> variants;  ///< variants timed, in order
  std::vector<LayerResult> layers;    ///< one per layer of the net
};

/// Milliseconds with about four significant digits, e.g. "0.3984", "13.61" (no unit).
std::string ms_text(double seconds);
/// Bytes in B, KiB, MiB or GiB, e.g. "882.6 MiB".
std::string bytes_text(double bytes);
/// A layer as the tables name it: "C=1 M=50 K=5 28x28".
std::string shape_text(const ConvShape& shape);

/// The report as text: a header (GPU, physical and measured peaks, measured and theoretical
/// bandwidth, method), the roofline table (per layer: flops, compulsory bytes, intensity and
/// the bound of each precision class in use), then for each variant a table with one row per
/// layer (times, cuDNN of its class with its algorithm and workspace, GFLOP/s, percent of the
/// measured SGEMM peak and of the roofline bound for both, the check) and a total row, then
/// the details of failed checks.
std::string format_bench_report(const BenchReport& report);

/// The report as JSON text (every sample, every cudnnFind candidate, the roofline of every
/// layer; docs/performance.md lists the keys).
std::string bench_report_json(const BenchReport& report, const std::string& version);

/// Exit status of a report: 0 when every variant that ran matched the oracle (stubs not yet
/// written are fine), 3 when one was WRONG or failed.
int bench_exit_code(const BenchReport& report);

}  // namespace convlab
