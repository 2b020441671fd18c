// convlab-team: the only program that holds a team's code, run by the grader in the sandbox.
//
// It is the team's convolution behind a socket and nothing else: no data set, no model file,
// no network, no clock, no result document, no library convolution, no cuDNN, no staff code,
// no symbol table (the link strips it). The trusted referee (convlab-check, grader/worker/
// referee.cpp) owns every input, output and measurement; this loop only maps the buffers the
// referee shares (a memfd on the host, CUDA IPC handles on the device), calls the team's
// function when asked and answers "done" (or why not). Whatever this process does to itself
// (patched clocks, forged channels, calls into anything linked here) changes no verdict.
//
//   convlab-team       (socket in $CONVLAB_PASS_FD; the referee says which variant)
//
// Exit status: 0 after the referee's quit, 2 when the socket is missing or broken.
#include <sys/mman.h>
#include <unistd.h>

#include <charconv>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <iostream>
#include <map>
#include <new>
#include <string>

#include "grader/worker/team_protocol.hpp"
#include "reference/conv/conv_shape.hpp"
#include "reference/conv/student_api.hpp"
#include "reference/core/error.hpp"

#ifdef CONVLAB_HAVE_CUDA
#include <cuda_runtime_api.h>

#include "reference/conv/gpu_launcher.hpp"
#include "reference/core/cuda_check.hpp"
#endif

