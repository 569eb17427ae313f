// Channels_last (NHWC) pooling kernels of the cpu backend (see cpu_pool.cpp), included by
// cpu_pool.cpp (baseline x86-64) and cpu_pool_avx512.cpp (after its AVX-512 target pragma);
// internal linkage, so each unit keeps its own instantiations.
// A pixel's C channels are contiguous, so each kernel runs its inner loop across channels,
// kChannelBlock at a time (vectorised), doing per channel the same arithmetic in the same
// order as the NCHW kernels: max pooling scans each window in row-major order, a later
// candidate winning when greater or NaN; the backward adds dy at the indices in output order;
// the global average sums in the eight-way order of sum8(). Results, indices included, are
// those of the NCHW kernels.
#pragma once

#include <algorithm>
#include <limits>

#include "backend/cpu/cpu_loops.h"
#include "tandem/ops.h"

namespace tandem::ops {
namespace {

using cpu::ld;
using cpu::st;

// Channels per block: a block's running maxima, indices or sums stay in L1.
constexpr int64_t kChannelBlock = 64;

// Runs fn(n, c0, nc) for every image n < N and block of channels [c0, c0 + nc) of at most
// kChannelBlock, one task each (no two tasks touch one element of a per-image, per-channel
// output), in parallel when the `elements` touched are many.
template <typename F>
void for_channel_blocks(int64_t N, int64_t C, int64_t elements, const F& fn) {
  const int64_t blocks = (C + kChannelBlock - 1) / kChannelBlock;
#pragma omp parallel for schedule(static) if (elements > cpu::kParallelMin)
  for (int64_t t = 0; t < N * blocks; ++t) {
    const int64_t c0 = (t % blocks) * kChannelBlock;
    fn(t / blocks, c0, std::min(kChannelBlock, C - c0));
  }
}

// The global average's sum of a plane, s[j] holding the elements at positions i == j (mod 8)
// summed in order: combined as a fixed tree so that every layout rounds alike.
inline float sum8(const float* s) {
  return ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
}

// First and one-past-last input row (or column) of output row o's window, clipped to [0, n).
inline void window(int64_t o, int64_t stride, int64_t pad, int64_t kernel, int64_t n, int64_t& lo,
                   int64_t& hi) {
  lo = std::max<int64_t>(o * stride - pad, 0);
  hi = std::min<int64_t>(o * stride - pad + kernel, n);
}

// Whether the windows tile dx [N, C, H, W] exactly (stride = kernel, no padding, H = P *
// kernel_h, W = Q * kernel_w for dy [N, C, P, Q]): each input pixel then has one window.
inline bool windows_tile(const Pool2dParams& p, const Tensor& dx, const Tensor& dy) {
  return p.kernel_h == p.stride_h && p.kernel_w == p.stride_w && p.pad_h == 0 && p.pad_w == 0 &&
         dx.size(2) == dy.size(2) * p.kernel_h && dx.size(3) == dy.size(3) * p.kernel_w;
}

// One output pixel of channels_last max pooling: x the pixel's image [H, W, C] in memory,
// [h0, h1) x [w0, w1) its window clipped to the image, y and idx its C outputs (idx null when
// the indices are not wanted).
template <typename T>
struct Window {
  const T* x;
  T* y;
  int32_t* idx;
  int64_t h0, h1, w0, w1, W, C;
};

// Calls f(Window) for each output pixel of max pooling x [N, H, W, C] -> y, indices
// [N, P, Q, C] (in memory). Parallel over output rows (n, oh).
template <typename T, typename F>
void for_each_window(const Tensor& x, const Pool2dParams& p, const Tensor& y, const Tensor& indices,
                     F&& f) {
  const int64_t N = x.size(0), C = x.size(1), H = x.size(2), W = x.size(3);
  const int64_t P = y.size(2), Q = y.size(3);
  const T* xp = cpu::elems<T>(x);
  T* yp = cpu::elems<T>(y);
  int32_t* ip = indices.defined() ? indices.data<int32_t>() : nullptr;
#pragma omp parallel for schedule(static) if (N * P * Q * C > cpu::kParallelMin / 4)
  for (int64_t r = 0; r < N * P; ++r) {
    Window<T> v{xp + (r / P) * H * W * C, nullptr, nullptr, 0, 0, 0, 0, W, C};
    window(r % P, p.stride_h, p.pad_h, p.kernel_h, H, v.h0, v.h1);
    for (int64_t ow = 0; ow < Q; ++ow) {
      window(ow, p.stride_w, p.pad_w, p.kernel_w, W, v.w0, v.w1);
      const int64_t o = (r * Q + ow) * C;
      v.y = yp + o;
      v.idx = ip ? ip + o : nullptr;
      f(v);
    }
  }
}

// x [N, H, W, C] in memory -> y, indices [N, P, Q, C].
template <typename T>
void pool_nhwc_forward(const Tensor& x, const Pool2dParams& p, const Tensor& y,
                       const Tensor& indices) {
  const auto pool = [](const Window<T>& v) {
    for (int64_t c0 = 0; c0 < v.C; c0 += kChannelBlock) {
      const int64_t nc = std::min(kChannelBlock, v.C - c0);
      float best[kChannelBlock];
      int32_t bi[kChannelBlock];
      const int32_t start = static_cast<int32_t>(v.h0 * v.W + v.w0);
#pragma omp simd
      for (int64_t c = 0; c < nc; ++c)
        best[c] = -std::numeric_limits<float>::infinity(), bi[c] = start;
      for (int64_t h = v.h0; h < v.h1; ++h)
        for (int64_t w = v.w0; w < v.w1; ++w) {
          const T* px = v.x + (h * v.W + w) * v.C + c0;
          const int32_t k = static_cast<int32_t>(h * v.W + w);
#pragma omp simd
          for (int64_t c = 0; c < nc; ++c) {
            const float e = ld(px[c]);
            const bool t = (e > best[c]) | (e != e);
            best[c] = t ? e : best[c];
            bi[c] = t ? k : bi[c];
          }
        }
      T* py = v.y + c0;
#pragma omp simd
      for (int64_t c = 0; c < nc; ++c) py[c] = st(best[c], py);
      if (!v.idx) continue;
#pragma omp simd
      for (int64_t c = 0; c < nc; ++c) v.idx[c0 + c] = bi[c];
    }
  };
  for_each_window<T>(x, p, y, indices, pool);
}

// The operands of a channels_last max-pool backward: dx [N, H, W, C] and dy, indices
// [N, P, Q, C] in memory.
template <typename T>
struct PoolGrad {
  PoolGrad(const Tensor& dy, const Tensor& indices, const Tensor& dx)
      : N(dx.size(0)),
        C(dx.size(1)),
        H(dx.size(2)),
        W(dx.size(3)),
        P(dy.size(2)),
        Q(dy.size(3)),
        g(cpu::elems<T>(dy)),
        ip(indices.data<int32_t>()),
        d(cpu::elems<T>(dx)) {}
  int64_t N, C, H, W, P, Q;
  const T* g;
  const int32_t* ip;
  T* d;
};

// dx [N, H, W, C] = 0, then dy [N, P, Q, C] added at the indices. When the windows tile the
// image exactly (stride = kernel, no padding, H = P * kernel_h, W = Q * kernel_w) each input
// pixel has one window, and dx is written once: dy where the index points at it, 0 elsewhere.
template <typename T>
void pool_nhwc_backward(const Tensor& dy, const Tensor& indices, const Pool2dParams& p,
                        const Tensor& dx) {
  const PoolGrad<T> a(dy, indices, dx);
  if (windows_tile(p, dx, dy)) {
#pragma omp parallel for schedule(static) if (a.N * a.H * a.W * a.C > cpu::kParallelMin)
    for (int64_t r = 0; r < a.N * a.P; ++r) {
      const int64_t n = r / a.P, oh = r % a.P;
      for (int64_t ow = 0; ow < a.Q; ++ow) {
        const T* gs = a.g + (r * a.Q + ow) * a.C;
        const int32_t* is = a.ip + (r * a.Q + ow) * a.C;
        for (int64_t h = oh * p.kernel_h; h < (oh + 1) * p.kernel_h; ++h)
          for (int64_t w = ow * p.kernel_w; w < (ow + 1) * p.kernel_w; ++w) {
            const int32_t k = static_cast<int32_t>(h * a.W + w);
            T* ds = a.d + (n * a.H * a.W + k) * a.C;
#pragma omp simd
            for (int64_t c = 0; c < a.C; ++c) {
              const T v = gs[c];             // read unconditionally, so that the select vectorises
              ds[c] = is[c] == k ? v : T{};  // T{}: +0 in f32 and bf16
            }
          }
      }
    }
    return;
  }
  // Overlapping (or padded, or partial) windows: each task owns a block of channels of one
  // image, clears it and accumulates into it, so no two threads write one element.
  const int64_t HW = a.H * a.W, PQ = a.P * a.Q;
  for_channel_blocks(a.N, a.C, a.N * HW * a.C, [&](int64_t n, int64_t c0, int64_t nc) {
    T* ds = a.d + n * HW * a.C + c0;
    for (int64_t i = 0; i < HW; ++i)
#pragma omp simd
      for (int64_t c = 0; c < nc; ++c) ds[i * a.C + c] = st(0.0f, ds);
    for (int64_t i = 0; i < PQ; ++i) {
      const T* gs = a.g + (n * PQ + i) * a.C + c0;
      const int32_t* is = a.ip + (n * PQ + i) * a.C + c0;
      // Distinct channels of one output pixel never write the same element.
#pragma omp simd
      for (int64_t c = 0; c < nc; ++c) {
        const int64_t k = is[c];
        if (k >= 0 && k < HW) ds[k * a.C + c] = st(ld(ds[k * a.C + c]) + ld(gs[c]), ds);
      }
    }
  });
}

// y[n, c] = mean over the H*W pixels of x [N, H, W, C]; y [N, C] in memory (either format).
template <typename T>
void mean_nhwc(const Tensor& x, const Tensor& y) {
  const int64_t N = x.size(0), C = x.size(1), HW = x.size(2) * x.size(3);
  const T* xp = cpu::elems<T>(x);
  T* yp = cpu::elems<T>(y);
  const float inv = 1.0f / static_cast<float>(HW);
  for_channel_blocks(N, C, N * HW * C, [&](int64_t n, int64_t c0, int64_t nc) {
    float s[8][kChannelBlock] = {};
    for (int64_t i = 0; i < HW; ++i) {
      const T* px = xp + (n * HW + i) * C + c0;
      const int64_t j = i % 8;
#pragma omp simd
      for (int64_t c = 0; c < nc; ++c) s[j][c] += ld(px[c]);
    }
    T* py = yp + n * C + c0;
    for (int64_t c = 0; c < nc; ++c) {
      const float col[8] = {s[0][c], s[1][c], s[2][c], s[3][c], s[4][c], s[5][c], s[6][c], s[7][c]};
      py[c] = st(sum8(col) * inv, py);
    }
  });
}

// dx [N, H, W, C] = dy[n, c] / (H*W) at every pixel: each block of channels is rounded once
// and copied to the pixels.
template <typename T>
void spread_nhwc(const Tensor& dy, const Tensor& dx) {
  const int64_t N = dx.size(0), C = dx.size(1), HW = dx.size(2) * dx.size(3);
  const T* g = cpu::elems<T>(dy);
  T* d = cpu::elems<T>(dx);
  const float inv = 1.0f / static_cast<float>(HW);
  for_channel_blocks(N, C, N * HW * C, [&](int64_t n, int64_t c0, int64_t nc) {
    T v[kChannelBlock];
    for (int64_t c = 0; c < nc; ++c) v[c] = st(ld(g[n * C + c0 + c]) * inv, v);
    T* ds = d + n * HW * C + c0;
    for (int64_t i = 0; i < HW; ++i) std::copy(v, v + nc, ds + i * C);
  });
}

[[maybe_unused]] void pool_nhwc_forward_entry(const Tensor& x, const Pool2dParams& p,
                                              const Tensor& y, const Tensor& indices) {
  cpu::by_dtype(x.dtype(), [&](auto t) { pool_nhwc_forward<decltype(t)>(x, p, y, indices); });
}
[[maybe_unused]] void pool_nhwc_backward_entry(const Tensor& dy, const Tensor& indices,
                                               const Pool2dParams& p, const Tensor& dx) {
  cpu::by_dtype(dx.dtype(), [&](auto t) { pool_nhwc_backward<decltype(t)>(dy, indices, p, dx); });
}
[[maybe_unused]] void mean_nhwc_entry(const Tensor& x, const Tensor& y) {
  cpu::by_dtype(x.dtype(), [&](auto t) { mean_nhwc<decltype(t)>(x, y); });
}
[[maybe_unused]] void spread_nhwc_entry(const Tensor& dy, const Tensor& dx) {
  cpu::by_dtype(dx.dtype(), [&](auto t) { spread_nhwc<decltype(t)>(dy, dx); });
}

}  // namespace
}  // namespace tandem::ops
