// Batch-norm kernels of the cpu backend (see cpu_batch_norm.cpp for the method), included by
// two translation units: cpu_batch_norm.cpp (baseline x86-64) and cpu_batch_norm_avx512.cpp
// (after an AVX-512 target pragma). Everything here has internal linkage, so each unit keeps
// its own instantiations and the linker never mixes code built for the two targets.
// bn_*_entry(...) run the kernel for x's dtype (f32 or bf16) and memory format: these NCHW
// kernels for contiguous x, those of cpu_batch_norm_nhwc_impl.h for channels_last x (the
// op checks that y, dy and dx share x's format).
#pragma once

#include <algorithm>
#include <cmath>

#include "backend/cpu/cpu_batch_norm_common.h"
#include "backend/cpu/cpu_batch_norm_nhwc_impl.h"
#include "backend/cpu/cpu_loops.h"
#include "tandem/ops.h"

namespace tandem::ops {
namespace {


struct Dims {
  int64_t n, c, hw;
};

Dims dims_of(const Tensor& x) { return {x.size(0), x.size(1), x.size(2) * x.size(3)}; }

using cpu::ld;
using cpu::st;

// y = (x - mean) * a + b, optionally clamped at 0, for channel c.
template <typename T>
void normalize_channel(const T* x, T* y, const Dims& d, int64_t c, float mean, float a, float b, bool relu) {
  for (int64_t n = 0; n < d.n; ++n) {
    const T* xs = x + (n * d.c + c) * d.hw;
    T* ys = y + (n * d.c + c) * d.hw;
    if (relu) {
#pragma omp simd
      for (int64_t i = 0; i < d.hw; ++i) {
        const float v = (ld(xs[i]) - mean) * a + b;
        ys[i] = st(v <= 0.0f ? 0.0f : v, ys);  // NaN propagates
      }
    } else {
#pragma omp simd
      for (int64_t i = 0; i < d.hw; ++i) ys[i] = st((ld(xs[i]) - mean) * a + b, ys);
    }
  }
}

template <typename T>
void bn_forward_training(const Tensor& x, const Tensor& gamma, const Tensor& beta, double eps, double momentum,
                         const Tensor& y, const Tensor& save_mean, const Tensor& save_var,
                         const Tensor& running_mean, const Tensor& running_var, bool fuse_relu) {
  const Dims d = dims_of(x);
  const BnForward<T> p(x, y, gamma, beta, save_mean, save_var, running_mean, running_var);
  const double count = static_cast<double>(d.n * d.hw);
#pragma omp parallel for schedule(static)
  for (int64_t c = 0; c < d.c; ++c) {
    // One pass for sum and sum of squares of (x - k), k = the channel's first value: the
    // shift keeps the E[v^2] - E[v]^2 form accurate when |mean| >> std.
    const float k = d.n * d.hw > 0 ? ld(p.x[c * d.hw]) : 0.0f;
    double sum = 0.0, sq = 0.0;
    for (int64_t n = 0; n < d.n; ++n) {
      const T* xs = p.x + (n * d.c + c) * d.hw;
      float s1 = 0.0f, s2 = 0.0f;
#pragma omp simd reduction(+ : s1, s2)
      for (int64_t i = 0; i < d.hw; ++i) {
        const float v = ld(xs[i]) - k;
        s1 += v;
        s2 += v * v;
      }
      sum += s1;
      sq += s2;
    }
    float meanf, scale;
    p.finish(c, k, sum, sq, count, eps, momentum, meanf, scale);
    normalize_channel(p.x, p.y, d, c, meanf, scale, p.beta[c], fuse_relu);
  }
}

template <typename T>
void bn_forward_inference(const Tensor& x, const Tensor& gamma, const Tensor& beta, const Tensor& running_mean,
                          const Tensor& running_var, double eps, const Tensor& y, bool fuse_relu) {
  const Dims d = dims_of(x);
  const T* xp = cpu::elems<T>(x);
  T* yp = cpu::elems<T>(y);
  const float* g = gamma.data<float>();
  const float* bt = beta.data<float>();
  const float* rm = running_mean.data<float>();
  const float* rv = running_var.data<float>();
#pragma omp parallel for schedule(static)
  for (int64_t c = 0; c < d.c; ++c) {
    const double invstd = 1.0 / std::sqrt(static_cast<double>(rv[c]) + eps);
    normalize_channel(xp, yp, d, c, rm[c], static_cast<float>(invstd * g[c]), bt[c], fuse_relu);
  }
}

template <typename T>
void bn_backward(const Tensor& dy, const Tensor& x, const Tensor& gamma, const Tensor& save_mean,
                 const Tensor& save_var, double eps, const Tensor& dx, const Tensor& dgamma, const Tensor& dbeta,
                 bool accumulate, bool fuse_relu, const Tensor& y) {
  const Dims d = dims_of(x);
  const BnBackward<T> p(dy, x, gamma, save_mean, save_var, dx, dgamma, dbeta, fuse_relu, y);
  const double count = static_cast<double>(d.n * d.hw);
#pragma omp parallel for schedule(static)
  for (int64_t c = 0; c < d.c; ++c) {
    const float mean = p.save_mean[c];
    // Pass 1: sum(dy) and sum(dy * (x - mean)); with a fused ReLU, dy is first masked by
    // y > 0 and the masked gradient is kept in dx for pass 2.
    double sum_dy = 0.0, sum_dy_xmu = 0.0;
    for (int64_t n = 0; n < d.n; ++n) {
      const int64_t off = (n * d.c + c) * d.hw;
      const T* xs = p.x + off;
      const T* gs = p.dy + off;
      float s1 = 0.0f, s2 = 0.0f;
      if (p.y) {
        const T* ys = p.y + off;
        T* ds = p.dx + off;
#pragma omp simd reduction(+ : s1, s2)
        for (int64_t i = 0; i < d.hw; ++i) {
          const float gi = ld(ys[i]) <= 0.0f ? 0.0f : ld(gs[i]);
          ds[i] = st(gi, ds);  // exact: gi is 0 or an element of dy
          s1 += gi;
          s2 += gi * (ld(xs[i]) - mean);
        }
      } else {
#pragma omp simd reduction(+ : s1, s2)
        for (int64_t i = 0; i < d.hw; ++i) {
          s1 += ld(gs[i]);
          s2 += ld(gs[i]) * (ld(xs[i]) - mean);
        }
      }
      sum_dy += s1;
      sum_dy_xmu += s2;
    }
    float a, mdy, k;
    p.finish(c, sum_dy, sum_dy_xmu, count, eps, accumulate, a, mdy, k);
    for (int64_t n = 0; n < d.n; ++n) {
      const int64_t off = (n * d.c + c) * d.hw;
      const T* xs = p.x + off;
      const T* gs = p.y ? p.dx + off : p.dy + off;
      T* ds = p.dx + off;
#pragma omp simd
      for (int64_t i = 0; i < d.hw; ++i) ds[i] = st(a * (ld(gs[i]) - mdy - (ld(xs[i]) - mean) * k), ds);
    }
  }
}

[[maybe_unused]] void bn_forward_training_entry(const Tensor& x, const Tensor& gamma, const Tensor& beta, double eps,
                                                double momentum, const Tensor& y, const Tensor& save_mean,
                                                const Tensor& save_var, const Tensor& running_mean,
                                                const Tensor& running_var, bool fuse_relu) {
  const bool nhwc = x.memory_format() == MemoryFormat::channels_last;
  cpu::by_dtype(x.dtype(), [&](auto t) {
    using T = decltype(t);
    (nhwc ? bn_nhwc_forward_training<T> : bn_forward_training<T>)(x, gamma, beta, eps, momentum, y, save_mean,
                                                                  save_var, running_mean, running_var, fuse_relu);
  });
}

[[maybe_unused]] void bn_forward_inference_entry(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                                                 const Tensor& running_mean, const Tensor& running_var, double eps,
                                                 const Tensor& y, bool fuse_relu) {
  const bool nhwc = x.memory_format() == MemoryFormat::channels_last;
  cpu::by_dtype(x.dtype(), [&](auto t) {
    using T = decltype(t);
    (nhwc ? bn_nhwc_forward_inference<T> : bn_forward_inference<T>)(x, gamma, beta, running_mean, running_var, eps, y,
                                                                    fuse_relu);
  });
}

[[maybe_unused]] void bn_backward_entry(const Tensor& dy, const Tensor& x, const Tensor& gamma,
                                        const Tensor& save_mean, const Tensor& save_var, double eps,
                                        const Tensor& dx, const Tensor& dgamma, const Tensor& dbeta, bool accumulate,
                                        bool fuse_relu, const Tensor& y) {
  const bool nhwc = x.memory_format() == MemoryFormat::channels_last;
  cpu::by_dtype(x.dtype(), [&](auto t) {
    using T = decltype(t);
    (nhwc ? bn_nhwc_backward<T> : bn_backward<T>)(dy, x, gamma, save_mean, save_var, eps, dx, dgamma, dbeta, accumulate,
                                                  fuse_relu, y);
  });
}

}  // namespace
}  // namespace tandem::ops
