// float64 references of the transformer ops (written from the formulas, not from the
// kernels), with helpers to build f32/bf16 test tensors and compare against them. The
// references' own backward passes are checked by central finite differences in the tests.
// Layouts as in the ops: x [N, C], qkv [B, T, 3C], y [B, T, C], lse [B, H, T], h [N, C],
// w [V, C].
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <vector>

#include "tandem/ops.h"
#include "tandem/rng.h"
#include "tandem/tensor.h"

namespace tandem::testing::ref {

using Vec = std::vector<double>;

/// n uniforms in [lo, hi) from Philox(seed), rounded to `dt` (f32 or bf16) so that the
/// reference sees exactly the values the kernel reads.
inline Vec random_values(int64_t n, uint64_t seed, DType dt, double lo = -1.0, double hi = 1.0) {
  Philox rng(seed, 11);
  Vec v(static_cast<size_t>(n));
  for (auto& x : v) {
    const float f = static_cast<float>(lo + (hi - lo) * rng.uniform());
    x = dt == DType::bf16 ? bf16_to_float(float_to_bf16(f)) : f;
  }
  return v;
}

/// A host tensor of `shape` and dtype `dt` holding v (rounded to dt).
inline Tensor tensor_of(const Vec& v, const Shape& shape, DType dt) {
  std::vector<float> f(v.begin(), v.end());
  Tensor t = Tensor::from_vector(shape, f);
  return dt == DType::f32 ? t : t.to(dt);
}

/// The elements of a host tensor as doubles.
inline Vec values_of(const Tensor& t) {
  Vec v(static_cast<size_t>(t.numel()));
  for (int64_t i = 0; i < t.numel(); ++i) v[i] = t.item(i);
  return v;
}

inline double max_abs(const Vec& v) {
  double m = 0.0;
  for (double x : v) m = std::max(m, std::fabs(x));
  return m;
}

/// max |got - want| / max(max |want|, floor): the error relative to the largest reference value.
inline double rel_err(const Vec& got, const Vec& want, double floor = 1e-30) {
  EXPECT_EQ(got.size(), want.size());
  double e = 0.0;
  for (size_t i = 0; i < std::min(got.size(), want.size()); ++i) {
    const double d = std::fabs(got[i] - want[i]);
    e = std::isnan(d) ? INFINITY : std::max(e, d);
  }
  return e / std::max(max_abs(want), floor);
}

/// Passes when every |got - want| <= rel * |want| + abs (element-wise bound, e.g. one bf16
/// rounding of each output plus an absolute accumulation term).
inline ::testing::AssertionResult within(const Vec& got, const Vec& want, double rel, double abs) {
  if (got.size() != want.size()) return ::testing::AssertionFailure() << "size " << got.size() << " vs " << want.size();
  for (size_t i = 0; i < got.size(); ++i) {
    const double bound = rel * std::fabs(want[i]) + abs;
    if (!(std::fabs(got[i] - want[i]) <= bound))
      return ::testing::AssertionFailure() << "element " << i << ": " << got[i] << " vs " << want[i] << " (bound "
                                           << bound << ")";
  }
  return ::testing::AssertionSuccess();
}

/// d/dx of f at x by central differences of step eps, one coordinate at a time.
inline Vec finite_diff(const std::function<double(const Vec&)>& f, Vec x, double eps = 1e-6) {
  Vec g(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    const double x0 = x[i];
    x[i] = x0 + eps;
    const double fp = f(x);
    x[i] = x0 - eps;
    const double fm = f(x);
    x[i] = x0;
    g[i] = (fp - fm) / (2 * eps);
  }
  return g;
}

/// a followed by b.
inline Vec concat(Vec a, const Vec& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

/// f() run with 1, 2 and 3 cpu threads (the thread count restored afterwards), for tests of
/// results that must not depend on it.
template <typename F>
auto with_1_2_3_threads(F f) {
  const int before = ops::get_num_threads();
  std::vector<decltype(f())> runs;
  for (int threads : {1, 2, 3}) {
    ops::set_num_threads(threads);
    runs.push_back(f());
  }
  ops::set_num_threads(before);
  return runs;
}

inline double dot(const Vec& a, const Vec& b) {
  double s = 0.0;
  for (size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}

// ---- layer norm over rows of x [n, c] ----
struct LayerNormOut {
  Vec y, mean, rstd;
};
inline LayerNormOut layer_norm(const Vec& x, const Vec& g, const Vec& b, int64_t n, int64_t c, double eps) {
  LayerNormOut o{Vec(x.size()), Vec(n), Vec(n)};
  for (int64_t i = 0; i < n; ++i) {
    double m = 0.0, v = 0.0;
    for (int64_t j = 0; j < c; ++j) m += x[i * c + j];
    m /= c;
    for (int64_t j = 0; j < c; ++j) v += (x[i * c + j] - m) * (x[i * c + j] - m);
    const double r = 1.0 / std::sqrt(v / c + eps);
    for (int64_t j = 0; j < c; ++j) o.y[i * c + j] = (x[i * c + j] - m) * r * g[j] + (b.empty() ? 0.0 : b[j]);
    o.mean[i] = m;
    o.rstd[i] = r;
  }
  return o;
}
struct LayerNormGrad {
  Vec dx, dgamma, dbeta;
};
inline LayerNormGrad layer_norm_backward(const Vec& dy, const Vec& x, const Vec& g, int64_t n, int64_t c, double eps) {
  const LayerNormOut f = layer_norm(x, g, {}, n, c, eps);
  LayerNormGrad o{Vec(x.size()), Vec(c, 0.0), Vec(c, 0.0)};
  for (int64_t i = 0; i < n; ++i) {
    double s1 = 0.0, s2 = 0.0;
    for (int64_t j = 0; j < c; ++j) {
      const double xh = (x[i * c + j] - f.mean[i]) * f.rstd[i];
      s1 += dy[i * c + j] * g[j];
      s2 += dy[i * c + j] * g[j] * xh;
      o.dgamma[j] += dy[i * c + j] * xh;
      o.dbeta[j] += dy[i * c + j];
    }
    for (int64_t j = 0; j < c; ++j) {
      const double xh = (x[i * c + j] - f.mean[i]) * f.rstd[i];
      o.dx[i * c + j] = f.rstd[i] * (dy[i * c + j] * g[j] - s1 / c - xh * s2 / c);
    }
  }
  return o;
}

// ---- GELU, tanh form ----
inline double gelu(double x) {
  const double k = std::sqrt(2.0 / M_PI);
  return 0.5 * x * (1.0 + std::tanh(k * (x + 0.044715 * x * x * x)));
}
inline double gelu_grad(double x) {
  const double k = std::sqrt(2.0 / M_PI);
  const double t = std::tanh(k * (x + 0.044715 * x * x * x));
  return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * k * (1.0 + 3.0 * 0.044715 * x * x);
}

// ---- causal self-attention ----
struct AttentionDims {
  int64_t b, t, c, h;
  int64_t d() const { return c / h; }
};
struct AttentionOut {
  Vec y, lse;
};
inline AttentionOut attention(const Vec& qkv, const AttentionDims& s) {
  const int64_t D = s.d(), C3 = 3 * s.c;
  AttentionOut o{Vec(s.b * s.t * s.c, 0.0), Vec(s.b * s.h * s.t)};
  const double scale = 1.0 / std::sqrt(static_cast<double>(D));
  for (int64_t b = 0; b < s.b; ++b)
    for (int64_t h = 0; h < s.h; ++h)
      for (int64_t i = 0; i < s.t; ++i) {
        const double* q = &qkv[(b * s.t + i) * C3 + h * D];
        Vec sc(i + 1);
        double mx = -INFINITY;
        for (int64_t j = 0; j <= i; ++j) {
          const double* k = &qkv[(b * s.t + j) * C3 + s.c + h * D];
          double a = 0.0;
          for (int64_t d = 0; d < D; ++d) a += q[d] * k[d];
          sc[j] = a * scale;
          mx = std::max(mx, sc[j]);
        }
        double sum = 0.0;
        for (double& v : sc) sum += (v = std::exp(v - mx));
        for (int64_t j = 0; j <= i; ++j) {
          const double* v = &qkv[(b * s.t + j) * C3 + 2 * s.c + h * D];
          for (int64_t d = 0; d < D; ++d) o.y[(b * s.t + i) * s.c + h * D + d] += sc[j] / sum * v[d];
        }
        o.lse[(b * s.h + h) * s.t + i] = mx + std::log(sum);
      }
  return o;
}
/// dqkv from dy, by the chain rule through the softmax (written without the lse trick).
inline Vec attention_backward(const Vec& dy, const Vec& qkv, const AttentionDims& s) {
  const int64_t D = s.d(), C3 = 3 * s.c;
  const double scale = 1.0 / std::sqrt(static_cast<double>(D));
  Vec dq(qkv.size(), 0.0);
  for (int64_t b = 0; b < s.b; ++b)
    for (int64_t h = 0; h < s.h; ++h)
      for (int64_t i = 0; i < s.t; ++i) {
        auto at = [&](int64_t t, int64_t part) { return (b * s.t + t) * C3 + part * s.c + h * D; };
        Vec p(i + 1), dp(i + 1);
        double mx = -INFINITY, sum = 0.0;
        for (int64_t j = 0; j <= i; ++j) {
          double a = 0.0;
          for (int64_t d = 0; d < D; ++d) a += qkv[at(i, 0) + d] * qkv[at(j, 1) + d];
          p[j] = a * scale;
          mx = std::max(mx, p[j]);
        }
        for (double& v : p) sum += (v = std::exp(v - mx));
        for (double& v : p) v /= sum;
        const double* g = &dy[(b * s.t + i) * s.c + h * D];
        double dsum = 0.0;
        for (int64_t j = 0; j <= i; ++j) {
          double a = 0.0;
          for (int64_t d = 0; d < D; ++d) {
            a += g[d] * qkv[at(j, 2) + d];
            dq[at(j, 2) + d] += p[j] * g[d];  // dV
          }
          dp[j] = a;
          dsum += p[j] * a;
        }
        for (int64_t j = 0; j <= i; ++j) {
          const double ds = p[j] * (dp[j] - dsum) * scale;
          for (int64_t d = 0; d < D; ++d) {
            dq[at(i, 0) + d] += ds * qkv[at(j, 1) + d];
            dq[at(j, 1) + d] += ds * qkv[at(i, 0) + d];
          }
        }
      }
  return dq;
}

// ---- classifier + cross-entropy (mean over rows whose target is in [0, V)) ----
struct ClassifierOut {
  double loss = 0.0;
  int64_t counted = 0, correct = 0;
  Vec dh, dw;
};
inline ClassifierOut classifier(const Vec& h, const Vec& w, const std::vector<int64_t>& tgt, int64_t n, int64_t c,
                                int64_t v) {
  ClassifierOut o{0.0, 0, 0, Vec(n * c, 0.0), Vec(v * c, 0.0)};
  for (int64_t i = 0; i < n; ++i)
    if (tgt[i] >= 0 && tgt[i] < v) ++o.counted;
  for (int64_t i = 0; i < n; ++i) {
    if (tgt[i] < 0 || tgt[i] >= v) continue;
    Vec z(v);
    double mx = -INFINITY;
    int64_t arg = 0;
    for (int64_t k = 0; k < v; ++k) {
      double a = 0.0;
      for (int64_t j = 0; j < c; ++j) a += h[i * c + j] * w[k * c + j];
      z[k] = a;
      if (a > mx) mx = a, arg = k;
    }
    double sum = 0.0;
    for (double x : z) sum += std::exp(x - mx);
    o.loss += mx + std::log(sum) - z[tgt[i]];
    o.correct += arg == tgt[i] ? 1 : 0;
    for (int64_t k = 0; k < v; ++k) {
      const double g = (std::exp(z[k] - mx) / sum - (k == tgt[i] ? 1.0 : 0.0)) / o.counted;
      for (int64_t j = 0; j < c; ++j) {
        o.dh[i * c + j] += g * w[k * c + j];
        o.dw[k * c + j] += g * h[i * c + j];
      }
    }
  }
  o.loss /= static_cast<double>(o.counted);
  return o;
}

}  // namespace tandem::testing::ref
