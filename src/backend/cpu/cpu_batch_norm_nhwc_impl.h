// Batch-norm kernels for channels_last x (NHWC memory: N*H*W rows of C contiguous values),
// included by cpu_batch_norm_impl.h and so built twice, for baseline x86-64 and for AVX-512,
// as the NCHW kernels are (see there for the linkage rules).
// Each OpenMP thread takes one contiguous block of rows and keeps C-length partial sums,
// vectorised across channels: float over kNhwcRowBlock rows, double across those blocks;
// the threads' sums are then added per channel in double (in thread order). The formulas are
// those of the NCHW kernels: the same shift (the channel's first value, row 0) for the
// one-pass statistics, biased save_var, unbiased running_var, the same dx expression; only
// the order of the additions differs. Per call the forward reads x twice (statistics,
// normalisation) and writes y once; the backward reads dy and x (and y with the fused ReLU)
// twice (the two sums, then dx) and writes dx once: the ReLU mask is recomputed from y in the
// second pass instead of being stored.
#pragma once

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "backend/cpu/cpu_batch_norm_common.h"
#include "backend/cpu/cpu_loops.h"
#include "tandem/ops.h"

namespace tandem::ops {
namespace {

using cpu::ld;
using cpu::st;

constexpr int64_t kNhwcRowBlock = 64;  // rows summed in float before a double add

struct Rows {
  int64_t rows, c;  // N*H*W rows of C values
};

Rows rows_of(const Tensor& x) {
  return {x.size(0) * x.size(2) * x.size(3), x.size(1)};
}

// Per-thread, per-channel sums over rows in double: part[t * 2C + c] and part[t * 2C + C + c].
class ThreadSums {
 public:
  explicit ThreadSums(int64_t c)
      : c_(c),
        part_(static_cast<size_t>(omp_get_max_threads()) * 2 * c, 0.0),
        blk_(static_cast<size_t>(omp_get_max_threads()) * 2 * c) {}
  double* sums(int t) { return part_.data() + t * 2 * c_; }
  float* block(int t) { return blk_.data() + t * 2 * c_; }
  // Adds thread t's sums over rows [begin, end): f(r, s1, s2) adds row r's terms into the
  // float block sums s1[0..C), s2[0..C).
  template <typename F>
  void run(int t, int64_t begin, int64_t end, F&& f) {
    double* p1 = sums(t);
    double* p2 = p1 + c_;
    float* s1 = block(t);
    float* s2 = s1 + c_;
    for (int64_t r0 = begin; r0 < end; r0 += kNhwcRowBlock) {
      std::fill(s1, s1 + 2 * c_, 0.0f);
      const int64_t r1 = std::min(end, r0 + kNhwcRowBlock);
      for (int64_t r = r0; r < r1; ++r) f(r, s1, s2);
#pragma omp simd
      for (int64_t c = 0; c < c_; ++c) {
        p1[c] += s1[c];
        p2[c] += s2[c];
      }
    }
  }
  // The totals of channel c over the first nt threads.
  void total(int64_t c, int nt, double& sum1, double& sum2) const {
    sum1 = sum2 = 0.0;
    for (int t = 0; t < nt; ++t) {
      sum1 += part_[t * 2 * c_ + c];
      sum2 += part_[t * 2 * c_ + c_ + c];
    }
  }

