/// @file
/// @brief The library convolutions every check trusts: a CPU reference and cuDNN.
#pragma once

#include "reference/conv/conv_shape.hpp"
#include "reference/conv/precision.hpp"

namespace convlab {

/// CPU reference convolution (multi-threaded over images, vectorised over output columns).
/// Host pointers; same semantics as the student entry points.
void conv_forward_reference(float* y, const float* x, const float* k, const ConvShape& shape);

/// The reference convolution of class `p` emulated on the CPU: x and k rounded to the class's
/// input format (round_to_precision), then conv_forward_reference in float32. What a correct
/// tf32 or fp16 kernel computes, up to the order of its sums.
void conv_forward_rounded(Precision p, float* y, const float* x, const float* k,
                          const ConvShape& shape);

}  // namespace convlab
