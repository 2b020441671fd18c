// The operands of the implicit product Y = W X, shared by the staff menu kernels that treat a
// layer so (register_tiling, tensor_cores, fp16): the product's sizes, and X read straight
// from x without being stored.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "reference/conv/conv_shape.hpp"

namespace convlab::solution::implicit_product {

/// The product's sizes for one layer.
struct GemmSize {
  int M = 0;              ///< rows of Y: output maps
  int Kd = 0;             ///< the sum's length: C*K*K
  int P = 0;              ///< output pixels per image and map
  std::int64_t cols = 0;  ///< columns of Y: images * P

  static GemmSize of(const ConvShape& s, int images) {
    GemmSize g;
    g.M = s.M;
    g.Kd = s.C * s.K * s.K;
    g.P = s.H_out() * s.W_out();
    g.cols = std::int64_t{images} * g.P;
    return g;
  }
};

/// X read straight from x[B][C][H][W].
struct ImplicitX {
  const float* x;
  int C, H, W, K, W_out, P;

  static ImplicitX of(const float* x, const ConvShape& s) {
    return {x, s.C, s.H, s.W, s.K, s.W_out(), s.H_out() * s.W_out()};
  }
  /// Offset of x[b][0][h][w] for column j.
  __device__ std::int64_t column(std::int64_t j) const {
    const std::int64_t b = j / P;
    const int p = static_cast<int>(j - b * P);
    const int h = p / W_out, w = p - h * W_out;
    return (b * C * H + h) * W + w;
  }
  /// X[r][j], for the column's offset.
  __device__ float at(std::int64_t column, int r) const {
    const int kk = K * K;
    const int c = r / kk, pq = r - c * kk;
    const int p = pq / K, q = pq - p * K;
    return __ldg(x + column + (static_cast<std::int64_t>(c) * H + p) * W + q);
  }
};

}  // namespace convlab::solution::implicit_product
