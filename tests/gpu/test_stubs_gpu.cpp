// Every GPU entry point of the team, called on real device buffers: a stub fails with a message
// naming its file and handout section before it touches the GPU (and the suite reports Skipped,
// saying what to write); written code must match the library convolution.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "reference/conv/elementwise.hpp"
#include "reference/conv/library_conv.hpp"
#include "reference/conv/variants.hpp"
#include "reference/core/cuda_check.hpp"
#include "reference/core/device_buffer.hpp"
#include "reference/core/error.hpp"
#include "tests/support/test_support.hpp"

namespace test_stubs_gpu {

using namespace convlab;

TEST_CASE("every GPU stub names its file and handout section, or the code is right") {
  const ConvShape s{2, 3, 2, 19, 17, 3};
  const auto x_host = test::random_values(s.x_elements(), 7);
  const auto k_host = test::random_values(s.k_elements(), 8);
  std::vector<float> ref(static_cast<std::size_t>(s.y_elements()));
  conv_forward_reference(ref.data(), x_host.data(), k_host.data(), s);
  DeviceBuffer x(s.x_elements()), k(s.k_elements()), y(s.y_elements());
  x.upload(x_host);
  k.upload(k_host);
  for (const GpuVariant& v : gpu_variants()) {
    CAPTURE(v.name);
    y.fill_bytes(0xff);
    try {
      Workspace workspace;
      workspace.reserve(v.student.workspace_bytes(s));
      v.student(y.data(), x.data(), k.data(), s, workspace.data(), nullptr);
      CUDA_CHECK(cudaDeviceSynchronize());
    } catch (const NotImplemented& e) {
      const std::string msg = e.what();
      CHECK(msg.find(std::string(v.student_file)) != std::string::npos);
      CHECK(msg.find(std::string(v.handout)) != std::string::npos);
      test::note_not_implemented(msg);
      continue;
    }
    const Precision c = find_variant(v.name).precision;
    const auto cmp = test::compare_conv_output(
        y.download(), ref, s,
        c == Precision::fp32 ? std::vector<double>{} : precision_allowance(c, s, x_host, k_host));
    const std::string why = std::string(v.student_file) +
                            " differs from the library convolution on " + s.to_string() +
                            " (run convlab check " + std::string(v.milestone) + " --variant " +
                            std::string(v.name) + "):\n" + cmp.report;
    CHECK_MESSAGE(cmp.ok, why);
  }
}

}  // namespace test_stubs_gpu
