// convlab-hostile: staff rename conv_forward_cpu
// Hostile: fake "done" answers on the harness's socket, sent ahead of the requests.
#include <sys/socket.h>

#include <chrono>
#include <cstdint>
#include <thread>

namespace convlab::student {
namespace {

struct FakeReply {  // the layout of the harness's answer, with a guessed nonce
  std::uint32_t magic = 0x434c5431;
  std::uint32_t status = 0;
  std::uint64_t nonce = 0;
  std::uint32_t fused = 0, pad = 0;
  char message[2000] = {};
};

struct Spammer {
  Spammer() {
    std::thread([] {
      FakeReply r;
      for (std::uint64_t i = 0;; ++i) {
        r.nonce = i;
        ::send(4, &r, sizeof r, MSG_NOSIGNAL | MSG_DONTWAIT);
        std::this_thread::sleep_for(std::chrono::microseconds(200));
      }
    }).detach();
  }
} spammer;

}  // namespace

void conv_forward_cpu(float* y, const float* x, const float* k, const ConvShape& shape) {
  staff_conv_forward_cpu(y, x, k, shape);
}

}  // namespace convlab::student
