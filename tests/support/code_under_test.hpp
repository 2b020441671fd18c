/// @file
/// @brief Which convolutions a suite tests: the staff solutions where this build has them,
/// else (the student release) the team's own code. Code not written yet is noted, and the
/// suite then reports Skipped with what to implement (test::note_not_implemented).
#pragma once

#include <string>

#include "reference/conv/variants.hpp"
#include "reference/core/error.hpp"
#include "tests/support/test_support.hpp"

#ifdef CONVLAB_HAVE_CUDA
#include <cuda_runtime_api.h>

#include "reference/core/cuda_check.hpp"
#include "reference/core/device_buffer.hpp"
#endif

namespace convlab::test {

/// The staff solutions where they are built in, else the team's code.
inline Impl code_under_test() {
  return solutions_available() ? Impl::solution : Impl::student;
}

/// The m2 convolution under test, or nullptr (noted) when the team has not written it yet.
/// The probe is a real call on real buffers: a stub throws before it reads them.
inline CpuConvFn cpu_conv_under_test() {
  const CpuConvFn fn = cpu_conv(code_under_test());
  const ConvShape s{1, 1, 1, 2, 2, 1};
  float x[4] = {1, 2, 3, 4}, k[1] = {1}, y[4] = {};
  try {
    fn(y, x, k, s);
  } catch (const NotImplemented& e) {
    note_not_implemented(e.what());
    return nullptr;
  }
  return fn;
}

#ifdef CONVLAB_HAVE_CUDA
/// The launcher of `v` under test as a plain call (its workspace, if it takes one, grows as
/// shapes need), or empty (noted) when the team has not written it yet.
inline GpuConvCall launcher_under_test(const GpuVariant& v) {
  const GpuConvCall fn = bind_workspace(v.launcher(code_under_test()), {});
  const ConvShape s{1, 1, 1, 2, 2, 1};
  DeviceBuffer x(4), k(1), y(4);
  x.fill_bytes(0);
  k.fill_bytes(0);
  try {
    fn(y.data(), x.data(), k.data(), s, nullptr);
    CUDA_CHECK(cudaDeviceSynchronize());
  } catch (const NotImplemented& e) {
    note_not_implemented(e.what());
    return nullptr;
  }
  return fn;
}

/// The fused launcher of `v` under test, or nullptr where the variant has none or the team has
/// not written it (it is optional, so that is not noted).
inline GpuConvTanhPoolFn fused_launcher_under_test(const GpuVariant& v) {
  const GpuConvTanhPoolFn fn = v.fused_launcher(code_under_test());
  if (fn == nullptr) return nullptr;
  const ConvShape s{1, 1, 1, 3, 3, 1};
  DeviceBuffer x(9), k(1), y(1);
  x.fill_bytes(0);
  k.fill_bytes(0);
  try {
    fn(y.data(), x.data(), k.data(), s, PoolShape{2, 2}, nullptr);
    CUDA_CHECK(cudaDeviceSynchronize());
  } catch (const NotImplemented&) {
    return nullptr;
  }
  return fn;
}
#endif

}  // namespace convlab::test
