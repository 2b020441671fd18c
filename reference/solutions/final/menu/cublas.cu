// Staff solution, menu: input unrolling, then cuBLAS SGEMM.
//
// As in unroll_gemm, a first kernel writes the unrolled input X (C*K*K rows, one column per
// output pixel) into the workspace, a chunk of images at a time (at most 256 MiB);
// cublasSgemmStridedBatched then computes every image's Y_b = W X_b (one batch entry per image: y
// is [B][M][P], not [M][B*P]). cuBLAS is column-major, so it is asked for the transposed product:
// Y_b^T = X_b^T W^T, which reads the same memory without copies. The handle is one per host thread,
// created on first use and bound to the caller's stream on every call; its math mode is the default
// (float32 FMA, no TF32), which keeps this variant in the fp32 class. Why: the library is the bar a
// hand-written product is measured against, and the only variant allowed to link it (the submission
// builder's symbol check enforces that). Expected effect: the product runs near cuBLAS's SGEMM
// rate, the unrolling still dominates on the project's layer; nsys shows cuBLAS's kernel names.
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>

#include "reference/conv/student_api.hpp"
#include "reference/core/ceil_div.hpp"
#include "reference/core/cuda_check.hpp"
#include "reference/core/error.hpp"

namespace convlab::solution {
namespace {

/// The most bytes an unrolled copy may take: a layer whose copy is larger is unrolled and
/// multiplied a chunk of images at a time.
inline constexpr std::size_t kUnrollBudget = std::size_t{256} << 20;

/// Images per chunk so that one chunk's unrolled copy fits kUnrollBudget (at least one).
inline int unroll_chunk_images(const ConvShape& s) {
  const std::size_t per_image =
      static_cast<std::size_t>(s.C) * s.K * s.K * s.H_out() * s.W_out() * sizeof(float);
  if (per_image == 0) return std::max(s.B, 1);
  return static_cast<int>(std::clamp<std::size_t>(kUnrollBudget / per_image, 1,
                                                  static_cast<std::size_t>(std::max(s.B, 1))));
}

/// Bytes of the unrolled copy of one chunk (the workspace).
inline std::size_t unroll_workspace_bytes(const ConvShape& s) {
  return static_cast<std::size_t>(unroll_chunk_images(s)) * s.C * s.K * s.K * s.H_out() *
         s.W_out() * sizeof(float);
}

/// u[i][r][p] = x[b0 + i][c][h + p'][w + q'] for the `images` images from b0: the input
/// unrolled, one thread per element (grid-stride), reads and writes coalesced along p.
__global__ void unroll_kernel(float* __restrict__ u, const float* __restrict__ x, ConvShape s,
                              int b0, int images) {
  const int P = s.H_out() * s.W_out(), kk = s.K * s.K, Kd = s.C * kk;
  const std::int64_t total = std::int64_t{images} * Kd * P;
  for (std::int64_t i = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x; i < total;
       i += std::int64_t{gridDim.x} * blockDim.x) {
    const std::int64_t row = i / P;  // image * Kd + r
    const int p = static_cast<int>(i - row * P);
    const std::int64_t b = b0 + row / Kd;
    const int r = static_cast<int>(row % Kd);
    const int c = r / kk, pq = r - c * kk;
    const int h = p / s.W_out() + pq / s.K, w = p % s.W_out() + pq % s.K;
    u[i] = __ldg(x + ((b * s.C + c) * s.H + h) * s.W + w);
  }
}

/// Enqueues unroll_kernel for `images` images from b0.
inline void launch_unroll(float* u, const float* x, const ConvShape& s, int b0, int images,
                          cudaStream_t stream) {
  const std::int64_t total = std::int64_t{images} * s.C * s.K * s.K * s.H_out() * s.W_out();
  if (total == 0) return;
  const int threads = 256;
  const auto blocks = static_cast<unsigned>(
      std::min<std::int64_t>(ceil_div<std::int64_t>(total, threads), 1 << 20));
  unroll_kernel<<<blocks, threads, 0, stream>>>(u, x, s, b0, images);
  CUDA_CHECK_LAUNCH();
}

void cublas_check(cublasStatus_t status, const char* what) {
  if (status != CUBLAS_STATUS_SUCCESS) {
    throw Error(std::string("cuBLAS: ") + what + " failed: " + cublasGetStatusString(status));
  }
}

// One handle per host thread, never destroyed: destroying it at exit could run after the
// CUDA runtime has shut down.
cublasHandle_t thread_handle() {
  thread_local cublasHandle_t handle = [] {
    cublasHandle_t h = nullptr;
    cublas_check(cublasCreate(&h), "cublasCreate");
    cublas_check(cublasSetMathMode(h, CUBLAS_DEFAULT_MATH), "cublasSetMathMode");
    return h;
  }();
  return handle;
}

}  // namespace

std::size_t conv_cublas_workspace(const ConvShape& shape) {
  return unroll_workspace_bytes(shape);
}

void conv_cublas(float* y, const float* x, const float* k, const ConvShape& shape, void* workspace,
                 cudaStream_t stream) {
  auto* u = static_cast<float*>(workspace);
  const cublasHandle_t handle = thread_handle();
  cublas_check(cublasSetStream(handle, stream), "cublasSetStream");
  const int chunk = unroll_chunk_images(shape);
  const int Kd = shape.C * shape.K * shape.K, P = shape.H_out() * shape.W_out(), M = shape.M;
  const float one = 1.0f, zero = 0.0f;
  for (int b0 = 0; b0 < shape.B; b0 += chunk) {
    const int images = std::min(chunk, shape.B - b0);
    launch_unroll(u, x, shape, b0, images, stream);
    // Column-major: C (P x M, ld P) = A (P x Kd, ld P: X_b) * B (Kd x M, ld Kd: W).
    cublas_check(cublasSgemmStridedBatched(
                     handle, CUBLAS_OP_N, CUBLAS_OP_N, P, M, Kd, &one, u, P, std::int64_t{Kd} * P,
                     k, Kd, 0, &zero, y + std::int64_t{b0} * M * P, P, std::int64_t{M} * P, images),
                 "cublasSgemmStridedBatched");
  }
}

}  // namespace convlab::solution
