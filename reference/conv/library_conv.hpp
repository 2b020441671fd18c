/// @file
/// @brief The library convolutions every check trusts: a CPU reference and cuDNN.
#pragma once

#include "reference/conv/conv_shape.hpp"

namespace convlab {

/// CPU reference convolution (multi-threaded over images, vectorised over output columns).
/// Host pointers; same semantics as the student entry points.
void conv_forward_reference(float* y, const float* x, const float* k, const ConvShape& shape);

}  // namespace convlab
