/// @file
/// @brief The measuring half of `convlab bench` (CUDA builds): runs cuDNN and the variants on
/// every layer and fills a BenchReport. The method is described in bench.hpp.
#pragma once

#include <iosfwd>
#include <string>
#include <vector>

#include "reference/bench/bench.hpp"
#include "reference/bench/bench_report.hpp"
#include "reference/bench/net_description.hpp"
#include "reference/conv/variants.hpp"

namespace convlab {

/// A GPU convolution to bench: a registry variant, or any launcher with the variants' signature.
struct BenchCandidate {
  std::string name;                       ///< as the report prints it
  std::string file;                       ///< where its code lives
  GpuLauncher launcher;                   ///< the function timed and checked
  Precision precision = Precision::fp32;  ///< its class: cuDNN of that class is its comparison
};

/// The registry variants `options` asks for (its variant name or "all"), with their launchers
/// for options.impl; "all" leaves out the variants declared `host`, which have no kernel time
/// on device data. Throws Error for an unknown variant or a `host` one.
std::vector<BenchCandidate> bench_candidates(const BenchOptions& options);

/// Measures `shapes` (the layers of `net` at the chosen batch) with every candidate and with
/// cuDNN in every precision class the candidates belong to, as `options` says (runs, L2 flush; impl
/// is only recorded); one progress line per layer goes to `progress` when it is a terminal. Throws
/// Error when no GPU is usable, when the device runs out of memory (the message suggests a smaller
/// --batch), or when a candidate leaves the device unusable (an illegal address, say); a candidate
/// that merely fails, throws NotImplemented or computes a wrong output is recorded in its row.
BenchReport measure_bench(const NetDescription& net, const std::vector<ConvShape>& shapes,
                          const std::vector<BenchCandidate>& candidates,
                          const BenchOptions& options, std::ostream& progress);

}  // namespace convlab
