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

NetworkRun run_network_gpu(const Model& model, const Tensor& input, const GpuConvCall& conv,
                           const GpuConvTanhPoolCall& conv_tanh_pool, const std::string& conv_name,
                           const TimingOptions& timing) {
  check_input(model, input);
  const std::int64_t n = input.dim(0);
  const std::vector<Shape> shapes = model.output_shapes();

  CudaStream stream;  // the whole run is queued on it
  gpu::Layers layers(stream.get());
  std::vector<DeviceBuffer> weights, biases;
  for (const Layer& layer : model.layers) {
    weights.push_back(layer.weight.size() > 0 ? to_device(layer.weight) : DeviceBuffer());
    biases.push_back(layer.bias.size() > 0 ? to_device(layer.bias) : DeviceBuffer());
  }
  DeviceBuffer current = to_device(input);
  Shape cur = input.shape();
  NetworkRun run;
  // cudaGetLastError too: a launch that never started (a bad block size, too much shared
  // memory) is reported only there, not by the synchronisation.
  const auto sync = [] {
    CUDA_CHECK(cudaDeviceSynchronize());
    CUDA_CHECK(cudaGetLastError());
  };
  bool fuse = static_cast<bool>(conv_tanh_pool);  // off for good once the fused call is a stub

  for (std::size_t i = 0; i < model.layers.size(); ++i) {
    const Layer& layer = model.layers[i];
    Shape out = shapes[i];
    out.insert(out.begin(), n);
    switch (layer.kind) {
      case LayerKind::conv: {
        const ConvShape s{as_int(n),      as_int(layer.weight.dim(0)),
                          as_int(cur[1]), as_int(cur[2]),
                          as_int(cur[3]), as_int(layer.weight.dim(2))};
        s.validate();
        const auto failed = [&](const CudaError& e) {
          return CudaError("the " + conv_name + " convolution failed on layer " +
                               std::to_string(i) + " (" + s.to_string() + "): " + e.what() +
                               "\nRun it under compute-sanitizer to find the faulty access.",
                           e.out_of_memory());
        };
        if (fuse && fuses_tanh_maxpool2(model, i)) {
          // conv, tanh and max-pool in one timed call; the next two layers are skipped.
          const PoolShape pool{2, 2};
          Shape pooled = shapes[i + 2];
          pooled.insert(pooled.begin(), n);
          DeviceBuffer y(shape_elements(pooled));
          try {
            ConvLayerTime t = time_conv_layer(
                static_cast<int>(i), s, timing, [&] { y.fill_bytes(0xff); }, sync,
                [&] {
                  conv_tanh_pool(y.data(), current.data(), weights[i].data(), s, pool,
                                 stream.get());
                });
            t.fused = kFusedTanhMaxpool2;
            if (timing.layer_time) {
              t.layer_seconds = time_as_layer(
                  current, weights[i], y.size(),
                  [&](float* ly, const float* lx, const float* lk) {
                    conv_tanh_pool(ly, lx, lk, s, pool, stream.get());
                  },
                  timing.runs);
            }
            run.conv_layers.push_back(std::move(t));
            current = std::move(y);
            out = std::move(pooled);
            i += 2;
            break;
          } catch (const NotImplemented&) {
            fuse = false;  // the stub: run this layer and the later ones unfused
          } catch (const CudaError& e) {
            throw failed(e);
          }
        }
        DeviceBuffer y(shape_elements(out));
        if (conv.host != nullptr) {
          try {
            run.conv_layers.push_back(time_host_layer(static_cast<int>(i), s, timing, sync,
                                                      conv.host, current, weights[i], y));
          } catch (const CudaError& e) {
            throw failed(e);
          }
          current = std::move(y);
          break;
        }
        try {
          ConvLayerTime t = time_conv_layer(
              static_cast<int>(i), s, timing, [&] { y.fill_bytes(0xff); }, sync,
              [&] { conv(y.data(), current.data(), weights[i].data(), s, stream.get()); });
          if (timing.layer_time) {
            t.layer_seconds = time_as_layer(
                current, weights[i], y.size(),
                [&](float* ly, const float* lx, const float* lk) {
                  conv(ly, lx, lk, s, stream.get());
                },
                timing.runs);
          }
          run.conv_layers.push_back(std::move(t));
        } catch (const CudaError& e) {
          throw failed(e);
        }
        current = std::move(y);
        break;
      }
      case LayerKind::tanh: {
        const Chw d = chw(cur);
        layers.tanh(current.data(), n, d.c, d.h, d.w);
        break;
      }
      case LayerKind::relu: {
        const Chw d = chw(cur);
        layers.relu(current.data(), n, d.c, d.h, d.w);
        break;
      }
      case LayerKind::maxpool: {
        DeviceBuffer y(shape_elements(out));
        layers.maxpool(current.data(), y.data(), n, as_int(cur[1]), as_int(cur[2]), as_int(cur[3]),
                       layer.pool_size, layer.pool_stride);
        current = std::move(y);
        break;
      }
      case LayerKind::flatten:
        break;
      case LayerKind::fc: {
        DeviceBuffer y(shape_elements(out));
        layers.fully_connected(current.data(), weights[i].data(), biases[i].data(), y.data(), n,
                               as_int(layer.weight.dim(1)), as_int(layer.weight.dim(0)));
        current = std::move(y);
        break;
      }
      case LayerKind::softmax:
        layers.softmax(current.data(), n, as_int(shape_elements(cur) / n));
        break;
    }
    cur = std::move(out);
  }
  sync();
  run.output = Tensor({n, shape_elements(cur) / n}, current.download());
  return run;
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
