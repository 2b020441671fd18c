/// @file
/// @brief The shape of one convolution call, shared by every implementation.
#pragma once

#include <cstdint>
#include <string>

namespace convlab {

/// Sizes of one convolution: valid cross-correlation, stride 1, no padding, no bias, NCHW.
///
///     y[b][m][h][w] = sum_{c,p,q} x[b][c][h+p][w+q] * k[m][c][p][q]
///
/// with x[B][C][H][W], k[M][C][K][K] and y[B][M][H-K+1][W-K+1].
struct ConvShape {
  int B = 0;  ///< images in the batch
  int M = 0;  ///< output channels (filters)
  int C = 0;  ///< input channels
  int H = 0;  ///< input height
  int W = 0;  ///< input width
  int K = 0;  ///< filter height and width

  /// Output height, H - K + 1.
  constexpr int H_out() const { return H - K + 1; }
  /// Output width, W - K + 1.
  constexpr int W_out() const { return W - K + 1; }
  /// Elements of x: B*C*H*W.
  constexpr std::int64_t x_elements() const { return std::int64_t{B} * C * H * W; }
  /// Elements of k: M*C*K*K.
  constexpr std::int64_t k_elements() const { return std::int64_t{M} * C * K * K; }
  /// Elements of y: B*M*H_out*W_out.
  constexpr std::int64_t y_elements() const { return std::int64_t{B} * M * H_out() * W_out(); }
  /// Floating-point operations of the layer (one multiply and one add per term).
  constexpr double flops() const { return 2.0 * static_cast<double>(y_elements()) * C * K * K; }

  /// Throws Error unless every size is positive and the filter fits the input.
  void validate() const;
  /// "B=10000 M=50 C=1 H=28 W=28 K=5"
  std::string to_string() const;

  /// Two shapes are equal when all six sizes are.
  friend constexpr bool operator==(const ConvShape&, const ConvShape&) = default;
};

/// The max-pooling a fused launcher applies to tanh(conv): size x size windows, `stride` apart,
/// no padding, so `n` conv outputs pool to (n - size) / stride + 1 values (cuDNN's rule).
struct PoolShape {
  int size = 2;    ///< window height and width
  int stride = 2;  ///< step between windows

  /// Pooled extent of `n` conv outputs along one axis.
  constexpr int out(int n) const { return (n - size) / stride + 1; }
  /// Elements of the pooled output of `conv`: B*M*out(H_out)*out(W_out).
  constexpr std::int64_t pooled_elements(const ConvShape& conv) const {
    return std::int64_t{conv.B} * conv.M * out(conv.H_out()) * out(conv.W_out());
  }
  /// Throws Error unless size and stride are positive and a window fits `conv`'s output.
  void validate(const ConvShape& conv) const;
  /// "2x2 stride 2"
  std::string to_string() const;

  /// Two pools are equal when size and stride are.
  friend constexpr bool operator==(const PoolShape&, const PoolShape&) = default;
};

}  // namespace convlab
