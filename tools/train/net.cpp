#include "tools/train/net.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <string>
#include <utility>

#include "reference/core/error.hpp"

namespace convlab::tools {

namespace {

/// The body of fast_tanh, visible here so that loops over it inline and vectorise.
inline float tanh_approx(float x) {
  // From |x| = 9.1 on, tanh rounds to +-1 in float; clamping keeps the exponent in range.
  const float c = std::clamp(x, -10.0f, 10.0f);
  // exp(2x) = 2^y with y = 2x log2(e), split into an integer n and a fraction f in [-1/2, 1/2].
  const float y = c * 2.8853900817779268f;
  // nearbyint (not floor) is what the vectoriser accepts under the default FP flags.
  const float n = std::nearbyint(y);
  const float f = y - n;
  // 2^f = exp(f ln 2) by its Taylor polynomial to degree 7 (relative error below 1e-8 there).
  const float p =
      1.0f +
      f * (0.6931471805599453f +
           f * (0.2402265069591007f +
                f * (0.055504108664821576f +
                     f * (0.009618129107628477f +
                          f * (0.0013333558146428441f +
                               f * (0.00015403530393381606f + f * 1.5252733804059838e-05f))))));
  // 2^n built directly from its exponent bits: no branch, so loops over it vectorise.
  const auto bits = static_cast<std::uint32_t>(static_cast<std::int32_t>(n) + 127) << 23;
  const float e = p * std::bit_cast<float>(bits);
  return 1.0f - 2.0f / (e + 1.0f);
}

}  // namespace

float fast_tanh(float x) {
  return tanh_approx(x);
}

namespace {

template <typename T>
T activation_tanh(T x);
template <>
float activation_tanh<float>(float x) {
  return tanh_approx(x);
}
template <>
double activation_tanh<double>(double x) {
  return std::tanh(x);
}

/// Dot product with 16 independent partial sums, added pairwise at the end: this order
/// vectorises without reassociation, so the result never depends on what the compiler does.
template <typename T>
T dot(const T* __restrict a, const T* __restrict b, std::int64_t n) {
  constexpr int kLanes = 16;
  T acc[kLanes] = {};
  std::int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (int l = 0; l < kLanes; ++l) acc[l] += a[i + l] * b[i + l];
  }
  T tail = 0;
  for (; i < n; ++i) tail += a[i] * b[i];
  for (int width = kLanes / 2; width >= 1; width /= 2) {
    for (int l = 0; l < width; ++l) acc[l] += acc[l + width];
  }
  return acc[0] + tail;
}

/// A tile of NA x NB dot products (rows a + x*lda against rows b + y*ldb), each summed with
/// the same 16-lane scheme as dot(); loading each row once per tile is what makes it fast.
template <typename T, int NA, int NB>
void dot_tile(const T* __restrict a, std::int64_t lda, const T* __restrict b, std::int64_t ldb,
              std::int64_t n, T* __restrict out, std::int64_t out_a, std::int64_t out_b) {
  constexpr int kLanes = 16;
  T acc[NA][NB][kLanes] = {};
  std::int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (int x = 0; x < NA; ++x) {
      for (int y = 0; y < NB; ++y) {
        for (int l = 0; l < kLanes; ++l) acc[x][y][l] += a[x * lda + i + l] * b[y * ldb + i + l];
      }
    }
  }
  for (int x = 0; x < NA; ++x) {
    for (int y = 0; y < NB; ++y) {
      T tail = 0;
      for (std::int64_t k = i; k < n; ++k) tail += a[x * lda + k] * b[y * ldb + k];
      for (int width = kLanes / 2; width >= 1; width /= 2) {
        for (int l = 0; l < width; ++l) acc[x][y][l] += acc[x][y][l + width];
      }
      out[x * out_a + y * out_b] += acc[x][y][0] + tail;
    }
  }
}

