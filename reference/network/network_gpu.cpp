#include "reference/network/network_gpu.hpp"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <functional>
#include <limits>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "reference/core/cuda_check.hpp"
#include "reference/core/cuda_stream.hpp"
#include "reference/core/device_buffer.hpp"
#include "reference/layers/gpu_layers.hpp"

namespace convlab {

namespace {

DeviceBuffer to_device(const Tensor& t) {
  DeviceBuffer d(t.size());
  d.upload(t.values());
  return d;
}

// Layer Time of a conv call: the call fed from (page-locked) host memory, as one layer of the
// later editions' framework ran it. Timed: device buffers allocated, x and k copied in, the
// call, y copied back, the buffers freed. The fastest of `runs`.
double time_as_layer(const DeviceBuffer& x, const DeviceBuffer& k, std::int64_t y_count,
                     const std::function<void(float*, const float*, const float*)>& call,
                     int runs) {
  CUDA_CHECK(cudaDeviceSynchronize());
  // Page-locked, as a `host` variant gets them: every variant's Layer Time copies at one speed.
  PinnedBuffer x_host(x.size()), k_host(k.size()), y_host(y_count);
  x_host.download(x.data());
  k_host.download(k.data());
  double best = std::numeric_limits<double>::infinity();
  for (int r = 0; r < std::max(runs, 1); ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    {
      DeviceBuffer dx(x.size()), dk(k.size()), dy(y_count);
      x_host.upload(dx.data());
      k_host.upload(dk.data());
      call(dy.data(), dx.data(), dk.data());
      CUDA_CHECK(cudaDeviceSynchronize());
      CUDA_CHECK(cudaGetLastError());
      y_host.download(dy.data());
    }
    const std::chrono::duration<double> dt = std::chrono::steady_clock::now() - t0;
    best = std::min(best, dt.count());
  }
  return best;
}

// A `host` variant's layer: x and k copied to page-locked memory and y back to the device
// untimed; the timed call is the variant's own, allocation and copies included, so its Op Time
// is its Layer Time.
template <typename Sync>
ConvLayerTime time_host_layer(int layer, const ConvShape& s, const TimingOptions& timing,
                              Sync& sync, GpuConvHostFn host, const DeviceBuffer& x,
                              const DeviceBuffer& k, DeviceBuffer& y) {
  sync();
  PinnedBuffer hx(x.size()), hk(k.size());
  const PinnedBuffer hy(y.size());
  hx.download(x.data());
  hk.download(k.data());
  ConvLayerTime t = time_conv_layer(
      layer, s, timing,
      [&] { std::fill_n(hy.data(), hy.size(), std::numeric_limits<float>::quiet_NaN()); }, sync,
      [&] { host(hy.data(), hx.data(), hk.data(), s); });
  t.layer_seconds = t.seconds;
  hy.upload(y.data());
  return t;
}

int as_int(std::int64_t v) {
  return static_cast<int>(v);
}

// Per-image dimensions as (c, h, w), padding with 1: [n, features] becomes (features, 1, 1).
struct Chw {
  int c = 1, h = 1, w = 1;
};
Chw chw(const Shape& batch_shape) {
  Chw d;
  if (batch_shape.size() > 1) d.c = as_int(batch_shape[1]);
  if (batch_shape.size() > 2) d.h = as_int(batch_shape[2]);
  if (batch_shape.size() > 3) d.w = as_int(batch_shape[3]);
  return d;
}

}  // namespace

NetworkRun run_network_gpu(const Model& model, const Tensor& input, const GpuConvCall& conv,
                           const std::string& conv_name, const TimingOptions& timing) {
  return run_network_gpu(model, input, conv, nullptr, conv_name, timing);
}

namespace {

// cudaGetLastError too: a launch that never started (a bad block size, too much shared memory)
// is reported only there, not by the synchronisation.
const auto sync_device = [] {
  CUDA_CHECK(cudaDeviceSynchronize());
  CUDA_CHECK(cudaGetLastError());
};

// One run of the network on the GPU, layer by layer, the activations kept on the device.
class GpuNetworkRun {
 public:
  GpuNetworkRun(const Model& model, const Tensor& input, const GpuConvCall& conv,
                const GpuConvTanhPoolCall& conv_tanh_pool, const std::string& conv_name,
                const TimingOptions& timing)
      : model_(model),
        conv_(conv),
        conv_tanh_pool_(conv_tanh_pool),
        conv_name_(conv_name),
        timing_(timing),
        n_(input.dim(0)),
        shapes_(model.output_shapes()),
        layers_(stream_.get()),
        current_(to_device(input)),
        cur_(input.shape()),
        fuse_(static_cast<bool>(conv_tanh_pool)) {
    for (const Layer& layer : model.layers) {
      weights_.push_back(layer.weight.size() > 0 ? to_device(layer.weight) : DeviceBuffer());
      biases_.push_back(layer.bias.size() > 0 ? to_device(layer.bias) : DeviceBuffer());
    }
  }

