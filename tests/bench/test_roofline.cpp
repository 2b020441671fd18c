// The roofline model's arithmetic on fixed inputs: the published peaks of the H100 SXM5 and
// the A100 come out of the per-SM table, the project's layer has the traffic and intensity
// docs/performance.md works out by hand, and the bound takes the larger of its two times.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "reference/bench/roofline.hpp"
#include "reference/core/error.hpp"

namespace test_roofline {

using namespace convlab;

namespace {

// H100 SXM5 as its device attributes report it: 132 SMs, 1980 MHz, HBM3 at 2619 MHz, 5120 bits.
constexpr DeviceSpec kH100{90, 132, 1.98e9, 2.619e9, 5120};

}  // namespace

TEST_CASE("the H100's physical peaks: fp32 at its boost clock, tensor cores at the datasheet's") {
  const Ceilings c = physical_ceilings(kH100, 2.8e12);
  // NVIDIA's figure: 66.9 TFLOP/s fp32 = 132 SMs x 128 lanes x 2 x 1980 MHz.
  CHECK(c.fp32 == doctest::Approx(66.9e12).epsilon(1e-3));
  CHECK(c.peak(Precision::fp32) == c.fp32);
  CHECK(c.bandwidth == 2.8e12);
  // The datasheet states the dense tensor-core peaks at 1830 MHz: TF32 494.7, FP16 989.4.
  DeviceSpec at_1830 = kH100;
  at_1830.clock_hz = 1.83e9;
  const Ceilings tc = physical_ceilings(at_1830, 2.8e12);
  CHECK(tc.tf32 == doctest::Approx(494.7e12).epsilon(1e-3));
  CHECK(tc.fp16 == doctest::Approx(989.4e12).epsilon(1e-3));
  // At the reported boost clock they are 8% higher: still bounds.
  CHECK(c.peak(Precision::tf32) == doctest::Approx(535.3e12).epsilon(1e-3));
  CHECK(c.peak(Precision::fp16) == doctest::Approx(1070.5e12).epsilon(1e-3));
  // HBM3: 2 x 2619 MHz x 640 bytes = 3.35 TB/s.
  CHECK(theoretical_bandwidth(kH100) == doctest::Approx(3.352e12).epsilon(1e-3));
}

TEST_CASE("the A100's peaks: 64 fp32 lanes per SM, not 128") {
  const DeviceSpec a100{80, 108, 1.41e9, 1.215e9, 5120};
  const Ceilings c = physical_ceilings(a100, 1.5e12);
  CHECK(c.fp32 == doctest::Approx(19.5e12).epsilon(2e-3));
  CHECK(c.tf32 == doctest::Approx(156e12).epsilon(2e-3));
  CHECK(c.fp16 == doctest::Approx(312e12).epsilon(2e-3));
  CHECK(theoretical_bandwidth(a100) == doctest::Approx(1.555e12).epsilon(1e-3));
}

TEST_CASE("the per-SM table: no TF32 before Ampere, nothing claimed for an unknown GPU") {
  CHECK(sm_rates(70).fp32 == 128);
  CHECK(sm_rates(70).tf32 == 0);
  CHECK(sm_rates(70).fp16 == 1024);
  CHECK(sm_rates(86).fp32 == 256);
  CHECK(sm_rates(86).tf32 == 256);
  CHECK(sm_rates(89).fp16 == 0);  // L40 and L40S differ by 2x: not tabulated
  const SmRates unknown = sm_rates(120);
  CHECK(unknown.fp32 == 0);
  CHECK(unknown.tf32 == 0);
  CHECK(unknown.fp16 == 0);
  CHECK(physical_ceilings({120, 84, 2e9, 1e9, 256}, 1e12).fp32 == 0);
}

TEST_CASE("precision classes: fp32 always, the others where used, in a fixed order") {
  using P = Precision;
  CHECK(std::vector<P>(precision_classes().begin(), precision_classes().end()) ==
        std::vector<P>{P::fp32, P::tf32, P::fp16});
  CHECK(classes_in_use({}) == std::vector<P>{P::fp32});
  CHECK(classes_in_use({P::fp16, P::fp32, P::fp16}) == std::vector<P>{P::fp32, P::fp16});
  CHECK(classes_in_use({P::fp16, P::tf32}) == std::vector<P>{P::fp32, P::tf32, P::fp16});
  const Ceilings c{1, 2, 3, 4};
  CHECK(c.peak(P::fp32) == 1);
  CHECK(c.peak(P::tf32) == 2);
  CHECK(c.peak(P::fp16) == 3);
}

TEST_CASE("the project's layer: 14.4 GFLOP over 1.18 GB, 12.2 flops per byte") {
  const ConvShape s{10000, 50, 1, 28, 28, 5};
  const LayerTraffic t = conv_traffic(s);
  CHECK(t.flops == 2.0 * 10000 * 50 * 576 * 25);
  // x 31.36 MB + k 5 KB + y 1.152 GB.
  CHECK(t.bytes == 4.0 * (10000 * 784 + 50 * 25 + 10000 * 50 * 576));
  CHECK(t.intensity() == doctest::Approx(12.17).epsilon(1e-3));

  // Fused: the pooled quarter of y is all that is written.
  const LayerTraffic f = fused_traffic(s, PoolShape{2, 2});
  CHECK(f.flops == t.flops);
  CHECK(f.bytes == 4.0 * (10000 * 784 + 50 * 25 + 10000 * 50 * 144));
  CHECK(f.intensity() == doctest::Approx(45.09).epsilon(1e-3));
  // Odd sizes pool to the floor: 25x25 conv outputs give 12x12.
  const ConvShape odd{1, 1, 1, 29, 29, 5};
  CHECK(fused_traffic(odd, PoolShape{2, 2}).bytes == 4.0 * (29 * 29 + 25 + 144));
}

TEST_CASE("the bound: the larger of the compute and memory times") {
  const Ceilings h100 = physical_ceilings(kH100, 2.8e12);
  const LayerTraffic layer = conv_traffic({10000, 50, 1, 28, 28, 5});
  // fp32: memory-bound, 1.183 GB / 2.8 TB/s = 0.4225 ms, above 14.4 GFLOP / 66.9 TFLOP/s.
  const RooflineBound b = roofline_bound(layer, h100.fp32, h100.bandwidth);
  CHECK(b.memory_bound);
  CHECK(b.seconds == doctest::Approx(0.4225e-3).epsilon(1e-3));
  CHECK(b.flops_per_s == doctest::Approx(12.17 * 2.8e12).epsilon(1e-3));
  CHECK(percent_of_bound(b, 0.4225e-3 * 2) == doctest::Approx(50.0).epsilon(1e-3));
  CHECK(percent_of_bound(b, 0.0) == 0.0);
  // The fused layer is compute-bound in fp32 (45.1 flops per byte > 66.9 / 2.8 = 23.9) ...
  const LayerTraffic fused = fused_traffic({10000, 50, 1, 28, 28, 5}, PoolShape{2, 2});
  const RooflineBound fb = roofline_bound(fused, h100.fp32, h100.bandwidth);
  CHECK(!fb.memory_bound);
  CHECK(fb.seconds == doctest::Approx(14.4e9 / 66.9e12).epsilon(1e-3));
  CHECK(fb.flops_per_s == doctest::Approx(66.9e12).epsilon(1e-3));
  // ... and memory-bound on TF32 tensor cores.
  CHECK(roofline_bound(fused, h100.tf32, h100.bandwidth).memory_bound);
  CHECK_THROWS_AS(roofline_bound(layer, 0.0, 1e12), Error);
  CHECK_THROWS_AS(roofline_bound(layer, 1e12, 0.0), Error);
}

}  // namespace test_roofline
