/// @file
/// @brief The element-wise check's oracle and comparison, shared with `convlab check`: they
/// live in the framework (reference/conv/elementwise.hpp); the grader uses them by these names.
#pragma once

#include "reference/conv/elementwise.hpp"

namespace convlab::grader {

using convlab::compare_elementwise;
using convlab::conv_output_dims;
using convlab::conv_reference_double;
using convlab::describe_mismatch;
using convlab::ElementMismatch;
using convlab::ElementwiseComparison;
using convlab::OutputDims;
using convlab::pooled_output_dims;
using convlab::tanh_maxpool_reference;

}  // namespace convlab::grader