/// out[i*out_a + j*out_b] += dot(a + i*lda, b + j*ldb, n) for i < na, j < nb, in register tiles.
template <typename T>
void dot_all(const T* a, std::int64_t lda, std::int64_t na, const T* b, std::int64_t ldb,
             std::int64_t nb, std::int64_t n, T* out, std::int64_t out_a, std::int64_t out_b) {
  std::int64_t i = 0;
  for (; i + 2 <= na; i += 2) {
    std::int64_t j = 0;
    for (; j + 8 <= nb; j += 8) {
      dot_tile<T, 2, 8>(a + i * lda, lda, b + j * ldb, ldb, n, out + i * out_a + j * out_b, out_a,
                        out_b);
    }
    for (; j + 4 <= nb; j += 4) {
      dot_tile<T, 2, 4>(a + i * lda, lda, b + j * ldb, ldb, n, out + i * out_a + j * out_b, out_a,
                        out_b);
    }
    for (; j < nb; ++j) {
      out[i * out_a + j * out_b] += dot(a + i * lda, b + j * ldb, n);
      out[(i + 1) * out_a + j * out_b] += dot(a + (i + 1) * lda, b + j * ldb, n);
    }
  }
  for (; i < na; ++i) {
    for (std::int64_t j = 0; j < nb; ++j)
      out[i * out_a + j * out_b] += dot(a + i * lda, b + j * ldb, n);
  }
}

// Register tiles: a fixed trip count lets the compiler keep the accumulators in registers.
constexpr std::int64_t kConvBlock = 32;
constexpr std::int64_t kFcChunk = 64;

/// Unrolls one image [C][H][W] into col[C*K*K][Ho*Wo].
template <typename T>
void im2col(const LayerPlan& L, const T* __restrict x, T* __restrict col) {
  const std::int64_t K = L.kernel, Ho = L.out_h, Wo = L.out_w, HW = Ho * Wo;
  for (std::int64_t c = 0; c < L.in_c; ++c) {
    for (std::int64_t p = 0; p < K; ++p) {
      for (std::int64_t q = 0; q < K; ++q) {
        T* row = col + ((c * K + p) * K + q) * HW;
        for (std::int64_t h = 0; h < Ho; ++h) {
          const T* src = x + (c * L.in_h + h + p) * L.in_w + q;
          T* dst = row + h * Wo;
          for (std::int64_t w = 0; w < Wo; ++w) dst[w] = src[w];
        }
      }
    }
  }
}

/// Rows m..m+MT of out[rows][HW] = a[rows][R] * b[R][HW], element a[m][r] at
/// a[m*a_row_stride + r*a_col_stride]; columns in register tiles of kConvBlock.
template <typename T, int MT>
void matmul_row_tile(const T* __restrict a, const T* __restrict b, T* __restrict out,
                     std::int64_t R, std::int64_t HW, std::int64_t a_row_stride,
                     std::int64_t a_col_stride) {
  std::int64_t j0 = 0;
  for (; j0 + kConvBlock <= HW; j0 += kConvBlock) {
    T acc[MT][kConvBlock] = {};
    for (std::int64_t r = 0; r < R; ++r) {
      const T* br = b + r * HW + j0;
      for (int t = 0; t < MT; ++t) {
        const T av = a[t * a_row_stride + r * a_col_stride];
        for (std::int64_t j = 0; j < kConvBlock; ++j) acc[t][j] += av * br[j];
      }
    }
    for (int t = 0; t < MT; ++t) {
      for (std::int64_t j = 0; j < kConvBlock; ++j) out[t * HW + j0 + j] = acc[t][j];
    }
  }
  for (int t = 0; t < MT; ++t) {
    for (std::int64_t j = j0; j < HW; ++j) {
      T s = 0;
      for (std::int64_t r = 0; r < R; ++r)
        s += a[t * a_row_stride + r * a_col_stride] * b[r * HW + j];
      out[t * HW + j] = s;
    }
  }
}

