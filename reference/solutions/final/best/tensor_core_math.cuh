// Tensor-core and asynchronous-copy primitives: TF32's big + small split (3xTF32: fp32
// accuracy from TF32 products), the mma.sync products in TF32 and fp16, cp.async, and the
// wgmma fences of an sm_90a build. The best kernel's routes and the tensor_cores and fp16 menu
// variants use them.
#pragma once

#include <cstdint>

namespace convlab::solution {

// The shared-memory address (state space) of a generic pointer into shared memory.
__device__ __forceinline__ unsigned shared_address(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

__device__ __forceinline__ void cp_async4(float* dst, const float* src, bool valid) {
  const unsigned d = shared_address(dst);
  // A source size of 0 fills the 4 bytes with zeros and reads nothing.
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;" ::"r"(d), "l"(src),
               "r"(valid ? 4 : 0));
}
__device__ __forceinline__ void cp_async16(float* dst, const float* src, bool valid) {
  const unsigned d = shared_address(dst);
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(d), "l"(src),
               "r"(valid ? 16 : 0));
}
__device__ __forceinline__ void cp_async_commit() {
  asm volatile("cp.async.commit_group;");
}
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;" ::"n"(N));
}

// v = big + small: big is v rounded to TF32 (10-bit mantissa; adding half of the dropped
// bits' range rounds half away from zero), small = v - big exactly (|small| <= 2^-12 |v|), of
// which the tensor core reads the top 10 mantissa bits.
__device__ __forceinline__ void split_tf32(float v, std::uint32_t& big, std::uint32_t& small) {
  big = (__float_as_uint(v) + 0x1000u) & 0xffffe000u;
  small = __float_as_uint(v - __uint_as_float(big));
}

// acc += a * b on one m16n8k8 fragment, TF32 in, fp32 accumulate: A is 16 rows x 8 terms, B 8
// terms x 8 columns. Lane l holds, with g = l / 4 and t = l % 4: A's (g, t), (g + 8, t),
// (g, t + 4), (g + 8, t + 4); B's (t, g), (t + 4, g); acc's (g, 2t), (g, 2t + 1), (g + 8, 2t),
// (g + 8, 2t + 1): so acc's rows g and g + 8 of a column pair are in one lane.
__device__ __forceinline__ void mma_tf32(float (&acc)[4], const std::uint32_t (&a)[4],
                                         const std::uint32_t (&b)[2]) {
  asm volatile(
      "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%0,%1,%2,%3};"
      : "+f"(acc[0]), "+f"(acc[1]), "+f"(acc[2]), "+f"(acc[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}
// The same on an m16n8k4 fragment: A's (g, t) and (g + 8, t), B's (t, g); acc as m16n8k8.
__device__ __forceinline__ void mma_tf32_k4(float (&acc)[4], const std::uint32_t (&a)[2],
                                            std::uint32_t b) {
  asm volatile(
      "mma.sync.aligned.m16n8k4.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5}, {%6}, "
      "{%0,%1,%2,%3};"
      : "+f"(acc[0]), "+f"(acc[1]), "+f"(acc[2]), "+f"(acc[3])
      : "r"(a[0]), "r"(a[1]), "r"(b));
}

// mma.sync m16n8k16, fp16 inputs, fp32 accumulators: lane l (g = l / 4, t = l % 4) holds A's
// rows g and g + 8 at columns 2t, 2t + 1 (a[0], a[1]) and 2t + 8, 2t + 9 (a[2], a[3]), B's
// rows 2t, 2t + 1 (b0) and 2t + 8, 2t + 9 (b1) of column g, C as the TF32 m16n8k8.
__device__ __forceinline__ void mma_f16(float (&c)[4], const std::uint32_t (&a)[4],
                                        std::uint32_t b0, std::uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
      "{%8, %9}, {%0, %1, %2, %3};"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
// The matrix descriptor of an 8-term B tile at `tile` in shared memory, K-major without
// swizzle: 8x4-float core matrices of 128 contiguous bytes, the two of a row group (terms 0-3,
// 4-7) 128 bytes apart (leading offset), row groups of 8 maps 256 bytes apart (stride offset).
__device__ __forceinline__ std::uint64_t wgmma_descriptor(const float* tile) {
  const std::uint32_t address = shared_address(tile);
  constexpr std::uint64_t kLeading = 128 >> 4, kStride = 256 >> 4;
  return ((address & 0x3ffff) >> 4) | kLeading << 16 | kStride << 32;
}

// Orders the products after the registers they read were written, and the reads of d after
// the products finished (the asm statements alone do not tie d to the wait).
__device__ __forceinline__ void wgmma_fence() {
  asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
}
// The products read shared memory through the async proxy: this thread's earlier stores to it
// become visible to them (before the barrier that publishes them to the block).
__device__ __forceinline__ void fence_shared_for_wgmma() {
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
}
__device__ __forceinline__ void wgmma_commit() {
  asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
}
// Waits until at most kPending committed groups of products are still running.
template <int kPending, int N>
__device__ __forceinline__ void wgmma_wait(float (&d)[N]) {
  asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(kPending) : "memory");
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+f"(d[i])::"memory");
}
template <int N>
__device__ __forceinline__ void wgmma_commit_and_wait(float (&d)[N]) {
  wgmma_commit();
  wgmma_wait<0>(d);
}
#endif

}  // namespace convlab::solution