 private:
  int64_t c_;
  std::vector<double> part_;
  std::vector<float> blk_;
};

// Thread t's contiguous block of the `rows` rows (of nt threads).
void thread_rows(int64_t rows, int t, int nt, int64_t& begin, int64_t& end) {
  begin = rows * t / nt;
  end = rows * (t + 1) / nt;
}

// y = (x - mean) * a + b per channel, optionally clamped at 0, for rows [begin, end).
template <typename T>
void nhwc_normalize_rows(const T* x, T* y, int64_t nc, int64_t begin, int64_t end, const float* mean, const float* a,
                         const float* b, bool relu) {
  for (int64_t r = end - 1; r >= begin; --r) {  // backwards: the rows read last are in cache
    const T* xr = x + r * nc;
    T* yr = y + r * nc;
    if (relu) {
#pragma omp simd
      for (int64_t c = 0; c < nc; ++c) {
        const float v = (ld(xr[c]) - mean[c]) * a[c] + b[c];
        yr[c] = st(v <= 0.0f ? 0.0f : v, yr);  // NaN propagates
      }
    } else {
#pragma omp simd
      for (int64_t c = 0; c < nc; ++c) yr[c] = st((ld(xr[c]) - mean[c]) * a[c] + b[c], yr);
    }
  }
}

template <typename T>
void bn_nhwc_forward_training(const Tensor& x, const Tensor& gamma, const Tensor& beta, double eps, double momentum,
                              const Tensor& y, const Tensor& save_mean, const Tensor& save_var,
                              const Tensor& running_mean, const Tensor& running_var, bool fuse_relu) {
  const Rows d = rows_of(x);
  const int64_t nc = d.c;
  const BnForward<T> p(x, y, gamma, beta, save_mean, save_var, running_mean, running_var);
  const double count = static_cast<double>(d.rows);
  // The shift k: each channel's first value (as in the NCHW kernel, x[0, c, 0, 0]).
  std::vector<float> k(nc, 0.0f), meanf(nc), scale(nc);
  if (d.rows > 0)
    for (int64_t c = 0; c < nc; ++c) k[c] = ld(p.x[c]);
  ThreadSums sums(nc);
#pragma omp parallel
  {
    const int t = omp_get_thread_num(), nt = omp_get_num_threads();
    int64_t begin, end;
    thread_rows(d.rows, t, nt, begin, end);
    const float* kp = k.data();
    sums.run(t, begin, end, [&](int64_t r, float* s1, float* s2) {
      const T* xr = p.x + r * nc;
#pragma omp simd
      for (int64_t c = 0; c < nc; ++c) {
        const float v = ld(xr[c]) - kp[c];
        s1[c] += v;
        s2[c] += v * v;
      }
    });
#pragma omp barrier
#pragma omp for schedule(static)
    for (int64_t c = 0; c < nc; ++c) {
      double sum, sq;
      sums.total(c, nt, sum, sq);
      p.finish(c, k[c], sum, sq, count, eps, momentum, meanf[c], scale[c]);
    }
    // The implicit barrier of the loop above publishes meanf and scale.
    nhwc_normalize_rows(p.x, p.y, nc, begin, end, meanf.data(), scale.data(), p.beta, fuse_relu);
  }
}

template <typename T>
void bn_nhwc_forward_inference(const Tensor& x, const Tensor& gamma, const Tensor& beta, const Tensor& running_mean,
                               const Tensor& running_var, double eps, const Tensor& y, bool fuse_relu) {
  const Rows d = rows_of(x);
  const int64_t nc = d.c;
  const float* g = gamma.data<float>();
  const float* rv = running_var.data<float>();
  std::vector<float> scale(nc);
  for (int64_t c = 0; c < nc; ++c)
    scale[c] = static_cast<float>(1.0 / std::sqrt(static_cast<double>(rv[c]) + eps) * g[c]);
  const T* xp = cpu::elems<T>(x);
  T* yp = cpu::elems<T>(y);
  const float* rm = running_mean.data<float>();
  const float* bt = beta.data<float>();
#pragma omp parallel
  {
    int64_t begin, end;
    thread_rows(d.rows, omp_get_thread_num(), omp_get_num_threads(), begin, end);
    nhwc_normalize_rows(xp, yp, nc, begin, end, rm, scale.data(), bt, fuse_relu);
  }
}

template <typename T>
void bn_nhwc_backward(const Tensor& dy, const Tensor& x, const Tensor& gamma, const Tensor& save_mean,
                      const Tensor& save_var, double eps, const Tensor& dx, const Tensor& dgamma,
                      const Tensor& dbeta, bool accumulate, bool fuse_relu, const Tensor& y) {
  const Rows d = rows_of(x);
  const int64_t nc = d.c;
  const BnBackward<T> p(dy, x, gamma, save_mean, save_var, dx, dgamma, dbeta, fuse_relu, y);
  const float* sm = p.save_mean;
  const double count = static_cast<double>(d.rows);
  std::vector<float> a(nc), mdy(nc), kk(nc);
  ThreadSums sums(nc);
#pragma omp parallel
  {
    const int t = omp_get_thread_num(), nt = omp_get_num_threads();
    int64_t begin, end;
    thread_rows(d.rows, t, nt, begin, end);
    // Pass 1: sum(dy) and sum(dy * (x - mean)), dy masked by y > 0 with a fused ReLU.
    sums.run(t, begin, end, [&](int64_t r, float* s1, float* s2) {
      const T* xr = p.x + r * nc;
      const T* gr = p.dy + r * nc;
      if (p.y) {
        const T* yr = p.y + r * nc;
#pragma omp simd
        for (int64_t c = 0; c < nc; ++c) {
          const float gi = ld(yr[c]) <= 0.0f ? 0.0f : ld(gr[c]);
          s1[c] += gi;
          s2[c] += gi * (ld(xr[c]) - sm[c]);
        }
      } else {
#pragma omp simd
        for (int64_t c = 0; c < nc; ++c) {
          s1[c] += ld(gr[c]);
          s2[c] += ld(gr[c]) * (ld(xr[c]) - sm[c]);
        }
      }
    });
#pragma omp barrier
#pragma omp for schedule(static)
    for (int64_t c = 0; c < nc; ++c) {
      double sum_dy, sum_dy_xmu;
      sums.total(c, nt, sum_dy, sum_dy_xmu);
      p.finish(c, sum_dy, sum_dy_xmu, count, eps, accumulate, a[c], mdy[c], kk[c]);
    }
    // Pass 2 (after the loop's implicit barrier): dx, element by element, so dx may alias dy.
    const float *ap = a.data(), *mp = mdy.data(), *kp = kk.data();
    for (int64_t r = end - 1; r >= begin; --r) {  // backwards, as in nhwc_normalize_rows
      const T* xr = p.x + r * nc;
      const T* gr = p.dy + r * nc;
      T* dr = p.dx + r * nc;
      if (p.y) {
        const T* yr = p.y + r * nc;
#pragma omp simd
        for (int64_t c = 0; c < nc; ++c) {
          const float gi = ld(yr[c]) <= 0.0f ? 0.0f : ld(gr[c]);
          dr[c] = st(ap[c] * (gi - mp[c] - (ld(xr[c]) - sm[c]) * kp[c]), dr);
        }
      } else {
#pragma omp simd
        for (int64_t c = 0; c < nc; ++c) dr[c] = st(ap[c] * (ld(gr[c]) - mp[c] - (ld(xr[c]) - sm[c]) * kp[c]), dr);
      }
    }
  }
}

}  // namespace
}  // namespace tandem::ops