namespace {

namespace wire = convlab::grader::wire;
using convlab::ConvShape;
using convlab::Error;
using convlab::PoolShape;

// The team's entry points, straight from the declarations (namespace student only).
struct TeamVariant {
  const char* name;
  convlab::CpuConvFn cpu;  // a CPU variant's, or nullptr
#ifdef CONVLAB_HAVE_CUDA
  convlab::GpuLauncher conv;          // a GPU variant's, or empty
  convlab::GpuConvTanhPoolFn fused;   // its fused launcher, or nullptr
#endif
};
#ifdef CONVLAB_HAVE_CUDA
#define CONVLAB_TEAM_ROW_cpu(id, interface, fused) \
  {#id, &convlab::student::conv_forward_##id, {}, nullptr},
#define CONVLAB_TEAM_ROW_gpu(id, interface, fused) \
  {#id, nullptr, CONVLAB_TEAM_LAUNCHER_##interface(id), CONVLAB_TEAM_FUSED_##fused(id)},
#define CONVLAB_TEAM_LAUNCHER_plain(id) convlab::GpuLauncher(&convlab::student::conv_##id)
#define CONVLAB_TEAM_LAUNCHER_workspace(id)                    \
  convlab::GpuLauncher(&convlab::student::conv_##id,           \
                       &convlab::student::conv_##id##_workspace)
#define CONVLAB_TEAM_LAUNCHER_host(id) \
  convlab::GpuLauncher::on_host(&convlab::student::conv_##id)
#else
#define CONVLAB_TEAM_ROW_cpu(id, interface, fused) {#id, &convlab::student::conv_forward_##id},
#define CONVLAB_TEAM_ROW_gpu(id, interface, fused) {#id, nullptr},
#endif
#define CONVLAB_TEAM_FUSED_fused(id) &convlab::student::conv_tanh_maxpool_##id
#define CONVLAB_TEAM_FUSED_unfused(id) nullptr
#define CONVLAB_VARIANT(id, milestone, device, student_file, staff_file, handout, idea, \
                        precision, libraries, interface, sweep, fused)                   \
  CONVLAB_TEAM_ROW_##device(id, interface, fused)
constexpr TeamVariant kVariants[] = {
#include "reference/conv/variants.def"
};
#undef CONVLAB_VARIANT

#ifdef CONVLAB_HAVE_CUDA
// A CUDA failure of the team's code (distinct from the harness's own bad requests).
struct TeamCudaFailure : Error {
  using Error::Error;
};

void check(cudaError_t status, const char* what) {
  if (status != cudaSuccess) {
    throw TeamCudaFailure(std::string(what) + ": " + cudaGetErrorName(status) + " (" +
                          cudaGetErrorString(status) + ")");
  }
}
#endif

// A request the harness cannot serve: the referee's mistake, never the team's.
struct BadRequest : Error {
  using Error::Error;
};

// How long the server polls for the next request before it sleeps: longer than the referee's
// work between two calls of a pass (the other layers, a verification).
constexpr std::chrono::seconds kSpinForRequest{2};

class Server {
 public:
  explicit Server(int socket) : socket_(socket) {}

  // Serves requests until quit; false when the socket broke first.
  bool serve() {
    for (;;) {
      wire::Request rq;
      int fd = -1;
      // A GPU variant's next request is timed: it must not find this thread asleep.
      wire::wait_readable(socket_, gpu_ ? kSpinForRequest : std::chrono::nanoseconds{0});
      if (!wire::receive_message(socket_, rq, &fd)) return false;
      if (rq.op == wire::Op::quit) return true;
      wire::Reply reply;
      reply.nonce = rq.nonce;
      try {
        handle(rq, fd, reply);
      } catch (const convlab::NotImplemented& e) {
        fail(reply, wire::Status::not_implemented, e.what());
#ifdef CONVLAB_HAVE_CUDA
      } catch (const TeamCudaFailure& e) {
        fail(reply, wire::Status::cuda_error, e.what());
      } catch (const convlab::CudaError& e) {
        fail(reply, wire::Status::cuda_error, e.what());
#endif
      } catch (const BadRequest& e) {
        fail(reply, wire::Status::bad_request, e.what());
      } catch (const std::bad_alloc&) {
        fail(reply, wire::Status::error, "out of memory");
      } catch (const std::exception& e) {
        fail(reply, wire::Status::error, e.what());
      }
      if (fd >= 0) ::close(fd);
      if (!wire::send_message(socket_, reply)) return false;
    }
  }

 private:
  static void fail(wire::Reply& r, wire::Status s, const std::string& text) {
    r.status = s;
    wire::set_text(r.message, text);
  }

  void handle(const wire::Request& rq, int fd, wire::Reply& reply) {
    switch (rq.op) {
      case wire::Op::hello:
        hello(wire::get_text(rq.variant), reply);
        return;
      case wire::Op::map_host:
        map_host(fd, rq.bytes);
        return;
      case wire::Op::map_device:
        map_device(rq);
        return;
      case wire::Op::conv:
      case wire::Op::conv_tanh_pool:
        call(rq);
        return;
      case wire::Op::nop:
        return;
      case wire::Op::quit:
        return;
    }
    throw BadRequest("unknown request " + std::to_string(static_cast<unsigned>(rq.op)));
  }

  void hello(const std::string& variant, [[maybe_unused]] wire::Reply& reply) {
    for (const TeamVariant& v : kVariants) {
      if (variant != v.name) continue;
      if (v.cpu != nullptr) {
        gpu_ = false;
        cpu_ = v.cpu;
        return;
      }
#ifdef CONVLAB_HAVE_CUDA
      std::string why;
      if (!convlab::cuda_device_available(&why)) {
        reply.status = wire::Status::no_gpu;
        wire::set_text(reply.message, why);
        return;
      }
      gpu_ = true;
      conv_ = v.conv;
      fused_ = v.fused;
      reply.fused = fused_ != nullptr;
      check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate");
      return;
#endif
    }
    throw BadRequest("unknown variant '" + variant + "'");
  }

  void map_host(int fd, std::uint64_t bytes) {
    if (fd < 0 || bytes == 0) throw BadRequest("map_host without a descriptor or a size");
    if (arena_ != nullptr) ::munmap(arena_, arena_bytes_);
    arena_ = nullptr;
    void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) throw BadRequest("cannot map the shared buffers: " + std::string(strerror(errno)));
    arena_ = p;
    arena_bytes_ = bytes;
  }

  void map_device(const wire::Request& rq) {
#ifdef CONVLAB_HAVE_CUDA
    if (!gpu_ || rq.buffer == 0) throw BadRequest("map_device before a GPU hello, or buffer 0");
    if (auto it = device_.find(rq.buffer); it != device_.end()) {
      cudaIpcCloseMemHandle(it->second.first);
      device_.erase(it);
    }
    cudaIpcMemHandle_t handle;
    static_assert(sizeof handle == sizeof rq.ipc_handle);
    std::memcpy(&handle, rq.ipc_handle, sizeof handle);
    void* p = nullptr;
    const cudaError_t status =
        cudaIpcOpenMemHandle(&p, handle, cudaIpcMemLazyEnablePeerAccess);
    if (status != cudaSuccess) {
      throw BadRequest(std::string("cannot open the referee's device buffer: ") +
                       cudaGetErrorString(status));
    }
    device_[rq.buffer] = {p, rq.bytes};
#else
    (void)rq;
    throw BadRequest("this harness was built without CUDA");
#endif
  }

  // `ref` moved on by `i` steps of `bytes`.
  static wire::Ref step(wire::Ref ref, std::uint64_t bytes, std::uint32_t i) {
    ref.offset += bytes * i;
    return ref;
  }

  // The address of `count` floats at `ref`, checked against the buffer it lies in.
  float* resolve(const wire::Ref& ref, std::int64_t count, bool device) {
    const auto bytes = static_cast<std::uint64_t>(count) * sizeof(float);
    char* base = nullptr;
    std::uint64_t size = 0;
    if (ref.buffer == 0) {
      base = static_cast<char*>(arena_);
      size = arena_bytes_;
      if (device) throw BadRequest("a device call on host buffers without staging");
#ifdef CONVLAB_HAVE_CUDA
    } else if (auto it = device_.find(ref.buffer); it != device_.end()) {
      base = static_cast<char*>(it->second.first);
      size = it->second.second;
#endif
    }
    if (base == nullptr || ref.offset % alignof(float) != 0 || ref.offset > size ||
        bytes > size - ref.offset) {
      throw BadRequest("a tensor outside the shared buffers");
    }
    return reinterpret_cast<float*>(base + ref.offset);
  }

  void call(const wire::Request& rq) {
    const ConvShape s{rq.shape[0], rq.shape[1], rq.shape[2], rq.shape[3], rq.shape[4], rq.shape[5]};
    try {
      s.validate();
    } catch (const Error& e) {
      throw BadRequest(e.what());
    }
    const bool fused = rq.op == wire::Op::conv_tanh_pool;
    const PoolShape pool{rq.pool, rq.pool};
    if (fused) {
      try {
        pool.validate(s);
      } catch (const Error& e) {
        throw BadRequest(e.what());
      }
    }
    const std::int64_t y_count = fused ? pool.pooled_elements(s) : s.y_elements();
    if (!gpu_) {
      if (fused) throw BadRequest("a fused call on the CPU");
      if (cpu_ == nullptr) throw BadRequest("no variant was chosen (hello first)");
      cpu_(resolve(rq.y, y_count, false), resolve(rq.x, s.x_elements(), false),
           resolve(rq.k, s.k_elements(), false), s);
      return;
    }
#ifdef CONVLAB_HAVE_CUDA
    if (fused && fused_ == nullptr) throw BadRequest("this variant has no fused launcher");
    const bool staged = rq.staged != 0;
    float* y = resolve(rq.y, y_count, !staged);
    const float* x = resolve(rq.x, s.x_elements(), !staged);
    const float* k = resolve(rq.k, s.k_elements(), !staged);
    Staging st;
    if (staged) {
      // Exactly sized buffers of this process: compute-sanitizer then sees each tensor's
      // bounds, as in `convlab run`.
      st.y = st.alloc(y_count);
      st.x = st.alloc(s.x_elements());
      st.k = st.alloc(s.k_elements());
      check(cudaMemcpy(st.x, x, s.x_elements() * sizeof(float), cudaMemcpyHostToDevice), "copy x");
      check(cudaMemcpy(st.k, k, s.k_elements() * sizeof(float), cudaMemcpyHostToDevice), "copy k");
      check(cudaMemcpy(st.y, y, y_count * sizeof(float), cudaMemcpyHostToDevice), "copy y");
    }
    if (rq.repeat < 1 || (staged && rq.repeat != 1)) throw BadRequest("a bad repeat count");
    for (std::uint32_t i = 0; i < rq.repeat; ++i) {
      float* dy = staged ? st.y : y;
      const float* dx = staged ? st.x : x;
      const float* dk = staged ? st.k : k;
      if (i > 0) {
        // Call i's tensors, checked against their buffers like the first's.
        dy = resolve(step(rq.y, rq.y_step, i), y_count, true);
        dx = resolve(step(rq.x, rq.x_step, i), s.x_elements(), true);
      }
      if (fused) {
        fused_(dy, dx, dk, s, pool, stream_);
      } else {
        // The workspace grows on the first call of a larger shape: the referee's count pass,
        // before any timed call.
        conv_(dy, dx, dk, s, workspace_.reserve(conv_.workspace_bytes(s)), stream_);
      }
    }
    check(cudaStreamSynchronize(stream_), "the convolution");
    check(cudaGetLastError(), "the convolution");
    if (staged) check(cudaMemcpy(y, st.y, y_count * sizeof(float), cudaMemcpyDeviceToHost), "copy y back");
#endif
  }

#ifdef CONVLAB_HAVE_CUDA
  struct Staging {
    float *y = nullptr, *x = nullptr, *k = nullptr;
    float* alloc(std::int64_t count) {
      void* p = nullptr;
      check(cudaMalloc(&p, static_cast<std::size_t>(count) * sizeof(float)), "cudaMalloc");
      return static_cast<float*>(p);
    }
    ~Staging() {
      for (float* p : {y, x, k}) {
        if (p != nullptr) cudaFree(p);
      }
    }
  };
#endif

  int socket_;
  bool gpu_ = false;
  convlab::CpuConvFn cpu_ = nullptr;
  void* arena_ = nullptr;
  std::uint64_t arena_bytes_ = 0;
#ifdef CONVLAB_HAVE_CUDA
  convlab::GpuLauncher conv_;
  convlab::Workspace workspace_;
  convlab::GpuConvTanhPoolFn fused_ = nullptr;
  cudaStream_t stream_ = nullptr;
  std::map<std::uint32_t, std::pair<void*, std::uint64_t>> device_;
#endif
};

}  // namespace

int main() {
  const char* text = std::getenv("CONVLAB_PASS_FD");
  int fd = -1;
  if (text == nullptr ||
      std::from_chars(text, text + std::strlen(text), fd).ec != std::errc() || fd < 0) {
    std::cerr << "convlab-team: the grader runs this program and hands it a socket in "
                 "$CONVLAB_PASS_FD; it does nothing on its own"
              << std::endl;
    return 2;
  }
  Server server(fd);
  const bool ok = server.serve();
  std::cout << std::flush;
  return ok ? 0 : 2;
}
