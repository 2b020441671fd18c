// The fused epilogues' tanh (conv + tanh + max-pool): the best kernel's routes and the
// tensor_cores menu variant share it.
#pragma once

namespace convlab::solution {

// tanh(u) = 1 - 2 / (2^(2u log2 e) + 1) with the hardware exp2 and reciprocal: five
// instructions, absolute error below 1e-6 (2^x overflowing to inf gives 1, 0 gives -1).
// tanh_exp2 takes v = u * kTanhExp2Scale, a scale a kernel can fold into its operands.
inline constexpr float kTanhExp2Scale = 2.8853900817779268f;  // 2 log2(e)
__device__ __forceinline__ float tanh_exp2(float v) {
  float e, r;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(e) : "f"(v));
  asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(e + 1.0f));
  return fmaf(-2.0f, r, 1.0f);
}
__device__ __forceinline__ float tanh_fast(float u) {
  return tanh_exp2(u * kTanhExp2Scale);
}

}  // namespace convlab::solution