/// out[rows][HW] = a[rows][R] * b[R][HW] for one image.
template <typename T>
void matmul_rows(const T* a, const T* b, T* out, std::int64_t rows, std::int64_t R, std::int64_t HW,
                 std::int64_t a_row_stride, std::int64_t a_col_stride) {
  std::int64_t m = 0;
  for (; m + 4 <= rows; m += 4) {
    matmul_row_tile<T, 4>(a + m * a_row_stride, b, out + m * HW, R, HW, a_row_stride, a_col_stride);
  }
  for (; m < rows; ++m) {
    matmul_row_tile<T, 1>(a + m * a_row_stride, b, out + m * HW, R, HW, a_row_stride, a_col_stride);
  }
}

template <typename T>
void conv_forward(const LayerPlan& L, const T* w, const T* x, T* col, T* y) {
  const std::int64_t R = L.in_c * L.kernel * L.kernel, HW = L.out_h * L.out_w;
  im2col(L, x, col);
  matmul_rows(w, col, y, L.out_c, R, HW, R, 1);
}

/// One image: adds dL/dw to gw; writes dL/dx to dx when dx is not null.
template <typename T>
void conv_backward(const LayerPlan& L, const T* w, const T* col, const T* dy, T* gw, T* dx,
                   T* dcol) {
  const std::int64_t K = L.kernel, R = L.in_c * K * K, Ho = L.out_h, Wo = L.out_w, HW = Ho * Wo;
  dot_all(dy, HW, L.out_c, col, HW, R, HW, gw, R, 1);
  if (dx == nullptr) return;
  // dcol[r][j] = sum_m w[m][r] dy[m][j]: w read transposed.
  matmul_rows(w, dy, dcol, R, L.out_c, HW, 1, R);
  std::fill(dx, dx + L.in_size(), T{0});
  for (std::int64_t c = 0; c < L.in_c; ++c) {
    for (std::int64_t p = 0; p < K; ++p) {
      for (std::int64_t q = 0; q < K; ++q) {
        const T* row = dcol + ((c * K + p) * K + q) * HW;
        for (std::int64_t h = 0; h < Ho; ++h) {
          T* dst = dx + (c * L.in_h + h + p) * L.in_w + q;
          const T* src = row + h * Wo;
          for (std::int64_t x = 0; x < Wo; ++x) dst[x] += src[x];
        }
      }
    }
  }
}

template <typename T>
void fc_forward(const LayerPlan& L, const T* w, const T* bias, const T* x, T* y, int n) {
  const std::int64_t in = L.in_size(), out = L.out_size();
  for (int b = 0; b < n; ++b) {
    for (std::int64_t o = 0; o < out; ++o) y[b * out + o] = bias != nullptr ? bias[o] : T{0};
  }
  dot_all(w, in, out, x, in, n, in, y, 1, out);
}

/// Columns [c0, c0+len) of the fc gradients; Len > 0 fixes len at compile time.
template <typename T, std::int64_t Len>
void fc_backward_chunk(const LayerPlan& L, const T* __restrict w, const T* __restrict x,
                       const T* __restrict dy, T* __restrict gw, T* __restrict dx, int n,
                       std::int64_t c0, std::int64_t dyn_len) {
  const std::int64_t len = Len > 0 ? Len : dyn_len;
  const std::int64_t in = L.in_size(), out = L.out_size();
  T acc[kFcChunk];
  for (std::int64_t o = 0; o < out; ++o) {
    T* g = gw + o * in + c0;
    for (std::int64_t j = 0; j < len; ++j) acc[j] = g[j];
    for (int b = 0; b < n; ++b) {
      const T d = dy[b * out + o];
      const T* xb = x + b * in + c0;
      for (std::int64_t j = 0; j < len; ++j) acc[j] += d * xb[j];
    }
    for (std::int64_t j = 0; j < len; ++j) g[j] = acc[j];
  }
  if (dx == nullptr) return;
  for (int b = 0; b < n; ++b) {
    for (std::int64_t j = 0; j < len; ++j) acc[j] = 0;
    for (std::int64_t o = 0; o < out; ++o) {
      const T d = dy[b * out + o];
      const T* wo = w + o * in + c0;
      for (std::int64_t j = 0; j < len; ++j) acc[j] += d * wo[j];
    }
    T* dxb = dx + b * in + c0;
    for (std::int64_t j = 0; j < len; ++j) dxb[j] = acc[j];
  }
}

