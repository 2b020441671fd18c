// A bench report as the GPU side would fill it, on an H100 SXM5 (its device attributes, and a
// measured peak and bandwidth close to docs/perf/H100.md's): two layers; cuDNN measured in fp32
// and not in tf32; a variant that is right on the first layer and wrong on the second, a stub,
// and a tf32 variant right on both. The variants' names are labels, no registry ids.
#pragma once

#include <string>

#include "reference/bench/bench_report.hpp"

namespace convlab::test {

/// The H100 SXM5 as the bench sees it: compute capability 9.0, 132 SMs at 1980 MHz, HBM3 at
/// 2619 MHz on a 5120-bit bus; 51.7 TFLOP/s SGEMM and 2.8 TB/s copy measured.
inline BenchMachine sample_h100() {
  BenchMachine m;
  m.gpu = "NVIDIA H100 80GB HBM3";
  m.driver = "580.159.04";
  m.cuda_driver = "13.0";
  m.cuda_runtime = "13.0";
  m.cudnn = "9.14.0";
  m.device = {90, 132, 1.98e9, 2.619e9, 5120};
  m.l2_bytes = 50 << 20;
  m.fp32_peak = 51.7e12;
  m.fp32_peak_method = "cuBLAS SGEMM 8192^3";
  m.hbm_bandwidth = 2.8e12;
  m.hbm_method = "cudaMemcpy device to device";
  m.write_bandwidth = 3.16e12;
  m.write_method = "a kernel storing float4s";
  return m;
}

inline VariantResult sample_run(const std::string& name, BenchStatus status, double min_s) {
  VariantResult v;
  v.variant = name;
  v.status = status;
  if (status == BenchStatus::ok || status == BenchStatus::wrong) {
    v.time = summarize({min_s * 1.1, min_s, min_s * 1.05});
    v.check.ok = status == BenchStatus::ok;
    v.check.mismatches = v.check.ok ? 0 : 17;
    v.check.first_mismatch = v.check.ok ? "" : "y[0][1][2][3] = 1, expected 2";
  } else {
    v.message = "student/final/9_tiled.cu: not implemented yet";
  }
  return v;
}

inline BenchReport sample_report() {
  BenchReport r;
  r.net = "two-conv";
  r.net_file = "datasets/nets/two-conv.json";
  r.batch = 10000;
  r.impl = "solution";
  r.warmup = 1;
  r.runs = 3;
  r.flush_bytes = 100 << 20;
  r.machine = sample_h100();
  r.variants = {{"direct", "reference/solutions/final/8_direct.cu", Precision::fp32},
                {"tiled", "reference/solutions/final/9_tiled.cu", Precision::fp32},
                {"tensor", "reference/solutions/final/10_tensor.cu", Precision::tf32}};
  const ConvShape shapes[] = {{10000, 8, 1, 28, 28, 5}, {10000, 16, 8, 12, 12, 3}};
  for (int i = 0; i < 2; ++i) {
    LayerResult l;
    l.name = "conv" + std::to_string(i + 1);
    l.shape = shapes[i];
    CudnnResult fp32;
    fp32.algorithm = "IMPLICIT_PRECOMP_GEMM";
    fp32.workspace_bytes = 3 << 20;
    fp32.time = summarize({2e-3, 2.2e-3, 2.1e-3});
    CudnnResult tf32;
    tf32.precision = Precision::tf32;
    tf32.not_measured = "the bench times cuDNN in the fp32 class only, so far";
    l.cudnn = {fp32, tf32};
    l.variants = {sample_run("direct", i == 0 ? BenchStatus::ok : BenchStatus::wrong, 4e-3),
                  sample_run("tiled", BenchStatus::not_implemented, 0),
                  sample_run("tensor", BenchStatus::ok, 0.5e-3)};
    r.layers.push_back(l);
  }
  return r;
}

}  // namespace convlab::test
