// Batch-norm kernels of the cpu backend (see cpu_batch_norm.cpp for the method), included by
// two translation units: cpu_batch_norm.cpp (baseline x86-64) and cpu_batch_norm_avx512.cpp
// (after an AVX-512 target pragma). Everything here has internal linkage, so each unit keeps
// its own instantiations and the linker never mixes code built for the two targets.
// bn_*_entry(...) run the kernel for x's dtype (f32 or bf16).
#pragma once

#include <algorithm>
#include <cmath>

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
  const T* xp = cpu::elems<T>(x);
  T* yp = cpu::elems<T>(y);
  const float* g = gamma.data<float>();
  const float* bt = beta.data<float>();
  float* sm = save_mean.data<float>();
  float* sv = save_var.data<float>();
  float* rm = running_mean.defined() ? running_mean.data<float>() : nullptr;
  float* rv = running_var.defined() ? running_var.data<float>() : nullptr;
  const double count = static_cast<double>(d.n * d.hw);
  const double m = momentum;
#pragma omp parallel for schedule(static)
  for (int64_t c = 0; c < d.c; ++c) {
    // One pass for sum and sum of squares of (x - k), k = the channel's first value: the
    // shift keeps the E[v^2] - E[v]^2 form accurate when |mean| >> std.
    const float k = d.n * d.hw > 0 ? ld(xp[c * d.hw]) : 0.0f;
    double sum = 0.0, sq = 0.0;
    for (int64_t n = 0; n < d.n; ++n) {
      const T* xs = xp + (n * d.c + c) * d.hw;
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
    const double mshift = count > 0 ? sum / count : 0.0;
    const double mean = k + mshift;
    const float meanf = static_cast<float>(mean);
    const double var = count > 0 ? std::max(sq / count - mshift * mshift, 0.0) : 0.0;
    const double invstd = 1.0 / std::sqrt(var + eps);
    sm[c] = meanf;
    sv[c] = static_cast<float>(var);
    normalize_channel(xp, yp, d, c, meanf, static_cast<float>(invstd * g[c]), bt[c], fuse_relu);
    if (rm) {
      // PyTorch: running_var uses the unbiased variance (divisor count - 1).
      rm[c] = static_cast<float>((1.0 - m) * rm[c] + m * mean);
      rv[c] = static_cast<float>((1.0 - m) * rv[c] + m * var * count / (count - 1.0));
    }
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
  const T* xp = cpu::elems<T>(x);
  const T* gp = cpu::elems<T>(dy);
  const T* yp = fuse_relu ? cpu::elems<T>(y) : nullptr;
  T* dxp = cpu::elems<T>(dx);
  const float* g = gamma.data<float>();
  const float* sm = save_mean.data<float>();
  const float* sv = save_var.data<float>();
  float* dg = dgamma.data<float>();
  float* db = dbeta.data<float>();
  const double count = static_cast<double>(d.n * d.hw);
#pragma omp parallel for schedule(static)
  for (int64_t c = 0; c < d.c; ++c) {
    const float mean = sm[c];
    const double invstd = 1.0 / std::sqrt(static_cast<double>(sv[c]) + eps);
    // Pass 1: sum(dy) and sum(dy * (x - mean)); with a fused ReLU, dy is first masked by
    // y > 0 and the masked gradient is kept in dx for pass 2.
    double sum_dy = 0.0, sum_dy_xmu = 0.0;
    for (int64_t n = 0; n < d.n; ++n) {
      const int64_t off = (n * d.c + c) * d.hw;
      const T* xs = xp + off;
      const T* gs = gp + off;
      float s1 = 0.0f, s2 = 0.0f;
      if (yp) {
        const T* ys = yp + off;
        T* ds = dxp + off;
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
    // dx = gamma * invstd * (dy - mean(dy) - (x - mean) * invstd^2 * mean(dy * (x - mean)))
    const float a = static_cast<float>(g[c] * invstd);
    const float mdy = static_cast<float>(sum_dy / count);
    const float k = static_cast<float>(invstd * invstd * sum_dy_xmu / count);
    for (int64_t n = 0; n < d.n; ++n) {
      const int64_t off = (n * d.c + c) * d.hw;
      const T* xs = xp + off;
      const T* gs = yp ? dxp + off : gp + off;
      T* ds = dxp + off;
#pragma omp simd
      for (int64_t i = 0; i < d.hw; ++i) ds[i] = st(a * (ld(gs[i]) - mdy - (ld(xs[i]) - mean) * k), ds);
    }
    const float dgamma_c = static_cast<float>(sum_dy_xmu * invstd);
    const float dbeta_c = static_cast<float>(sum_dy);
    dg[c] = accumulate ? dg[c] + dgamma_c : dgamma_c;
    db[c] = accumulate ? db[c] + dbeta_c : dbeta_c;
  }
}


[[maybe_unused]] void bn_forward_training_entry(const Tensor& x, const Tensor& gamma, const Tensor& beta, double eps,
                                                double momentum, const Tensor& y, const Tensor& save_mean,
                                                const Tensor& save_var, const Tensor& running_mean,
                                                const Tensor& running_var, bool fuse_relu) {
  cpu::by_dtype(x.dtype(), [&](auto t) {
    bn_forward_training<decltype(t)>(x, gamma, beta, eps, momentum, y, save_mean, save_var, running_mean,
                                     running_var, fuse_relu);
  });
}

[[maybe_unused]] void bn_forward_inference_entry(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                                                 const Tensor& running_mean, const Tensor& running_var, double eps,
                                                 const Tensor& y, bool fuse_relu) {
  cpu::by_dtype(x.dtype(), [&](auto t) {
    bn_forward_inference<decltype(t)>(x, gamma, beta, running_mean, running_var, eps, y, fuse_relu);
  });
}

[[maybe_unused]] void bn_backward_entry(const Tensor& dy, const Tensor& x, const Tensor& gamma,
                                        const Tensor& save_mean, const Tensor& save_var, double eps,
                                        const Tensor& dx, const Tensor& dgamma, const Tensor& dbeta, bool accumulate,
                                        bool fuse_relu, const Tensor& y) {
  cpu::by_dtype(x.dtype(), [&](auto t) {
    bn_backward<decltype(t)>(dy, x, gamma, save_mean, save_var, eps, dx, dgamma, dbeta, accumulate, fuse_relu, y);
  });
}

}  // namespace
}  // namespace tandem::ops
