// The roofline model: per-SM rates by compute capability, the ceilings they give, and the
// bound of a layer under them.
#include "reference/bench/roofline.hpp"

#include <algorithm>

#include "reference/core/error.hpp"

namespace convlab {

std::vector<Precision> classes_in_use(const std::vector<Precision>& used) {
  std::vector<Precision> out;
  for (Precision c : precision_classes()) {
    if (c == Precision::fp32 || std::find(used.begin(), used.end(), c) != used.end()) {
      out.push_back(c);
    }
  }
  return out;
}

// Flops per clock per SM, dense, an FMA counting two.
//
// fp32: the FP32 FMA results per clock per SM of the CUDA C++ Programming Guide's table
// "Throughput of Native Arithmetic Instructions", times 2: 64 lanes on 6.0, 7.x and 8.0 (P100,
// V100, T4, A100), 128 on 6.1, 6.2, 8.6, 8.7, 8.9 and 9.0. (A100 has 64, not 128: 108 SMs x 64
// x 2 x 1410 MHz = 19.5 TFLOP/s, its datasheet's figure.)
//
// Tensor cores, from the datasheet peak (no sparsity) over SMs x the clock it is stated at:
// - 7.0, V100 SXM2: fp16 125 TFLOP/s = 80 SMs x 1024 x 1530 MHz (Volta whitepaper: 8 tensor
//   cores per SM, 64 FMA per clock each); no TF32.
// - 7.5, T4: fp16 65 TFLOP/s = 40 SMs x 1024 x 1590 MHz (Turing whitepaper); no TF32.
// - 8.0, A100: tf32 156, fp16 312 TFLOP/s = 108 SMs x 1024 / 2048 x 1410 MHz (A100 whitepaper).
// - 8.6: tf32 256 (A40 37.4 TFLOP/s = 84 x 256 x 1740 MHz; RTX 3090 35.6 = 82 x 256 x 1695 MHz);
//   fp16 with fp32 accumulate runs at 1024 on the professional boards and 512 on GeForce: not
//   tabulated, like 8.9, whose L40 and L40S differ by 2x in both classes.
// - 9.0, H100 SXM5: tf32 494.7, fp16 989.4 TFLOP/s = 132 SMs x 2048 / 4096 x 1830 MHz (H100
//   whitepaper, table 3: the datasheet states tensor-core peaks at the 1830 MHz it expects
//   under tensor-core load, the fp32 peak, 66.9 TFLOP/s, at the 1980 MHz boost clock).
// The bench multiplies by the boost clock the device reports (1980 MHz on an H100 SXM5), so on
// tensor cores its bound sits up to 8% above the datasheet: still a bound no kernel passes.
SmRates sm_rates(int cc) {
  switch (cc) {
    case 60:
      return {128, 0, 0};
    case 61:
    case 62:
    case 87:
    case 89:
      return {256, 0, 0};
    case 70:
      return {128, 0, 1024};
    case 72:
      return {128, 0, 0};
    case 75:
      return {128, 0, 1024};
    case 80:
      return {128, 1024, 2048};
    case 86:
      return {256, 256, 0};
    case 90:
      return {256, 2048, 4096};
    default:
      return {};
  }
}

double theoretical_bandwidth(const DeviceSpec& d) {
  return 2.0 * d.memory_clock_hz * d.memory_bus_bits / 8.0;
}

double Ceilings::peak(Precision precision) const {
  switch (precision) {
    case Precision::fp32:
      return fp32;
    case Precision::tf32:
      return tf32;
    case Precision::fp16:
      return fp16;
  }
  return 0.0;
}

Ceilings physical_ceilings(const DeviceSpec& d, double bandwidth) {
  const SmRates r = sm_rates(d.compute_capability);
  const double per_rate = d.sm_count * d.clock_hz;
  return {r.fp32 * per_rate, r.tf32 * per_rate, r.fp16 * per_rate, bandwidth};
}

LayerTraffic conv_traffic(const ConvShape& s) {
  const double elements = static_cast<double>(s.x_elements() + s.k_elements() + s.y_elements());
  return {s.flops(), elements * sizeof(float)};
}

LayerTraffic fused_traffic(const ConvShape& s, const PoolShape& pool) {
  const double elements =
      static_cast<double>(s.x_elements() + s.k_elements() + pool.pooled_elements(s));
  return {s.flops(), elements * sizeof(float)};
}

RooflineBound roofline_bound(const LayerTraffic& t, double peak, double bandwidth) {
  if (!(peak > 0) || !(bandwidth > 0)) {
    throw Error("a roofline bound needs a positive peak and bandwidth");
  }
  const double compute_s = t.flops / peak, memory_s = t.bytes / bandwidth;
  const double seconds = std::max(compute_s, memory_s);
  return {seconds, seconds > 0 ? t.flops / seconds : 0.0, memory_s > compute_s};
}

double percent_of_bound(const RooflineBound& bound, double seconds) {
  return seconds > 0 ? 100.0 * bound.seconds / seconds : 0.0;
}

}  // namespace convlab