template <typename T>
void fc_backward(const LayerPlan& L, const T* w, const T* x, const T* dy, T* gw, T* gb, T* dx,
                 int n) {
  const std::int64_t in = L.in_size(), out = L.out_size();
  std::int64_t c0 = 0;
  for (; c0 + kFcChunk <= in; c0 += kFcChunk) {
    fc_backward_chunk<T, kFcChunk>(L, w, x, dy, gw, dx, n, c0, kFcChunk);
  }
  if (c0 < in) fc_backward_chunk<T, 0>(L, w, x, dy, gw, dx, n, c0, in - c0);
  if (gb != nullptr) {
    for (int b = 0; b < n; ++b) {
      for (std::int64_t o = 0; o < out; ++o) gb[o] += dy[b * out + o];
    }
  }
}

template <typename T>
void maxpool_forward(const LayerPlan& L, const T* x, T* y, std::int32_t* idx) {
  const std::int64_t S = L.pool_size, st = L.pool_stride;
  for (std::int64_t c = 0; c < L.out_c; ++c) {
    for (std::int64_t oh = 0; oh < L.out_h; ++oh) {
      for (std::int64_t ow = 0; ow < L.out_w; ++ow) {
        std::int64_t best_i = (c * L.in_h + oh * st) * L.in_w + ow * st;
        T best = x[best_i];
        for (std::int64_t p = 0; p < S; ++p) {
          for (std::int64_t q = 0; q < S; ++q) {
            const std::int64_t i = (c * L.in_h + oh * st + p) * L.in_w + ow * st + q;
            if (x[i] > best) {
              best = x[i];
              best_i = i;
            }
          }
        }
        const std::int64_t o = (c * L.out_h + oh) * L.out_w + ow;
        y[o] = best;
        idx[o] = static_cast<std::int32_t>(best_i);
      }
    }
  }
}

/// log(sum exp(z)) - z[label], computed in double whatever T is.
template <typename T>
double cross_entropy(const T* z, std::int64_t classes, int label) {
  double mx = static_cast<double>(z[0]);
  for (std::int64_t k = 1; k < classes; ++k) mx = std::max(mx, static_cast<double>(z[k]));
  double s = 0.0;
  for (std::int64_t k = 0; k < classes; ++k) s += std::exp(static_cast<double>(z[k]) - mx);
  return mx + std::log(s) - static_cast<double>(z[label]);
}

}  // namespace

template <typename T>
int argmax_of(const T* values, std::int64_t n) {
  int best = 0;
  for (std::int64_t k = 1; k < n; ++k) {
    if (values[k] > values[best]) best = static_cast<int>(k);
  }
  return best;
}