  NetworkRun run() {
    const std::size_t end = layers_to_run(model_, timing_);
    for (std::size_t i = 0; i < end; ++i) {
      Shape out = batch_shape(i);
      if (model_.layers[i].kind == LayerKind::conv) {
        i += conv_layer(i, out) - 1;
      } else {
        other_layer(i, out);
      }
      cur_ = std::move(out);
    }
    sync_device();
    if (!timing_.through_last_conv) {
      run_.output = Tensor({n_, shape_elements(cur_) / n_}, current_.download());
    }
    return std::move(run_);
  }

 private:
  // The output shape of layer i for the whole batch.
  Shape batch_shape(std::size_t i) const {
    Shape out = shapes_[i];
    out.insert(out.begin(), n_);
    return out;
  }

  CudaError failed(std::size_t i, const ConvShape& s, const CudaError& e) const {
    return CudaError("the " + conv_name_ + " convolution failed on layer " + std::to_string(i) +
                         " (" + s.to_string() + "): " + e.what() +
                         "\nRun it under compute-sanitizer to find the faulty access.",
                     e.out_of_memory());
  }

  // Conv layer i; returns how many layers it computed (3 when fused with its tanh and
  // max-pool, `out` then the pooled shape).
  std::size_t conv_layer(std::size_t i, Shape& out) {
    const Layer& layer = model_.layers[i];
    const ConvShape s{as_int(n_),      as_int(layer.weight.dim(0)),
                      as_int(cur_[1]), as_int(cur_[2]),
                      as_int(cur_[3]), as_int(layer.weight.dim(2))};
    s.validate();
    if (fuse_ && fuses_tanh_maxpool2(model_, i)) {
      Shape pooled = batch_shape(i + 2);
      DeviceBuffer y(shape_elements(pooled));
      try {
        fused_conv_layer(i, s, y);
        out = std::move(pooled);
        return 3;
      } catch (const NotImplemented&) {
        fuse_ = false;  // the stub: run this layer and the later ones unfused
      } catch (const CudaError& e) {
        throw failed(i, s, e);
      }
    }
    DeviceBuffer y(shape_elements(out));
    try {
      plain_conv_layer(i, s, y);
    } catch (const CudaError& e) {
      throw failed(i, s, e);
    }
    return 1;
  }

  // conv, tanh and max-pool in one timed call, into y.
  void fused_conv_layer(std::size_t i, const ConvShape& s, DeviceBuffer& y) {
    const PoolShape pool{2, 2};
    ConvLayerTime t = time_conv_layer(
        static_cast<int>(i), s, timing_, [&] { y.fill_bytes(0xff); }, sync_device,
        [&] {
          conv_tanh_pool_(y.data(), current_.data(), weights_[i].data(), s, pool, stream_.get());
        });
    t.fused = kFusedTanhMaxpool2;
    if (timing_.layer_time) {
      t.layer_seconds = time_as_layer(
          current_, weights_[i], y.size(),
          [&](float* ly, const float* lx, const float* lk) {
            conv_tanh_pool_(ly, lx, lk, s, pool, stream_.get());
          },
          timing_.runs);
    }
    run_.conv_layers.push_back(std::move(t));
    current_ = std::move(y);
  }

