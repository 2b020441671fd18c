/// @file
/// @brief The CPU layers of the network (everything but the convolution under test).
///
/// Each works on a whole batch in NCHW order and spreads images over cpu_threads() threads.
#pragma once

#include <cstdint>
#include <span>

/// The CPU layers of the network (everything but the convolution under test).
namespace convlab::cpu {

/// tanh of every value, in place. Accurate to about 2e-7 absolute (checked against std::tanh
/// in the tests); vectorisable, unlike the C library's tanhf.
void tanh_inplace(std::span<float> values);

/// max(0, v) of every value, in place.
void relu_inplace(std::span<float> values);

/// Max pooling without padding: y[n][c][i][j] = max over the size x size window at
/// (i*stride, j*stride) of x[n][c]. Output is ((H-size)/stride+1) x ((W-size)/stride+1).
void maxpool(const float* x, float* y, std::int64_t batch, int channels, int height, int width,
             int size, int stride);

/// Fully connected: y[n][o] = b[o] + sum_i x[n][i] * w[o][i], for x [batch][in], w [out][in].
void fully_connected(const float* x, const float* w, const float* b, float* y, std::int64_t batch,
                     int in, int out);

/// Softmax of each row of `values` ([rows][cols]), in place, max-shifted for stability.
void softmax_rows(float* values, std::int64_t rows, int cols);

}  // namespace convlab::cpu