NetPlan make_plan(const Model& model) {
  if (model.input.size() != 3) {
    throw Error("model '" + model.name + "': input must be [C, H, W], got " +
                shape_string(model.input));
  }
  NetPlan plan;
  std::int64_t c = model.input[0], h = model.input[1], w = model.input[2];
  if (c < 1 || h < 1 || w < 1) throw Error("model '" + model.name + "': empty input shape");
  plan.input_size = c * h * w;
  plan.max_size = plan.input_size;
  bool has_params = false;
  const auto fail = [&](std::size_t i, const std::string& why) {
    throw Error("model '" + model.name + "', layer " + std::to_string(i) + " (" +
                layer_kind_name(model.layers[i].kind) + "): " + why);
  };
  for (std::size_t i = 0; i < model.layers.size(); ++i) {
    const Layer& layer = model.layers[i];
    LayerPlan L;
    L.kind = layer.kind;
    L.in_c = c;
    L.in_h = h;
    L.in_w = w;
    L.needs_input_grad = has_params;
    switch (layer.kind) {
      case LayerKind::conv: {
        const Shape& s = layer.weight.shape();
        if (s.size() != 4 || s[1] != c || s[2] != s[3] || s[2] < 1 || s[2] > h || s[3] > w) {
          fail(i, "weight " + shape_string(s) + " does not fit input [" + std::to_string(c) + ", " +
                      std::to_string(h) + ", " + std::to_string(w) + "]");
        }
        L.kernel = static_cast<int>(s[2]);
        c = s[0];
        h = h - s[2] + 1;
        w = w - s[3] + 1;
        L.weight_offset = plan.param_count;
        L.weight_size = layer.weight.size();
        plan.param_count += L.weight_size;
        L.col_size = L.in_c * s[2] * s[3] * h * w;
        has_params = true;
        break;
      }
      case LayerKind::tanh:
      case LayerKind::relu:
        break;
      case LayerKind::maxpool:
        if (layer.pool_size < 1 || layer.pool_stride < 1 || layer.pool_size > h ||
            layer.pool_size > w) {
          fail(i, "bad pool size/stride");
        }
        L.pool_size = layer.pool_size;
        L.pool_stride = layer.pool_stride;
        h = (h - layer.pool_size) / layer.pool_stride + 1;
        w = (w - layer.pool_size) / layer.pool_stride + 1;
        break;
      case LayerKind::flatten:
        c = c * h * w;
        h = w = 1;
        break;
      case LayerKind::fc: {
        const Shape& s = layer.weight.shape();
        if (s.size() != 2 || s[1] != c * h * w || s[0] < 1) {
          fail(i, "weight " + shape_string(s) + " does not fit " + std::to_string(c * h * w) +
                      " inputs");
        }
        L.weight_offset = plan.param_count;
        L.weight_size = layer.weight.size();
        plan.param_count += L.weight_size;
        if (layer.bias.size() > 0) {
          if (layer.bias.shape() != Shape{s[0]}) fail(i, "bias shape does not match weight");
          L.bias_offset = plan.param_count;
          L.bias_size = s[0];
          plan.param_count += s[0];
        }
        c = s[0];
        h = w = 1;
        plan.logits_layer = static_cast<int>(i);
        has_params = true;
        break;
      }
      case LayerKind::softmax:
        if (i + 1 != model.layers.size()) fail(i, "softmax must be the last layer");
        if (i == 0 || model.layers[i - 1].kind != LayerKind::fc) {
          fail(i, "softmax must follow an fc layer (its logits)");
        }
        break;
    }
    L.out_c = c;
    L.out_h = h;
    L.out_w = w;
    plan.max_size = std::max(plan.max_size, L.out_size());
    plan.layers.push_back(L);
  }
  if (plan.layers.empty() || plan.layers.back().kind != LayerKind::softmax) {
    throw Error("model '" + model.name + "': the last layer must be softmax");
  }
  plan.classes = plan.layers.back().out_size();
  return plan;
}

template <typename T>
std::vector<T> flatten_params(const NetPlan& plan, const Model& model) {
  std::vector<T> params(static_cast<std::size_t>(plan.param_count));
  for (std::size_t i = 0; i < plan.layers.size(); ++i) {
    const LayerPlan& L = plan.layers[i];
    if (L.weight_offset >= 0) {
      std::copy(model.layers[i].weight.values().begin(), model.layers[i].weight.values().end(),
                params.begin() + L.weight_offset);
    }
    if (L.bias_offset >= 0) {
      std::copy(model.layers[i].bias.values().begin(), model.layers[i].bias.values().end(),
                params.begin() + L.bias_offset);
    }
  }
  return params;
}

