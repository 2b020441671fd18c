/// @file
/// @brief The roofline model of a convolution layer: the work and the compulsory memory
/// traffic of the layer, and the fastest the GPU could run it, given its physical compute
/// ceiling in the layer's precision class and its memory bandwidth.
///
/// A layer's time is bounded below by max(flops / peak, bytes / bandwidth): it cannot do its
/// arithmetic faster than the SMs allow, nor move its compulsory bytes (x and k read once, the
/// output written once) faster than the memory allows. In FLOP/s that is
/// min(peak, intensity * bandwidth), with intensity = flops / bytes. Pure arithmetic: the GPU
/// side (reference/bench/bench_gpu.cpp) reads the device attributes and measures the bandwidth.
#pragma once

#include <vector>

#include "reference/conv/conv_shape.hpp"
#include "reference/conv/precision.hpp"

namespace convlab {

/// The classes a report shows: fp32 (the oracle's and the reference class) and every class in
/// `used` (the variants' classes, repeats allowed), in precision_classes() order.
std::vector<Precision> classes_in_use(const std::vector<Precision>& used);

/// What the device attributes say about a GPU's compute and memory limits.
struct DeviceSpec {
  int compute_capability = 0;    ///< major * 10 + minor, e.g. 90
  int sm_count = 0;              ///< streaming multiprocessors (cudaDevAttrMultiProcessorCount)
  double clock_hz = 0.0;         ///< peak (boost) SM clock (cudaDevAttrClockRate)
  double memory_clock_hz = 0.0;  ///< peak memory clock (cudaDevAttrMemoryClockRate)
  int memory_bus_bits = 0;       ///< memory bus width (cudaDevAttrGlobalMemoryBusWidth)
};

/// Dense arithmetic per SM per clock, in flops (an FMA counts two); 0 where not tabulated.
struct SmRates {
  double fp32 = 0.0;  ///< FP32 FMA lanes x 2 (CUDA cores, no tensor cores)
  double tf32 = 0.0;  ///< TF32 tensor-core math, fp32 accumulate, no sparsity
  double fp16 = 0.0;  ///< FP16 tensor-core math, fp32 accumulate, no sparsity
};

/// The rates of a compute capability (roofline.cpp gives the table and its sources). Compute
/// capabilities outside the table get zeros: no ceiling is claimed for an unknown GPU.
SmRates sm_rates(int compute_capability);

/// Theoretical DRAM bandwidth in bytes/s: 2 (double data rate) x memory clock x bus width / 8.
double theoretical_bandwidth(const DeviceSpec& device);

/// The ceilings of one GPU: the physical peak of each precision class and the bandwidth the
/// memory slope uses.
struct Ceilings {
  double fp32 = 0.0;       ///< FLOP/s: sm_count x rate x clock
  double tf32 = 0.0;       ///< FLOP/s, 0 when the GPU has no TF32 tensor cores (or unknown)
  double fp16 = 0.0;       ///< FLOP/s, 0 when not tabulated
  double bandwidth = 0.0;  ///< bytes/s

  /// The peak of class `precision`.
  double peak(Precision precision) const;
};

/// Physical peaks of `device` (its SMs x sm_rates() x its clock) and `bandwidth` (bytes/s,
/// the measured one in the bench).
Ceilings physical_ceilings(const DeviceSpec& device, double bandwidth);

/// A layer's arithmetic and compulsory memory traffic.
struct LayerTraffic {
  double flops = 0.0;  ///< 2 per multiply-add of the direct convolution
  double bytes = 0.0;  ///< inputs read once, output written once (fp32 in memory)
  /// Flops per byte of compulsory traffic.
  double intensity() const { return bytes > 0 ? flops / bytes : 0.0; }
};

/// The plain convolution: ConvShape::flops(); x and k read once, y written once, 4 bytes each
/// (every precision class keeps x, k and y as float in memory).
LayerTraffic conv_traffic(const ConvShape& shape);

/// The fused conv + tanh + max-pool: the convolution's flops (tanh and max are not counted:
/// they are not multiply-adds, and no ceiling above is about them); x and k read once, the
/// pooled output written once: the conv output never reaches memory.
LayerTraffic fused_traffic(const ConvShape& shape, const PoolShape& pool);

/// The bound a ceiling pair puts on a layer.
struct RooflineBound {
  double seconds = 0.0;       ///< max(flops / peak, bytes / bandwidth)
  double flops_per_s = 0.0;   ///< min(peak, intensity x bandwidth)
  bool memory_bound = false;  ///< the bandwidth term is the larger time
};

/// The roofline bound of `traffic` under `peak` (FLOP/s) and `bandwidth` (bytes/s); throws
/// Error unless both are positive.
RooflineBound roofline_bound(const LayerTraffic& traffic, double peak, double bandwidth);

/// How close a run of `seconds` came to the bound: 100 x bound / seconds (0 when seconds is
/// not positive).
double percent_of_bound(const RooflineBound& bound, double seconds);

}  // namespace convlab
