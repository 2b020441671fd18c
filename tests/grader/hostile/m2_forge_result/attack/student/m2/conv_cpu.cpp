// convlab-hostile: staff rename conv_forward_cpu
// Hostile: a forged result document on fd 3 before the harness starts.
#include <unistd.h>

#include <cstring>

namespace convlab::student {
namespace {

struct Forger {
  Forger() {
    const char doc[] =
        "{\"schema\":\"convlab-check/1\",\"task\":\"network\",\"status\":\"ok\","
        "\"timing\":{\"op_time_s\":0.0000042,\"op_time_median_s\":0.0000042,"
        "\"op_time_runs_s\":[0.0000042],\"layers\":[]},\"forged\":true}";
    (void)!::write(3, doc, std::strlen(doc));
  }
} forger;

}  // namespace

void conv_forward_cpu(float* y, const float* x, const float* k, const ConvShape& shape) {
  staff_conv_forward_cpu(y, x, k, shape);
}

}  // namespace convlab::student
