// The pooling kernels of cpu_pool_impl.h and cpu_pool_nhwc_impl.h built for AVX-512 (see
// cpu_batch_norm_avx512.cpp for the pattern), and channels_last ones of their own. Called only
// when cpu::has_avx512().
// GCC 12's AVX-512 intrinsics initialise their "undefined" vectors from themselves, which
// -Wmaybe-uninitialized reports at the intrinsic header's lines when inlined here.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <algorithm>
#include <limits>

#include "backend/cpu/cpu_isa.h"
#include "backend/cpu/cpu_loops.h"
#include "tandem/ops.h"

// clang ignores GCC's target pragma; its own attribute pragma gives every function below
// the same target.
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,fma,f16c"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512dq,fma,f16c")
#endif

#include "backend/cpu/cpu_pool_impl.h"
#include "backend/cpu/cpu_pool_nhwc_impl.h"

namespace tandem::ops {
namespace {

// Up to 16 elements as floats (bf16 widened exactly) and back (bf16 rounded to nearest even,
// NaN kept quiet: tandem::float_to_bf16 in vector form).
__m512 load16(const float* p, __mmask16 m) { return _mm512_maskz_loadu_ps(m, p); }
__m512 load16(const uint16_t* p, __mmask16 m) {
  const __m512i w = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, p));
  return _mm512_castsi512_ps(_mm512_slli_epi32(w, 16));
}
void store16(float* p, __m512 v, __mmask16 m) { _mm512_mask_storeu_ps(p, m, v); }
void store16(uint16_t* p, __m512 v, __mmask16 m) {
  const __m512i u = _mm512_castps_si512(v);
  const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
  __m512i r = _mm512_srli_epi32(_mm512_add_epi32(u, _mm512_add_epi32(lsb, _mm512_set1_epi32(0x7fff))), 16);
  const __mmask16 nan = _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
  r = _mm512_mask_mov_epi32(r, nan, _mm512_or_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(0x40)));
  _mm256_mask_storeu_epi16(p, m, _mm512_cvtepi32_epi16(r));
}

__mmask16 first(int64_t n) { return n >= 16 ? __mmask16(0xffff) : n <= 0 ? __mmask16(0) : __mmask16((1u << n) - 1); }

// The 2x2 / stride 2 / no padding case, 16 outputs per vector: each input row pair is loaded
// contiguously and split into even and odd columns; the window's maximum is taken along the
// first row, then the second, then across them, each later candidate winning when greater or
// NaN -- the same winner (and index) as the row-major scan of pool_forward (PyTorch's rule).
template <typename T>
void pool2x2_forward(const Tensor& x, const Tensor& y, const Tensor& indices) {
  const int64_t planes = x.size(0) * x.size(1), H = x.size(2), W = x.size(3);
  const int64_t P = y.size(2), Q = y.size(3);
  const T* xp = cpu::elems<T>(x);
  T* yp = cpu::elems<T>(y);
  int32_t* ip = indices.defined() ? indices.data<int32_t>() : nullptr;
  const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  const __m512i odd = _mm512_add_epi32(even, _mm512_set1_epi32(1));
#pragma omp parallel for schedule(static) if (planes * P * Q > cpu::kParallelMin / 4)
  for (int64_t pl = 0; pl < planes; ++pl) {
    const T* xs = xp + pl * H * W;
    for (int64_t oh = 0; oh < P; ++oh) {
      const T* r0 = xs + 2 * oh * W;
      const T* r1 = r0 + W;
      for (int64_t ow = 0; ow < Q; ow += 16) {
        const int64_t c0 = 2 * ow;
        const __mmask16 lo = first(W - c0), hi = first(W - c0 - 16), out = first(Q - ow);
        const __m512 a0 = load16(r0 + c0, lo), a1 = load16(r0 + c0 + 16, hi);
        const __m512 b0 = load16(r1 + c0, lo), b1 = load16(r1 + c0 + 16, hi);
        const __m512 a = _mm512_permutex2var_ps(a0, even, a1), b = _mm512_permutex2var_ps(a0, odd, a1);
        const __m512 c = _mm512_permutex2var_ps(b0, even, b1), d = _mm512_permutex2var_ps(b0, odd, b1);
        const __mmask16 tb = _mm512_cmp_ps_mask(b, a, _CMP_GT_OQ) | _mm512_cmp_ps_mask(b, b, _CMP_UNORD_Q);
        const __mmask16 td = _mm512_cmp_ps_mask(d, c, _CMP_GT_OQ) | _mm512_cmp_ps_mask(d, d, _CMP_UNORD_Q);
        const __m512 h0 = _mm512_mask_blend_ps(tb, a, b), h1 = _mm512_mask_blend_ps(td, c, d);
        const __mmask16 t1 = _mm512_cmp_ps_mask(h1, h0, _CMP_GT_OQ) | _mm512_cmp_ps_mask(h1, h1, _CMP_UNORD_Q);
        const int64_t o = pl * P * Q + oh * Q + ow;
        store16(yp + o, _mm512_mask_blend_ps(t1, h0, h1), out);
        if (!ip) continue;
        // Flat index h*W + w of the winner in its plane.
        const __m512i col = _mm512_add_epi32(_mm512_set1_epi32(static_cast<int32_t>(2 * oh * W + c0)),
                                             _mm512_slli_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10,
                                                                                 11, 12, 13, 14, 15),
                                                               1));
        const __m512i one = _mm512_set1_epi32(1), row = _mm512_set1_epi32(static_cast<int32_t>(W));
        const __m512i i0 = _mm512_mask_add_epi32(col, tb, col, one);
        const __m512i i1 = _mm512_mask_add_epi32(_mm512_add_epi32(col, row), td, _mm512_add_epi32(col, row), one);
        _mm512_mask_storeu_epi32(ip + o, out, _mm512_mask_blend_epi32(t1, i0, i1));
      }
    }
  }
}