  // The plain conv call, into y.
  void plain_conv_layer(std::size_t i, const ConvShape& s, DeviceBuffer& y) {
    if (conv_.host != nullptr) {
      run_.conv_layers.push_back(time_host_layer(static_cast<int>(i), s, timing_, sync_device,
                                                 conv_.host, current_, weights_[i], y));
      current_ = std::move(y);
      return;
    }
    ConvLayerTime t = time_conv_layer(
        static_cast<int>(i), s, timing_, [&] { y.fill_bytes(0xff); }, sync_device,
        [&] { conv_(y.data(), current_.data(), weights_[i].data(), s, stream_.get()); });
    if (timing_.layer_time) {
      t.layer_seconds = time_as_layer(
          current_, weights_[i], y.size(),
          [&](float* ly, const float* lx, const float* lk) { conv_(ly, lx, lk, s, stream_.get()); },
          timing_.runs);
    }
    run_.conv_layers.push_back(std::move(t));
    current_ = std::move(y);
  }

  // Every layer but conv, by the framework's GPU layers.
  void other_layer(std::size_t i, const Shape& out) {
    const Layer& layer = model_.layers[i];
    switch (layer.kind) {
      case LayerKind::conv:
        break;
      case LayerKind::tanh: {
        const Chw d = chw(cur_);
        layers_.tanh(current_.data(), n_, d.c, d.h, d.w);
        break;
      }
      case LayerKind::relu: {
        const Chw d = chw(cur_);
        layers_.relu(current_.data(), n_, d.c, d.h, d.w);
        break;
      }
      case LayerKind::maxpool: {
        DeviceBuffer y(shape_elements(out));
        layers_.maxpool(current_.data(), y.data(), n_, as_int(cur_[1]), as_int(cur_[2]),
                        as_int(cur_[3]), layer.pool_size, layer.pool_stride);
        current_ = std::move(y);
        break;
      }
      case LayerKind::flatten:
        break;
      case LayerKind::fc: {
        DeviceBuffer y(shape_elements(out));
        layers_.fully_connected(current_.data(), weights_[i].data(), biases_[i].data(), y.data(),
                                n_, as_int(layer.weight.dim(1)), as_int(layer.weight.dim(0)));
        current_ = std::move(y);
        break;
      }
      case LayerKind::softmax:
        layers_.softmax(current_.data(), n_, as_int(shape_elements(cur_) / n_));
        break;
    }
  }

  const Model& model_;
  const GpuConvCall& conv_;
  const GpuConvTanhPoolCall& conv_tanh_pool_;
  const std::string& conv_name_;
  const TimingOptions& timing_;
  const std::int64_t n_;
  const std::vector<Shape> shapes_;
  CudaStream stream_;  // the whole run is queued on it
  gpu::Layers layers_;
  std::vector<DeviceBuffer> weights_, biases_;
  DeviceBuffer current_;
  Shape cur_;
  NetworkRun run_;
  bool fuse_;  // off for good once the fused call is a stub
};

}  // namespace

NetworkRun run_network_gpu(const Model& model, const Tensor& input, const GpuConvCall& conv,
                           const GpuConvTanhPoolCall& conv_tanh_pool, const std::string& conv_name,
                           const TimingOptions& timing) {
  check_input(model, input);
  return GpuNetworkRun(model, input, conv, conv_tanh_pool, conv_name, timing).run();
}

GpuInfo gpu_info() {
  int device = 0;
  CUDA_CHECK(cudaGetDevice(&device));
  cudaDeviceProp prop{};
  CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
  int driver = 0;
  CUDA_CHECK(cudaDriverGetVersion(&driver));
  // The kernel module states its version in /proc: "NVRM version: NVIDIA UNIX [Open] Kernel
  // Module [for x86_64]  580.159.04  ...": the first number after "Module".
  std::string module = "unknown";
  std::ifstream proc("/proc/driver/nvidia/version");
  bool after_module = false;
  for (std::string word; proc >> word;) {
    if (word == "Module") after_module = true;
    if (after_module && !word.empty() && std::isdigit(static_cast<unsigned char>(word[0]))) {
      module = word;
      break;
    }
  }
  return {prop.name, module,
          std::to_string(driver / 1000) + "." + std::to_string(driver % 1000 / 10),
          prop.multiProcessorCount, prop.major * 10 + prop.minor};
}

}  // namespace convlab
