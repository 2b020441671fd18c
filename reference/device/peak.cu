// The ceilings the bench compares against: the fp32 peak, measured the way a good fp32 kernel
// reaches it (cuBLAS SGEMM on large square matrices), and the memory bandwidth of a plain
// device-to-device copy.
// Measured rather than taken from a datasheet: clocks, power limits and the board's memory
// differ from the nominal figures, and a measured ceiling is one a kernel can actually reach.
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "reference/device/device_tools.hpp"
#include "reference/device/peak.hpp"
#include "reference/core/cuda_check.hpp"
#include "reference/core/device_buffer.hpp"

namespace convlab {

namespace {

void cublas_check(cublasStatus_t status, const char* call, const char* file, int line) {
  if (status == CUBLAS_STATUS_SUCCESS) return;
  throw CudaError(std::string("cuBLAS error ") + cublasGetStatusName(status) + " in " + call +
                  " at " + file + ":" + std::to_string(line));
}
#define CUBLAS_CHECK(call) cublas_check((call), #call, __FILE__, __LINE__)

// Owns a cuBLAS handle.
class Cublas {
 public:
  Cublas() { CUBLAS_CHECK(cublasCreate(&handle_)); }
  ~Cublas() { cublasDestroy(handle_); }
  Cublas(const Cublas&) = delete;
  Cublas& operator=(const Cublas&) = delete;
  cublasHandle_t get() const { return handle_; }

