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

// The global average's sum of a plane, s[j] holding the elements at positions i == j (mod 8)
// summed in order: combined as a fixed tree so that every layout rounds alike.
inline float sum8(const float* s) { return ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7])); }

// First and one-past-last input row (or column) of output row o's window, clipped to [0, n).
inline void window(int64_t o, int64_t stride, int64_t pad, int64_t kernel, int64_t n, int64_t& lo, int64_t& hi) {
  lo = std::max<int64_t>(o * stride - pad, 0);
  hi = std::min<int64_t>(o * stride - pad + kernel, n);
}

// x [N, H, W, C] in memory -> y, indices [N, P, Q, C]. Parallel over output rows (n, oh).
template <typename T>
void pool_nhwc_forward(const Tensor& x, const Pool2dParams& p, const Tensor& y, const Tensor& indices) {
  const int64_t N = x.size(0), C = x.size(1), H = x.size(2), W = x.size(3);
  const int64_t P = y.size(2), Q = y.size(3);
  const T* xp = cpu::elems<T>(x);
  T* yp = cpu::elems<T>(y);
  int32_t* ip = indices.defined() ? indices.data<int32_t>() : nullptr;
#pragma omp parallel for schedule(static) if (N * P * Q * C > cpu::kParallelMin / 4)
  for (int64_t r = 0; r < N * P; ++r) {
    const T* xs = xp + (r / P) * H * W * C;
    int64_t h0, h1;
    window(r % P, p.stride_h, p.pad_h, p.kernel_h, H, h0, h1);
    for (int64_t ow = 0; ow < Q; ++ow) {
      int64_t w0, w1;
      window(ow, p.stride_w, p.pad_w, p.kernel_w, W, w0, w1);
      const int64_t o = (r * Q + ow) * C;
      for (int64_t c0 = 0; c0 < C; c0 += kChannelBlock) {
        const int64_t nc = std::min(kChannelBlock, C - c0);
        float best[kChannelBlock];
        int32_t bi[kChannelBlock];
        const int32_t start = static_cast<int32_t>(h0 * W + w0);
#pragma omp simd
        for (int64_t c = 0; c < nc; ++c) best[c] = -std::numeric_limits<float>::infinity(), bi[c] = start;
        for (int64_t h = h0; h < h1; ++h)
          for (int64_t w = w0; w < w1; ++w) {
            const T* px = xs + (h * W + w) * C + c0;
            const int32_t k = static_cast<int32_t>(h * W + w);
#pragma omp simd
            for (int64_t c = 0; c < nc; ++c) {
              const float v = ld(px[c]);
              const bool t = (v > best[c]) | (v != v);
              best[c] = t ? v : best[c];
              bi[c] = t ? k : bi[c];
            }
          }
        T* py = yp + o + c0;
#pragma omp simd
        for (int64_t c = 0; c < nc; ++c) py[c] = st(best[c], py);
        if (!ip) continue;
        int32_t* pi = ip + o + c0;
#pragma omp simd
        for (int64_t c = 0; c < nc; ++c) pi[c] = bi[c];
      }
    }
  }
}