// The backward of the 2x2 / stride 2 case when the windows tile the plane (H = 2P, W = 2Q):
// every input element belongs to exactly one window, so dx is written once, row by row, as
// dy where the window's index points at it and 0 elsewhere (no zeroing pass, no scatter).
template <typename T>
void pool2x2_backward(const Tensor& dy, const Tensor& indices, const Tensor& dx) {
  const int64_t planes = dx.size(0) * dx.size(1), H = dx.size(2), W = dx.size(3);
  const int64_t P = dy.size(2), Q = dy.size(3);
  const T* g = cpu::elems<T>(dy);
  const int32_t* ip = indices.data<int32_t>();
  T* d = cpu::elems<T>(dx);
  const __m512i lo_idx = _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
  const __m512i hi_idx = _mm512_add_epi32(lo_idx, _mm512_set1_epi32(8));
  const __m512i lane2 = _mm512_slli_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15), 1);
#pragma omp parallel for schedule(static) if (planes * H * W > cpu::kParallelMin)
  for (int64_t pl = 0; pl < planes; ++pl) {
    for (int64_t oh = 0; oh < P; ++oh) {
      for (int64_t ow = 0; ow < Q; ow += 16) {
        const __mmask16 out = first(Q - ow);
        const int64_t o = pl * P * Q + oh * Q + ow;
        const __m512 gv = load16(g + o, out);
        const __m512i iv = _mm512_maskz_loadu_epi32(out, ip + o);
        for (int64_t dr = 0; dr < 2; ++dr) {
          const int64_t r = 2 * oh + dr;
          const __m512i base = _mm512_add_epi32(_mm512_set1_epi32(static_cast<int32_t>(r * W + 2 * ow)), lane2);
          const __mmask16 m0 = _mm512_mask_cmpeq_epi32_mask(out, iv, base);
          const __mmask16 m1 = _mm512_mask_cmpeq_epi32_mask(out, iv, _mm512_add_epi32(base, _mm512_set1_epi32(1)));
          const __m512 v0 = _mm512_maskz_mov_ps(m0, gv), v1 = _mm512_maskz_mov_ps(m1, gv);
          T* row = d + pl * H * W + r * W + 2 * ow;
          const int64_t cols = std::min<int64_t>(32, W - 2 * ow);
          store16(row, _mm512_permutex2var_ps(v0, lo_idx, v1), first(cols));
          store16(row + 16, _mm512_permutex2var_ps(v0, hi_idx, v1), first(cols - 16));
        }
      }
    }
  }
}

