// convlab-hostile: staff rename conv_baseline
// Hostile: the work goes on a private stream and the call returns before it is done.
namespace convlab::student {

void conv_baseline(float* y, const float* x, const float* k, const ConvShape& shape,
                   cudaStream_t) {
  static cudaStream_t own = [] {
    cudaStream_t s;
    cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
    return s;
  }();
  staff_conv_baseline(y, x, k, shape, own);
}

}  // namespace convlab::student
