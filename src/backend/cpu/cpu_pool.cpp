// Max pooling with explicit argmax indices (i32, flat h*W + w within each plane), so the
// backward is a scatter that any backend can reproduce; global average pooling
// (AdaptiveAvgPool2d(1)) summed in f32. Parallel over (N, C) planes.
#include <cmath>
#include <limits>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/cpu_loops.h"

namespace tandem::ops {
namespace {

using cpu::ld;
using cpu::st;

template <typename T>
void pool_forward(const Tensor& x, const Pool2dParams& p, const Tensor& y, const Tensor& indices) {
  const int64_t planes = x.size(0) * x.size(1), H = x.size(2), W = x.size(3);
  const int64_t P = y.size(2), Q = y.size(3);
  const T* xp = cpu::elems<T>(x);
  T* yp = cpu::elems<T>(y);
  int32_t* ip = indices.defined() ? indices.data<int32_t>() : nullptr;
  const bool simple = p.kernel_h == 2 && p.kernel_w == 2 && p.stride_h == 2 && p.stride_w == 2 && p.pad_h == 0 &&
                      p.pad_w == 0;
#pragma omp parallel for schedule(static) if (planes * P * Q > cpu::kParallelMin / 4)
  for (int64_t pl = 0; pl < planes; ++pl) {
    const T* xs = xp + pl * H * W;
    T* ys = yp + pl * P * Q;
    int32_t* is = ip ? ip + pl * P * Q : nullptr;
    for (int64_t oh = 0; oh < P; ++oh) {
      if (simple) {
        // 2x2 window, stride 2: candidates in row-major window order; a later one wins when
        // greater or NaN (PyTorch's rule). Branch-free so that the loop vectorises.
        const T* r0 = xs + 2 * oh * W;
        const T* r1 = r0 + W;
        const int32_t base = static_cast<int32_t>(2 * oh * W);
        const int32_t w32 = static_cast<int32_t>(W);
        T* yrow = ys + oh * Q;
        int32_t* irow = is ? is + oh * Q : nullptr;
        if (irow) {
#pragma omp simd
          for (int64_t ow = 0; ow < Q; ++ow) {
            const int32_t w0 = static_cast<int32_t>(2 * ow);
            float best = ld(r0[2 * ow]);
            int32_t bi = base + w0;
            const float b = ld(r0[2 * ow + 1]), c = ld(r1[2 * ow]), d = ld(r1[2 * ow + 1]);
            const bool tb = (b > best) | (b != b);
            best = tb ? b : best;
            bi = tb ? base + w0 + 1 : bi;
            const bool tc = (c > best) | (c != c);
            best = tc ? c : best;
            bi = tc ? base + w32 + w0 : bi;
            const bool td = (d > best) | (d != d);
            best = td ? d : best;
            bi = td ? base + w32 + w0 + 1 : bi;
            yrow[ow] = st(best, yrow);
            irow[ow] = bi;
          }
        } else {
#pragma omp simd
          for (int64_t ow = 0; ow < Q; ++ow) {
            float best = ld(r0[2 * ow]);
            const float b = ld(r0[2 * ow + 1]), c = ld(r1[2 * ow]), d = ld(r1[2 * ow + 1]);
            best = (b > best) | (b != b) ? b : best;
            best = (c > best) | (c != c) ? c : best;
            best = (d > best) | (d != d) ? d : best;
            yrow[ow] = st(best, yrow);
          }
        }
        continue;
      }
      const int64_t h0 = std::max<int64_t>(oh * p.stride_h - p.pad_h, 0);
      const int64_t h1 = std::min<int64_t>(oh * p.stride_h - p.pad_h + p.kernel_h, H);
      for (int64_t ow = 0; ow < Q; ++ow) {
        const int64_t w0 = std::max<int64_t>(ow * p.stride_w - p.pad_w, 0);
        const int64_t w1 = std::min<int64_t>(ow * p.stride_w - p.pad_w + p.kernel_w, W);
        float best = -std::numeric_limits<float>::infinity();
        int64_t bi = h0 * W + w0;
        for (int64_t h = h0; h < h1; ++h)
          for (int64_t w = w0; w < w1; ++w) {
            const float v = ld(xs[h * W + w]);
            if (v > best || std::isnan(v)) best = v, bi = h * W + w;
          }
        ys[oh * Q + ow] = st(best, ys);
        if (is) is[oh * Q + ow] = static_cast<int32_t>(bi);
      }
    }
  }
}

// dx is zeroed, then each dy element is added at its index (f32 adds, rounded per add for
// bf16 when windows overlap).
template <typename T>
void pool_backward(const Tensor& dy, const Tensor& indices, const Tensor& dx) {
  const int64_t planes = dx.size(0) * dx.size(1), HW = dx.size(2) * dx.size(3);
  const int64_t PQ = dy.size(2) * dy.size(3);
  const T* g = cpu::elems<T>(dy);
  const int32_t* ip = indices.data<int32_t>();
  T* d = cpu::elems<T>(dx);
#pragma omp parallel for schedule(static) if (planes * HW > cpu::kParallelMin)
  for (int64_t pl = 0; pl < planes; ++pl) {
    T* ds = d + pl * HW;
    for (int64_t i = 0; i < HW; ++i) ds[i] = st(0.0f, ds);
    const T* gs = g + pl * PQ;
    const int32_t* is = ip + pl * PQ;
    for (int64_t i = 0; i < PQ; ++i) {
      const int32_t k = is[i];
      if (k >= 0 && k < HW) ds[k] = st(ld(ds[k]) + ld(gs[i]), ds);
    }
  }
}

template <typename T>
void mean_planes(const T* x, T* y, int64_t planes, int64_t hw) {
  const float inv = 1.0f / static_cast<float>(hw);
#pragma omp parallel for if (planes * hw > cpu::kParallelMin) schedule(static)
  for (int64_t p = 0; p < planes; ++p) {
    const T* src = x + p * hw;
    float s = 0.0f;
#pragma omp simd reduction(+ : s)
    for (int64_t i = 0; i < hw; ++i) s += ld(src[i]);
    y[p] = st(s * inv, y);
  }
}

template <typename T>
void spread_planes(const T* dy, T* dx, int64_t planes, int64_t hw) {
  const float inv = 1.0f / static_cast<float>(hw);
#pragma omp parallel for if (planes * hw > cpu::kParallelMin) schedule(static)
  for (int64_t p = 0; p < planes; ++p) {
    const T v = st(ld(dy[p]) * inv, dx);
    T* dst = dx + p * hw;
#pragma omp simd
    for (int64_t i = 0; i < hw; ++i) dst[i] = v;
  }
}

}  // namespace

void CpuBackend::max_pool2d_forward(const Tensor& x, const Pool2dParams& p, const Tensor& y,
                                    const Tensor& indices) {
  cpu::by_dtype(x.dtype(), [&](auto t) { pool_forward<decltype(t)>(x, p, y, indices); });
}

void CpuBackend::max_pool2d_backward(const Tensor& dy, const Tensor& indices, const Pool2dParams&,
                                     const Tensor& dx) {
  cpu::by_dtype(dx.dtype(), [&](auto t) { pool_backward<decltype(t)>(dy, indices, dx); });
}

void CpuBackend::global_avg_pool2d_forward(const Tensor& x, const Tensor& y) {
  cpu::by_dtype(x.dtype(), [&](auto t) {
    using T = decltype(t);
    mean_planes(cpu::elems<T>(x), cpu::elems<T>(y), x.size(0) * x.size(1), x.size(2) * x.size(3));
  });
}

void CpuBackend::global_avg_pool2d_backward(const Tensor& dy, const Tensor& dx) {
  cpu::by_dtype(dx.dtype(), [&](auto t) {
    using T = decltype(t);
    spread_planes(cpu::elems<T>(dy), cpu::elems<T>(dx), dx.size(0) * dx.size(1), dx.size(2) * dx.size(3));
  });
}

}  // namespace tandem::ops