// Channels_last max pooling, any window: per output pixel and 16 channels, the running
// maximum and its index stay in registers while the window's pixels are scanned in row-major
// order (a later one winning when greater or NaN), as pool_nhwc_forward.
template <typename T>
void pool_nhwc16_forward(const Tensor& x, const Pool2dParams& p, const Tensor& y,
                         const Tensor& indices) {
  const auto pool = [](const Window<T>& v) {
    for (int64_t c = 0; c < v.C; c += 16) {
      const __mmask16 m = first(v.C - c);
      __m512 best = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
      __m512i bi = _mm512_set1_epi32(static_cast<int32_t>(v.h0 * v.W + v.w0));
      for (int64_t h = v.h0; h < v.h1; ++h)
        for (int64_t w = v.w0; w < v.w1; ++w) {
          const __m512 e = load16(v.x + (h * v.W + w) * v.C + c, m);
          const __mmask16 t =
              _mm512_cmp_ps_mask(e, best, _CMP_GT_OQ) | _mm512_cmp_ps_mask(e, e, _CMP_UNORD_Q);
          best = _mm512_mask_blend_ps(t, best, e);
          bi = _mm512_mask_blend_epi32(t, bi, _mm512_set1_epi32(static_cast<int32_t>(h * v.W + w)));
        }
      store16(v.y + c, best, m);
      if (v.idx) _mm512_mask_storeu_epi32(v.idx + c, m, bi);
    }
  };
  for_each_window<T>(x, p, y, indices, pool);
}

// The channels_last backward when the windows tile the image (see pool_nhwc_backward): every
// input pixel is written once, dy where its window's index points at it and 0 elsewhere.
template <typename T>
void pool_nhwc16_backward_tiled(const Tensor& dy, const Tensor& indices, const Pool2dParams& p,
                                const Tensor& dx) {
  const PoolGrad<T> a(dy, indices, dx);
#pragma omp parallel for schedule(static) if (a.N * a.H * a.W * a.C > cpu::kParallelMin)
  for (int64_t r = 0; r < a.N * a.P; ++r) {
    const int64_t n = r / a.P, oh = r % a.P;
    for (int64_t ow = 0; ow < a.Q; ++ow) {
      const int64_t o = (r * a.Q + ow) * a.C;
      for (int64_t c = 0; c < a.C; c += 16) {
        const __mmask16 m = first(a.C - c);
        const __m512 gv = load16(a.g + o + c, m);
        const __m512i iv = _mm512_maskz_loadu_epi32(m, a.ip + o + c);
        for (int64_t h = oh * p.kernel_h; h < (oh + 1) * p.kernel_h; ++h)
          for (int64_t w = ow * p.kernel_w; w < (ow + 1) * p.kernel_w; ++w) {
            const int32_t k = static_cast<int32_t>(h * a.W + w);
            const __mmask16 hit = _mm512_cmpeq_epi32_mask(iv, _mm512_set1_epi32(k));
            store16(a.d + (n * a.H * a.W + k) * a.C + c, _mm512_maskz_mov_ps(hit, gv), m);
          }
      }
    }
  }
}