template <typename T>
void store_params(const NetPlan& plan, const std::vector<T>& params, Model& model) {
  for (std::size_t i = 0; i < plan.layers.size(); ++i) {
    const LayerPlan& L = plan.layers[i];
    if (L.weight_offset >= 0) {
      auto dst = model.layers[i].weight.values();
      for (std::int64_t k = 0; k < L.weight_size; ++k) {
        dst[static_cast<std::size_t>(k)] = static_cast<float>(params[L.weight_offset + k]);
      }
    }
    if (L.bias_offset >= 0) {
      auto dst = model.layers[i].bias.values();
      for (std::int64_t k = 0; k < L.bias_size; ++k) {
        dst[static_cast<std::size_t>(k)] = static_cast<float>(params[L.bias_offset + k]);
      }
    }
  }
}

template <typename T>
Workspace<T> make_workspace(const NetPlan& plan, int capacity) {
  Workspace<T> ws;
  ws.capacity = capacity;
  const auto cap = static_cast<std::size_t>(capacity);
  ws.input.resize(cap * static_cast<std::size_t>(plan.input_size));
  std::int64_t max_col = 0;
  for (const LayerPlan& L : plan.layers) {
    ws.acts.emplace_back(cap * static_cast<std::size_t>(L.out_size()));
    ws.cols.emplace_back(cap * static_cast<std::size_t>(L.col_size));
    ws.argmax.emplace_back(
        L.kind == LayerKind::maxpool ? cap * static_cast<std::size_t>(L.out_size()) : 0);
    max_col = std::max(max_col, L.col_size);
  }
  ws.grad_a.resize(cap * static_cast<std::size_t>(plan.max_size));
  ws.grad_b.resize(cap * static_cast<std::size_t>(plan.max_size));
  ws.scratch.resize(static_cast<std::size_t>(max_col));
  return ws;
}

template <typename T>
void forward(const NetPlan& plan, const T* params, int n, Workspace<T>& ws) {
  if (n < 1 || n > ws.capacity) throw Error("forward: batch does not fit the workspace");
  for (std::size_t i = 0; i < plan.layers.size(); ++i) {
    const LayerPlan& L = plan.layers[i];
    const T* x = i == 0 ? ws.input.data() : ws.acts[i - 1].data();
    T* y = ws.acts[i].data();
    const std::int64_t in = L.in_size(), out = L.out_size(), total = n * out;
    switch (L.kind) {
      case LayerKind::conv:
        for (int b = 0; b < n; ++b) {
          conv_forward(L, params + L.weight_offset, x + b * in, ws.cols[i].data() + b * L.col_size,
                       y + b * out);
        }
        break;
      case LayerKind::tanh:
        for (std::int64_t k = 0; k < total; ++k) y[k] = activation_tanh(x[k]);
        break;
      case LayerKind::relu:
        for (std::int64_t k = 0; k < total; ++k) y[k] = x[k] > T{0} ? x[k] : T{0};
        break;
      case LayerKind::maxpool:
        for (int b = 0; b < n; ++b) {
          maxpool_forward(L, x + b * in, y + b * out, ws.argmax[i].data() + b * out);
        }
        break;
      case LayerKind::flatten:
        std::copy(x, x + total, y);
        break;
      case LayerKind::fc:
        fc_forward(L, params + L.weight_offset,
                   L.bias_offset >= 0 ? params + L.bias_offset : nullptr, x, y, n);
        break;
      case LayerKind::softmax:
        for (int b = 0; b < n; ++b) {
          const T* z = x + b * in;
          T* p = y + b * out;
          T mx = z[0];
          for (std::int64_t k = 1; k < out; ++k) mx = std::max(mx, z[k]);
          T s = 0;
          for (std::int64_t k = 0; k < out; ++k) {
            p[k] = std::exp(z[k] - mx);
            s += p[k];
          }
          for (std::int64_t k = 0; k < out; ++k) p[k] /= s;
        }
        break;
    }
  }
}

