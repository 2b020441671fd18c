// convlab-hostile: staff rename conv_baseline
// The honest control: the staff kernel, nothing else.
namespace convlab::student {

void conv_baseline(float* y, const float* x, const float* k, const ConvShape& s,
                   cudaStream_t stream) {
  staff_conv_baseline(y, x, k, s, stream);
}

}  // namespace convlab::student