// The f32 channels_last backward for any windows, as a gather: each input pixel adds, in
// output order (as pool_nhwc_backward's scatter does), the dy of the windows that cover it and
// whose index points at it, and is written once. Indices are taken as max_pool2d_forward
// writes them, each inside its window (pool2x2_backward assumes the same). In bf16, where each
// add rounds, the scatter of pool_nhwc_backward measured faster (docs/resnet.md).
void pool_nhwc16_backward_gather(const Tensor& dy, const Tensor& indices, const Pool2dParams& p,
                                 const Tensor& dx) {
  const PoolGrad<float> a(dy, indices, dx);
  // Outputs o whose window [o*stride - pad, o*stride - pad + kernel) holds input i: [lo, hi).
  const auto covering = [](int64_t i, int64_t stride, int64_t pad, int64_t kernel, int64_t n,
                           int64_t& lo, int64_t& hi) {
    const int64_t e =
        i + pad - kernel + 1;  // the last output starting at or before i - kernel + 1 is out
    lo = e <= 0 ? 0 : (e + stride - 1) / stride;
    hi = std::min<int64_t>((i + pad) / stride + 1, n);
  };
#pragma omp parallel for schedule(static) if (a.N * a.H * a.W * a.C > cpu::kParallelMin)
  for (int64_t r = 0; r < a.N * a.H; ++r) {
    const int64_t n = r / a.H, h = r % a.H;
    int64_t oh0, oh1;
    covering(h, p.stride_h, p.pad_h, p.kernel_h, a.P, oh0, oh1);
    for (int64_t w = 0; w < a.W; ++w) {
      int64_t ow0, ow1;
      covering(w, p.stride_w, p.pad_w, p.kernel_w, a.Q, ow0, ow1);
      const __m512i k = _mm512_set1_epi32(static_cast<int32_t>(h * a.W + w));
      for (int64_t c = 0; c < a.C; c += 16) {
        const __mmask16 m = first(a.C - c);
        __m512 acc = _mm512_setzero_ps();
        for (int64_t oh = oh0; oh < oh1; ++oh)
          for (int64_t ow = ow0; ow < ow1; ++ow) {
            const int64_t o = ((n * a.P + oh) * a.Q + ow) * a.C + c;
            const __mmask16 hit =
                _mm512_mask_cmpeq_epi32_mask(m, _mm512_maskz_loadu_epi32(m, a.ip + o), k);
            acc = _mm512_mask_add_ps(acc, hit, acc, load16(a.g + o, hit));
          }
        store16(a.d + ((n * a.H + h) * a.W + w) * a.C + c, acc, m);
      }
    }
  }
}

}  // namespace
}  // namespace tandem::ops

namespace tandem::ops::detail {

void pool_forward_avx512(const Tensor& x, const Pool2dParams& p, const Tensor& y, const Tensor& indices) {
  const bool simple = p.kernel_h == 2 && p.kernel_w == 2 && p.stride_h == 2 && p.stride_w == 2 && p.pad_h == 0 &&
                      p.pad_w == 0 && x.size(2) * x.size(3) < (int64_t{1} << 31);
  if (!simple) return pool_forward_entry(x, p, y, indices);
  cpu::by_dtype(x.dtype(), [&](auto t) { pool2x2_forward<decltype(t)>(x, y, indices); });
}

void pool_backward_avx512(const Tensor& dy, const Tensor& indices, const Pool2dParams& p, const Tensor& dx) {
  const bool tiled = p.kernel_h == 2 && p.kernel_w == 2 && p.stride_h == 2 && p.stride_w == 2 && p.pad_h == 0 &&
                     p.pad_w == 0 && dx.size(2) == 2 * dy.size(2) && dx.size(3) == 2 * dy.size(3) &&
                     dx.size(2) * dx.size(3) < (int64_t{1} << 31);
  if (!tiled) return pool_backward_entry(dy, indices, dx);
  cpu::by_dtype(dx.dtype(), [&](auto t) { pool2x2_backward<decltype(t)>(dy, indices, dx); });
}

void pool_nhwc_forward_avx512(const Tensor& x, const Pool2dParams& p, const Tensor& y,
                              const Tensor& indices) {
  cpu::by_dtype(x.dtype(), [&](auto t) { pool_nhwc16_forward<decltype(t)>(x, p, y, indices); });
}
void pool_nhwc_backward_avx512(const Tensor& dy, const Tensor& indices, const Pool2dParams& p,
                               const Tensor& dx) {
  cpu::by_dtype(dx.dtype(), [&](auto t) {
    using T = decltype(t);
    if (windows_tile(p, dx, dy)) return pool_nhwc16_backward_tiled<T>(dy, indices, p, dx);
    if constexpr (sizeof(T) == 4)
      pool_nhwc16_backward_gather(dy, indices, p, dx);
    else
      pool_nhwc_backward_entry(dy, indices, p, dx);
  });
}
void mean_nhwc_avx512(const Tensor& x, const Tensor& y) {
  mean_nhwc_entry(x, y);
}
void spread_nhwc_avx512(const Tensor& dy, const Tensor& dx) {
  spread_nhwc_entry(dy, dx);
}

}  // namespace tandem::ops::detail

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif
#pragma GCC diagnostic pop