template <typename T>
double backward(const NetPlan& plan, const T* params, const std::uint8_t* labels, int n,
                Workspace<T>& ws, T* grad, std::int64_t* correct) {
  const auto last = plan.layers.size() - 1;
  const std::int64_t classes = plan.classes;
  const T* probs = ws.acts[last].data();
  const T* logits = ws.acts[last - 1].data();
  double loss = 0.0;
  for (int b = 0; b < n; ++b) {
    const int label = labels[b];
    if (label < 0 || label >= classes) throw Error("backward: label out of range");
    loss += cross_entropy(logits + b * classes, classes, label);
    if (correct != nullptr && argmax_of(logits + b * classes, classes) == label) ++*correct;
    // d(loss)/d(logits) = softmax - one-hot.
    T* d = ws.grad_a.data() + b * classes;
    for (std::int64_t k = 0; k < classes; ++k) d[k] = probs[b * classes + k];
    d[label] -= T{1};
  }
  for (std::size_t step = 0; step < last; ++step) {
    const std::size_t i = last - 1 - step;
    const LayerPlan& L = plan.layers[i];
    const T* x = i == 0 ? ws.input.data() : ws.acts[i - 1].data();
    const T* y = ws.acts[i].data();
    const T* dy = ws.grad_a.data();
    T* dx = L.needs_input_grad ? ws.grad_b.data() : nullptr;
    const std::int64_t in = L.in_size(), out = L.out_size(), total = n * out;
    switch (L.kind) {
      case LayerKind::conv:
        for (int b = 0; b < n; ++b) {
          conv_backward(L, params + L.weight_offset, ws.cols[i].data() + b * L.col_size,
                        dy + b * out, grad + L.weight_offset, dx != nullptr ? dx + b * in : nullptr,
                        ws.scratch.data());
        }
        break;
      case LayerKind::tanh:
        if (dx != nullptr) {
          for (std::int64_t k = 0; k < total; ++k) dx[k] = dy[k] * (T{1} - y[k] * y[k]);
        }
        break;
      case LayerKind::relu:
        if (dx != nullptr) {
          for (std::int64_t k = 0; k < total; ++k) dx[k] = y[k] > T{0} ? dy[k] : T{0};
        }
        break;
      case LayerKind::maxpool:
        if (dx != nullptr) {
          std::fill(dx, dx + n * in, T{0});
          for (int b = 0; b < n; ++b) {
            const std::int32_t* idx = ws.argmax[i].data() + b * out;
            for (std::int64_t o = 0; o < out; ++o) dx[b * in + idx[o]] += dy[b * out + o];
          }
        }
        break;
      case LayerKind::flatten:
        if (dx != nullptr) std::copy(dy, dy + total, dx);
        break;
      case LayerKind::fc:
        fc_backward(L, params + L.weight_offset, x, dy, grad + L.weight_offset,
                    L.bias_offset >= 0 ? grad + L.bias_offset : nullptr, dx, n);
        break;
      case LayerKind::softmax:
        throw Error("backward: softmax before the last layer");
    }
    if (dx == nullptr) break;
    std::swap(ws.grad_a, ws.grad_b);
  }
  return loss;
}

template int argmax_of<float>(const float*, std::int64_t);
template int argmax_of<double>(const double*, std::int64_t);
template std::vector<float> flatten_params<float>(const NetPlan&, const Model&);
template std::vector<double> flatten_params<double>(const NetPlan&, const Model&);
template void store_params<float>(const NetPlan&, const std::vector<float>&, Model&);
template void store_params<double>(const NetPlan&, const std::vector<double>&, Model&);
template Workspace<float> make_workspace<float>(const NetPlan&, int);
template Workspace<double> make_workspace<double>(const NetPlan&, int);
template void forward<float>(const NetPlan&, const float*, int, Workspace<float>&);
template void forward<double>(const NetPlan&, const double*, int, Workspace<double>&);
template double backward<float>(const NetPlan&, const float*, const std::uint8_t*, int,
                                Workspace<float>&, float*, std::int64_t*);
template double backward<double>(const NetPlan&, const double*, const std::uint8_t*, int,
                                 Workspace<double>&, double*, std::int64_t*);

}  // namespace convlab::tools
