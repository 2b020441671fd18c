// RemoteConv in a build without CUDA: the host side only; a GPU variant cannot be refereed.
#include "grader/worker/remote_conv_impl.hpp"

namespace convlab::grader {
namespace {

[[noreturn]] void no_cuda() {
  throw Error("this variant runs on the GPU, but the referee was built without CUDA");
}

}  // namespace

struct DeviceSide {};

void DeviceSideDelete::operator()(DeviceSide* d) const {
  delete d;
}

void start_device(RemoteConv::Impl&) {
  no_cuda();
}

void RemoteConv::gpu(float*, const float*, const float*, const ConvShape&, CUstream_st*) {
  no_cuda();
}

void RemoteConv::gpu_fused(float*, const float*, const float*, const ConvShape&, int,
                           CUstream_st*) {
  no_cuda();
}

}  // namespace convlab::grader
