// Staff solution, menu: half precision (IEEE fp16 inputs, float32 accumulation).
//
// tensor_cores' kernel (BMx128 tiles of eight warps, y written through shared memory) with
// half inputs: W and X tiles are rounded to __half as they are staged (half the
// shared-memory bytes of float), and the tensor cores multiply 16x16x16 half fragments into
// float32 accumulators. The accumulation stays float32
// as the fp16 class states (docs/grader.md): a half accumulator would lose the sum's low
// bits after a few hundred terms.
// Why: the later editions' FP16 point; half doubles the tensor cores' rate over TF32 and
// halves every staged byte, at the price of fp16's range (max 65504) and 10-bit mantissa.
// Expected effect: fewer shared-memory bytes per product than tensor_cores; the class's rule
// reports how many images sit under the bound.
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>
#include <mma.h>

#include "reference/conv/student_api.hpp"
#include "reference/solutions/final/menu/wmma_conv.cuh"

namespace convlab::solution {
namespace {

namespace wmma = nvcuda::wmma;

/// IEEE half inputs: fragments of m16n16k16.
struct HalfInputs {
  using Fragment = __half;
  using Stored = __half;
  static constexpr int kK = 16;
  __device__ static Stored round(float v) { return __float2half_rn(v); }
};

}  // namespace

void conv_fp16(float* y, const float* x, const float* k, const ConvShape& shape,
               cudaStream_t stream) {
  wmma_conv::launch_wmma_conv<HalfInputs>(y, x, k, shape, stream);
}

}  // namespace convlab::solution