 private:
  cublasHandle_t handle_ = nullptr;
};

// Best of `runs` event-timed calls, after `warmup` untimed ones.
template <typename Call>
double best_seconds(const BenchStream& stream, int warmup, int runs, Call call) {
  for (int i = 0; i < warmup; ++i) call();
  const std::vector<double> s = time_calls([] {}, call, runs, stream.get(), nullptr);
  return *std::min_element(s.begin(), s.end());
}

// Stores only: element i of the buffer gets the value i.
__global__ void store_only_kernel(float4* __restrict__ out, std::int64_t count) {
  const std::int64_t stride = std::int64_t{gridDim.x} * blockDim.x;
  for (std::int64_t i = std::int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < count;
       i += stride) {
    const float v = static_cast<float>(4 * i);
    out[i] = make_float4(v, v + 1.0f, v + 2.0f, v + 3.0f);
  }
}

Fp32Peak measure_fp32_peak() {
  constexpr int kN = 8192;
  constexpr int kWarmup = 2, kRuns = 5;
  constexpr std::int64_t kElements = std::int64_t{kN} * kN;
  BenchStream stream;
  DeviceBuffer a(kElements), b(kElements), c(kElements);
  fill_uniform(a.data(), kElements, 11, stream.get());
  fill_uniform(b.data(), kElements, 12, stream.get());
  stream.sync();

  Cublas cublas;
  CUBLAS_CHECK(cublasSetStream(cublas.get(), stream.get()));
  // CUBLAS_DEFAULT_MATH: SGEMM computes in fp32 (CUBLAS_COMPUTE_32F); TF32 tensor cores are used
  // only under CUBLAS_TF32_TENSOR_OP_MATH. Set explicitly so a changed default cannot leak in.
  CUBLAS_CHECK(cublasSetMathMode(cublas.get(), CUBLAS_DEFAULT_MATH));
  const float one = 1.0f, zero = 0.0f;
  const auto sgemm = [&] {
    CUBLAS_CHECK(cublasSgemm(cublas.get(), CUBLAS_OP_N, CUBLAS_OP_N, kN, kN, kN, &one, a.data(), kN,
                             b.data(), kN, &zero, c.data(), kN));
  };
  const double seconds = best_seconds(stream, kWarmup, kRuns, sgemm);
  stream.sync();

  // Check a few elements against double precision. Column-major: C(i,j) = sum_l A(i,l) B(l,j),
  // A(i,l) at a[i + l*N], B(l,j) at b[l + j*N]. An fp32 sum of 8192 terms errs by a few 1e-6
  // of the terms' root-sum-square; with TF32 inputs (10-bit mantissas) the error is about 4e-4
  // of it. The bound, 2e-4, passes fp32 with a wide margin and fails TF32 on most samples.
  std::vector<float> row(kN), col(kN);
  for (int s = 0; s < 8; ++s) {
    const int i = (s * 2741 + 17) % kN, j = (s * 5903 + 101) % kN;
    CUDA_CHECK(cudaMemcpy2D(row.data(), sizeof(float), a.data() + i, kN * sizeof(float),
                            sizeof(float), kN, cudaMemcpyDeviceToHost));
    CUDA_CHECK(cudaMemcpy(col.data(), b.data() + std::int64_t{j} * kN, kN * sizeof(float),
                          cudaMemcpyDeviceToHost));
    float got = 0.0f;
    CUDA_CHECK(cudaMemcpy(&got, c.data() + i + std::int64_t{j} * kN, sizeof(float),
                          cudaMemcpyDeviceToHost));
    double want = 0.0, rss = 0.0;
    for (int l = 0; l < kN; ++l) {
      const double t = static_cast<double>(row[l]) * col[l];
      want += t;
      rss += t * t;
    }
    const double bound = 2e-4 * std::sqrt(rss);
    if (!(std::fabs(got - want) <= bound)) {
      throw Error("the fp32 peak measurement is off: cuBLAS SGEMM gave C(" + std::to_string(i) +
                  "," + std::to_string(j) + ") = " + std::to_string(got) + ", expected " +
                  std::to_string(want) +
                  "; cuBLAS seems to compute below fp32 precision here (check NVIDIA_TF32_OVERRIDE "
                  "and the cuBLAS emulation settings in the environment)");
    }
  }
  const double flops = 2.0 * kN * static_cast<double>(kN) * kN;
  return {flops / seconds,
          "cuBLAS SGEMM 8192^3, CUBLAS_DEFAULT_MATH (fp32 FMA, no TF32), best of " +
              std::to_string(kRuns) + " after " + std::to_string(kWarmup) + " warm-up calls"};
}

MemoryBandwidth measure_memory_bandwidth() {
  constexpr std::int64_t kBytes = std::int64_t{512} << 20;
  constexpr std::int64_t kFloats = kBytes / std::int64_t{sizeof(float)};
  constexpr int kWarmup = 1, kRuns = 10;
  BenchStream stream;
  DeviceBuffer src(kFloats), dst(kFloats);
  fill_uniform(src.data(), kFloats, 13, stream.get());
  const auto copy = [&] {
    CUDA_CHECK(cudaMemcpyAsync(dst.data(), src.data(), static_cast<std::size_t>(kBytes),
                               cudaMemcpyDeviceToDevice, stream.get()));
  };
  const double seconds = best_seconds(stream, kWarmup, kRuns, copy);
  stream.sync();
  return {2.0 * static_cast<double>(kBytes) / seconds,
          "cudaMemcpy device to device, 512 MiB, bytes read + written, best of " +
              std::to_string(kRuns)};
}

MemoryBandwidth measure_write_bandwidth() {
  constexpr std::int64_t kBytes = std::int64_t{1} << 30;
  constexpr std::int64_t kFloats = kBytes / std::int64_t{sizeof(float)};
  constexpr int kWarmup = 1, kRuns = 10, kThreads = 256, kBlocksPerSm = 4;
  int device = 0, sms = 0;
  CUDA_CHECK(cudaGetDevice(&device));
  CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  BenchStream stream;
  DeviceBuffer out(kFloats);
  const auto store = [&] {
    store_only_kernel<<<sms * kBlocksPerSm, kThreads, 0, stream.get()>>>(
        reinterpret_cast<float4*>(out.data()), kFloats / 4);
    CUDA_CHECK_LAUNCH();
  };
  const double seconds = best_seconds(stream, kWarmup, kRuns, store);
  stream.sync();
  return {static_cast<double>(kBytes) / seconds,
          "a kernel storing float4s, 1 GiB, bytes written, best of " + std::to_string(kRuns)};
}

}  // namespace

const Fp32Peak& measured_fp32_peak() {
  static const Fp32Peak peak = measure_fp32_peak();
  return peak;
}

const MemoryBandwidth& measured_memory_bandwidth() {
  static const MemoryBandwidth bandwidth = measure_memory_bandwidth();
  return bandwidth;
}

const MemoryBandwidth& measured_write_bandwidth() {
  static const MemoryBandwidth bandwidth = measure_write_bandwidth();
  return bandwidth;
}

}  // namespace convlab