// dx [N, H, W, C] = 0, then dy [N, P, Q, C] added at the indices. When the windows tile the
// image exactly (stride = kernel, no padding, H = P * kernel_h, W = Q * kernel_w) each input
// pixel has one window, and dx is written once: dy where the index points at it, 0 elsewhere.
template <typename T>
void pool_nhwc_backward(const Tensor& dy, const Tensor& indices, const Pool2dParams& p, const Tensor& dx) {
  const int64_t N = dx.size(0), C = dx.size(1), H = dx.size(2), W = dx.size(3);
  const int64_t P = dy.size(2), Q = dy.size(3);
  const T* g = cpu::elems<T>(dy);
  const int32_t* ip = indices.data<int32_t>();
  T* d = cpu::elems<T>(dx);
  const bool tiled = p.kernel_h == p.stride_h && p.kernel_w == p.stride_w && p.pad_h == 0 && p.pad_w == 0 &&
                     H == P * p.kernel_h && W == Q * p.kernel_w;
  if (tiled) {
#pragma omp parallel for schedule(static) if (N * H * W * C > cpu::kParallelMin)
    for (int64_t r = 0; r < N * P; ++r) {
      const int64_t n = r / P, oh = r % P;
      for (int64_t ow = 0; ow < Q; ++ow) {
        const T* gs = g + (r * Q + ow) * C;
        const int32_t* is = ip + (r * Q + ow) * C;
        for (int64_t h = oh * p.kernel_h; h < (oh + 1) * p.kernel_h; ++h)
          for (int64_t w = ow * p.kernel_w; w < (ow + 1) * p.kernel_w; ++w) {
            const int32_t k = static_cast<int32_t>(h * W + w);
            T* ds = d + (n * H * W + k) * C;
#pragma omp simd
            for (int64_t c = 0; c < C; ++c) ds[c] = st(is[c] == k ? ld(gs[c]) : 0.0f, ds);
          }
      }
    }
    return;
  }
  // Overlapping (or padded, or partial) windows: each task owns a block of channels of one
  // image, clears it and accumulates into it, so no two threads write one element.
  const int64_t HW = H * W, PQ = P * Q, blocks = (C + kChannelBlock - 1) / kChannelBlock;
#pragma omp parallel for schedule(static) if (N * HW * C > cpu::kParallelMin)
  for (int64_t t = 0; t < N * blocks; ++t) {
    const int64_t n = t / blocks, c0 = (t % blocks) * kChannelBlock, nc = std::min(kChannelBlock, C - c0);
    T* ds = d + n * HW * C + c0;
    for (int64_t i = 0; i < HW; ++i)
#pragma omp simd
      for (int64_t c = 0; c < nc; ++c) ds[i * C + c] = st(0.0f, ds);
    for (int64_t i = 0; i < PQ; ++i) {
      const T* gs = g + (n * PQ + i) * C + c0;
      const int32_t* is = ip + (n * PQ + i) * C + c0;
      // Distinct channels of one output pixel never write the same element.
#pragma omp simd
      for (int64_t c = 0; c < nc; ++c) {
        const int64_t k = is[c];
        if (k >= 0 && k < HW) ds[k * C + c] = st(ld(ds[k * C + c]) + ld(gs[c]), ds);
      }
    }
  }
}

// y[n, c] = mean over the H*W pixels of x [N, H, W, C]; y [N, C] in memory (either format).
template <typename T>
void mean_nhwc(const Tensor& x, const Tensor& y) {
  const int64_t N = x.size(0), C = x.size(1), HW = x.size(2) * x.size(3);
  const int64_t blocks = (C + kChannelBlock - 1) / kChannelBlock;
  const T* xp = cpu::elems<T>(x);
  T* yp = cpu::elems<T>(y);
  const float inv = 1.0f / static_cast<float>(HW);
#pragma omp parallel for schedule(static) if (N * HW * C > cpu::kParallelMin)
  for (int64_t t = 0; t < N * blocks; ++t) {
    const int64_t n = t / blocks, c0 = (t % blocks) * kChannelBlock, nc = std::min(kChannelBlock, C - c0);
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
  }
}

// dx [N, H, W, C] = dy[n, c] / (H*W) at every pixel.
template <typename T>
void spread_nhwc(const Tensor& dy, const Tensor& dx) {
  const int64_t N = dx.size(0), C = dx.size(1), HW = dx.size(2) * dx.size(3);
  const T* g = cpu::elems<T>(dy);
  T* d = cpu::elems<T>(dx);
  const float inv = 1.0f / static_cast<float>(HW);
#pragma omp parallel for schedule(static) if (N * HW * C > cpu::kParallelMin)
  for (int64_t r = 0; r < N * HW; ++r) {
    const T* gs = g + (r / HW) * C;
    T* ds = d + r * C;
#pragma omp simd
    for (int64_t c = 0; c < C; ++c) ds[c] = st(ld(gs[c]) * inv, ds);
  }
}

[[maybe_unused]] void pool_nhwc_forward_entry(const Tensor& x, const Pool2dParams& p, const Tensor& y,
                                              const Tensor& indices) {
  cpu::by_dtype(x.dtype(), [&](auto t) { pool_nhwc_forward<decltype(t)>(x, p, y, indices); });
}
[[maybe_unused]] void pool_nhwc_backward_entry(const Tensor& dy, const Tensor& indices, const Pool2dParams& p,
                                               const Tensor& dx) {
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
