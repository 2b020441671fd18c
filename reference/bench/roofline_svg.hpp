/// @file
/// @brief `convlab bench --svg`: the roofline plot of bench reports, drawn from their JSON (the
/// one interface: a report just measured and a file written earlier are drawn alike).
///
/// Log-log: x is the arithmetic intensity (flops per byte of compulsory traffic), y the rate
/// in FLOP/s. Lines: the memory slope (measured bandwidth x intensity), the physical ceiling of
/// each precision class the GPU has, and the measured SGEMM peak (dashed). A point per layer
/// and implementation: filled circles for the variants, hollow squares for cuDNN, coloured by
/// precision class, each with a title naming the layer and the implementation. One
/// self-contained SVG in the leaderboard's plain style: no script, inline style, role="img"
/// with a title and a description.
#pragma once

#include <string>
#include <vector>

#include "reference/bench/roofline.hpp"

namespace convlab {

/// One implementation on one layer.
struct RooflinePoint {
  std::string layer;                      ///< "<net> <layer>", e.g. "ece408 conv1"
  std::string implementation;             ///< the variant's name, or "cuDNN <algorithm>"
  Precision precision = Precision::fp32;  ///< its precision class
  bool library = false;                   ///< cuDNN (a square) rather than a variant (a circle)
  double intensity = 0.0;                 ///< flops per byte of the layer's compulsory traffic
  double seconds = 0.0;                   ///< fastest run
  double flops_per_s = 0.0;               ///< the layer's flops over `seconds`
  double percent_of_bound = 0.0;          ///< of the bound of its class (0 when it has none)
};

/// What the plot shows.
struct RooflineChart {
  std::string gpu;                    ///< device name
  std::vector<std::string> nets;      ///< the reports' nets, in order
  Ceilings ceilings;                  ///< physical peaks, measured bandwidth
  double sgemm_peak = 0.0;            ///< measured fp32 peak (cuBLAS SGEMM)
  std::vector<RooflinePoint> points;  ///< correct timed runs only
};

/// A bench report's JSON text and where it came from (a file name, for messages).
struct BenchJson {
  std::string origin;  ///< e.g. the file's path
  std::string text;    ///< bench_report_json()'s output
};

/// The chart of one or more reports of the same GPU: its ceilings from the first, a point for
/// every variant whose status is ok and every cuDNN row that was measured. Throws Error, naming
/// the origin, for text that is not a bench report, reports of different GPUs, a report
/// without a measured bandwidth, or nothing to plot.
RooflineChart roofline_chart(const std::vector<BenchJson>& reports);

/// The chart as a standalone SVG document.
std::string roofline_svg(const RooflineChart& chart);

}  // namespace convlab
