// The float64 reference layers and resnet18-cifar of f64_reference.h.
#include "f64_reference.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace tandem::testing::f64 {
namespace {

int64_t out_size(int64_t in, int64_t k, int64_t stride, int64_t pad) { return (in + 2 * pad - k) / stride + 1; }

// The geometry of one convolution: x [N, C, H, W], w [K, C, R, S], y [N, K, P, Q].
struct Geom {
  int64_t n, c, h, w, k, r, s, p, q, stride, pad;
  int64_t crs() const { return c * r * s; }
  int64_t npq() const { return n * p * q; }
};

Geom geom(const T4& x, int64_t k, int64_t r, int64_t s, int64_t stride, int64_t pad) {
  return {x.n, x.c, x.h, x.w, k, r, s, out_size(x.h, r, stride, pad), out_size(x.w, s, stride, pad), stride, pad};
}

// col[(c, r, s)][(n, p, q)] = x[n, c, p * stride - pad + r, q * stride - pad + s], 0 in the
// padding.
std::vector<double> im2col(const Geom& g, const std::vector<double>& x) {
  std::vector<double> col(size_t(g.crs() * g.npq()));
#pragma omp parallel for schedule(static)
  for (int64_t row = 0; row < g.crs(); ++row) {
    const int64_t c = row / (g.r * g.s), r = row / g.s % g.r, s = row % g.s;
    double* out = &col[size_t(row * g.npq())];
    for (int64_t n = 0; n < g.n; ++n)
      for (int64_t i = 0; i < g.p; ++i) {
        const int64_t ih = i * g.stride - g.pad + r;
        for (int64_t j = 0; j < g.q; ++j) {
          const int64_t iw = j * g.stride - g.pad + s;
          const bool in = ih >= 0 && ih < g.h && iw >= 0 && iw < g.w;
          out[(n * g.p + i) * g.q + j] = in ? x[size_t(((n * g.c + c) * g.h + ih) * g.w + iw)] : 0.0;
        }
      }
  }
  return col;
}

// The adjoint of im2col: dx += col scattered back (per input channel, so no two threads add
// to one element).
void col2im(const Geom& g, const std::vector<double>& col, std::vector<double>& dx) {
#pragma omp parallel for schedule(static)
  for (int64_t c = 0; c < g.c; ++c)
    for (int64_t rs = 0; rs < g.r * g.s; ++rs) {
      const int64_t r = rs / g.s, s = rs % g.s;
      const double* in = &col[size_t((c * g.r * g.s + rs) * g.npq())];
      for (int64_t n = 0; n < g.n; ++n)
        for (int64_t i = 0; i < g.p; ++i) {
          const int64_t ih = i * g.stride - g.pad + r;
          if (ih < 0 || ih >= g.h) continue;
          for (int64_t j = 0; j < g.q; ++j) {
            const int64_t iw = j * g.stride - g.pad + s;
            if (iw >= 0 && iw < g.w) dx[size_t(((n * g.c + c) * g.h + ih) * g.w + iw)] += in[(n * g.p + i) * g.q + j];
          }
        }
    }
}

// c[m][n] = sum_k a[m][k] b[k][n], row-major, in tiles of 8 rows by 128 columns.
std::vector<double> gemm(const std::vector<double>& a, const std::vector<double>& b, int64_t m, int64_t k,
                         int64_t n) {
  constexpr int64_t kRows = 8, kCols = 128;
  std::vector<double> c(size_t(m * n));
  const int64_t tiles_m = (m + kRows - 1) / kRows, tiles_n = (n + kCols - 1) / kCols;
#pragma omp parallel for schedule(static)
  for (int64_t t = 0; t < tiles_m * tiles_n; ++t) {
    const int64_t i0 = t / tiles_n * kRows, j0 = t % tiles_n * kCols;
    const int64_t rows = std::min(kRows, m - i0), cols = std::min(kCols, n - j0);
    double acc[kRows][kCols] = {};
    for (int64_t q = 0; q < k; ++q) {
      const double* br = &b[size_t(q * n + j0)];
      for (int64_t i = 0; i < rows; ++i) {
        const double av = a[size_t((i0 + i) * k + q)];
        double* ai = acc[i];
#pragma omp simd
        for (int64_t j = 0; j < cols; ++j) ai[j] += av * br[j];
      }
    }
    for (int64_t i = 0; i < rows; ++i) std::copy_n(acc[i], cols, &c[size_t((i0 + i) * n + j0)]);
  }
  return c;
}

// [N, K, P*Q] -> [K, N*P*Q] (`back`: the other way).
std::vector<double> kmajor(const std::vector<double>& v, int64_t n, int64_t k, int64_t pq, bool back = false) {
  std::vector<double> out(v.size());
  for (int64_t i = 0; i < n; ++i)
    for (int64_t o = 0; o < k; ++o) {
      const size_t nk = size_t((i * k + o) * pq), kn = size_t((o * n + i) * pq);
      std::copy_n(&v[back ? kn : nk], pq, &out[back ? nk : kn]);
    }
  return out;
}

std::vector<double> transpose(const std::vector<double>& v, int64_t rows, int64_t cols) {
  std::vector<double> t(v.size());
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) t[size_t(j * rows + i)] = v[size_t(i * cols + j)];
  return t;
}

}  // namespace

// The three as matrix products over im2col's matrix (in double the order of the sums does
// not matter at the precision the tests need).
T4 conv_forward(const T4& x, const T4& w, int64_t stride, int64_t pad) {
  if (x.c != w.c) throw std::invalid_argument("f64 conv_forward: channels of x and w differ");
  const Geom g = geom(x, w.n, w.h, w.w, stride, pad);
  T4 y(g.n, g.k, g.p, g.q);
  y.v = kmajor(gemm(w.v, im2col(g, x.v), g.k, g.crs(), g.npq()), g.n, g.k, g.p * g.q, true);
  return y;
}

T4 conv_backward_data(const T4& dy, const T4& w, int64_t stride, int64_t pad, int64_t h, int64_t wd) {
  T4 dx(dy.n, w.c, h, wd);
  const Geom g = geom(dx, w.n, w.h, w.w, stride, pad);
  col2im(g, gemm(transpose(w.v, g.k, g.crs()), kmajor(dy.v, g.n, g.k, g.p * g.q), g.crs(), g.k, g.npq()), dx.v);
  return dx;
}

T4 conv_backward_weights(const T4& x, const T4& dy, int64_t stride, int64_t pad, int64_t r, int64_t s) {
  const Geom g = geom(x, dy.c, r, s, stride, pad);
  T4 dw(g.k, g.c, g.r, g.s);
  dw.v = gemm(kmajor(dy.v, g.n, g.k, g.p * g.q), transpose(im2col(g, x.v), g.crs(), g.npq()), g.k, g.npq(), g.crs());
  return dw;
}

T4 bn_forward(const T4& x, const std::vector<double>& gamma, const std::vector<double>& beta, double eps,
              BnCache& cache) {
  const int64_t hw = x.h * x.w, m = x.n * hw;
  cache.mean.assign(size_t(x.c), 0.0);
  cache.inv_std.assign(size_t(x.c), 0.0);
  T4 y(x.n, x.c, x.h, x.w);
  for (int64_t c = 0; c < x.c; ++c) {
    double sum = 0, sq = 0;
    for (int64_t n = 0; n < x.n; ++n)
      for (int64_t i = 0; i < hw; ++i) sum += x.v[size_t((n * x.c + c) * hw + i)];
    const double mean = sum / double(m);
    for (int64_t n = 0; n < x.n; ++n)
      for (int64_t i = 0; i < hw; ++i) {
        const double d = x.v[size_t((n * x.c + c) * hw + i)] - mean;
        sq += d * d;
      }
    const double inv = 1.0 / std::sqrt(sq / double(m) + eps);
    cache.mean[size_t(c)] = mean;
    cache.inv_std[size_t(c)] = inv;
    for (int64_t n = 0; n < x.n; ++n)
      for (int64_t i = 0; i < hw; ++i) {
        const size_t at = size_t((n * x.c + c) * hw + i);
        y.v[at] = gamma[size_t(c)] * (x.v[at] - mean) * inv + beta[size_t(c)];
      }
  }
  return y;
}

T4 bn_backward(const T4& dy, const T4& x, const std::vector<double>& gamma, const BnCache& cache,
               std::vector<double>& dgamma, std::vector<double>& dbeta) {
  const int64_t hw = x.h * x.w, m = x.n * hw;
  dgamma.assign(size_t(x.c), 0.0);
  dbeta.assign(size_t(x.c), 0.0);
  T4 dx(x.n, x.c, x.h, x.w);
  for (int64_t c = 0; c < x.c; ++c) {
    const double mean = cache.mean[size_t(c)], inv = cache.inv_std[size_t(c)];
    double sdy = 0, sdyx = 0;
    for (int64_t n = 0; n < x.n; ++n)
      for (int64_t i = 0; i < hw; ++i) {
        const size_t at = size_t((n * x.c + c) * hw + i);
        sdy += dy.v[at];
        sdyx += dy.v[at] * (x.v[at] - mean) * inv;
      }
    dbeta[size_t(c)] = sdy;
    dgamma[size_t(c)] = sdyx;
    const double k = gamma[size_t(c)] * inv / double(m);
    for (int64_t n = 0; n < x.n; ++n)
      for (int64_t i = 0; i < hw; ++i) {
        const size_t at = size_t((n * x.c + c) * hw + i);
        dx.v[at] = k * (double(m) * dy.v[at] - sdy - (x.v[at] - mean) * inv * sdyx);
      }
  }
  return dx;
}

namespace {

using Params = std::map<std::string, std::vector<double>>;
using Channels = std::vector<double>;  // one value per channel

const std::vector<double>& param(const Params& p, const std::string& name) {
  auto it = p.find(name);
  if (it == p.end()) throw std::invalid_argument("f64 resnet18-cifar: no parameter '" + name + "'");
  return it->second;
}

T4 weight(const Params& p, const std::string& name, int64_t k, int64_t c, int64_t r) {
  T4 w(k, c, r, r);
  w.v = param(p, name);
  if (int64_t(w.v.size()) != k * c * r * r)
    throw std::invalid_argument("f64 resnet18-cifar: '" + name + "' has the wrong size");
  return w;
}

// Each channel's mean square.
Channels mean_square(const T4& t) {
  Channels m(size_t(t.c), 0.0);
  const int64_t hw = t.h * t.w;
  for (int64_t n = 0; n < t.n; ++n)
    for (int64_t c = 0; c < t.c; ++c)
      for (int64_t i = 0; i < hw; ++i) m[size_t(c)] += t.v[size_t((n * t.c + c) * hw + i)] * t.v[size_t((n * t.c + c) * hw + i)];
  for (double& e : m) e /= double(t.n * hw);
  return m;
}


// The bookkeeping of a backward: A (accumulation, relative variance), the decisions, and
// each gradient with its tolerance as it is computed.
struct Errors {
  double a = 0;
  const std::vector<std::vector<uint8_t>>* masks = nullptr;
  Resnet18CifarResult* out = nullptr;
  void grad(const std::string& name, std::vector<double> g, double own_var) {
    out->tolerance[name] = kLambda * std::sqrt(a + own_var);
    out->grads[name] = std::move(g);
  }
};

// A ReLU: its input p and each channel's fp32 error variance there.
struct Relu {
  int index = 0;  // in relu_names() order
  T4 p, y;        // input, relu(p)
  Channels var;
  void forward(const T4& in, const Channels& v, int i) {
    index = i;
    p = in;
    var = v;
    y = in;
    for (double& e : y.v) e = std::max(e, 0.0);
  }
  double sd_at(size_t i) const { return std::sqrt(var[size_t((int64_t(i) / (p.h * p.w)) % p.c)]); }
  // dy masked by the decisions: float64's (y > 0) or the run's.
  T4 backward(const T4& dy, Errors& e) const {
    T4 g = dy;
    const std::vector<uint8_t>* m = e.masks ? &(*e.masks)[size_t(index)] : nullptr;
    if (m && m->size() != g.v.size())
      throw std::invalid_argument("f64 resnet18-cifar: mask " + std::to_string(index) + " has the wrong size");
    for (size_t i = 0; i < g.v.size(); ++i) {
      const bool on = y.v[i] > 0;
      const double sd = sd_at(i);
      if (m) {
        if (bool((*m)[i]) != on) {
          ++e.out->flipped;
          e.out->flipped_max_sd = std::max(e.out->flipped_max_sd, sd > 0 ? std::fabs(p.v[i]) / sd : HUGE_VAL);
        }
        if (!(*m)[i]) g.v[i] = 0;
      } else {
        // A normal error's tail beyond |p|: 0.5 erfc(|p| / (sd sqrt 2)).
        if (sd > 0) e.out->expected_flips += 0.5 * std::erfc(std::fabs(p.v[i]) / (sd * std::sqrt(2.0)));
        if (!on) g.v[i] = 0;
      }
    }
    return g;
  }
};

// A convolution followed by its batch norm, with what the backward needs.
struct ConvBn {
  std::string conv, bn;
  int64_t stride = 1, pad = 0;
  T4 w, x, z;  // weight, input, convolution output
  BnCache cache;
  // y = bn(conv(x)); var: x's per-channel error variance in, y's out; a: the forward's A.
  T4 forward(const Params& p, const T4& in, int64_t k, int64_t r, Channels& var, double& a) {
    w = weight(p, conv, k, in.c, r);
    x = in;
    z = conv_forward(in, w, stride, pad);
    const double k_sum = double(in.c * r * r), m = double(z.n * z.h * z.w);
    const Channels msz = mean_square(z);
    Channels vz(size_t(k), 0.0);
    for (int64_t o = 0; o < k; ++o) {
      for (int64_t c = 0; c < in.c; ++c)
        for (int64_t q = 0; q < r * r; ++q) {
          const double wv = w.v[size_t((o * in.c + c) * r * r + q)];
          vz[size_t(o)] += wv * wv * var[size_t(c)];
        }
      vz[size_t(o)] += sum_rel_var(k_sum) * msz[size_t(o)];
    }
    const std::vector<double>& gamma = param(p, bn + ".weight");
    T4 y = bn_forward(z, gamma, param(p, bn + ".bias"), 1e-5, cache);
    const Channels msy = mean_square(y);
    var.assign(size_t(k), 0.0);
    for (int64_t o = 0; o < k; ++o) {
      const double s = gamma[size_t(o)] * cache.inv_std[size_t(o)];
      var[size_t(o)] = s * s * vz[size_t(o)] + sum_rel_var(0) * msy[size_t(o)];
    }
    a += sum_rel_var(k_sum) + 2 * sum_rel_var(m);  // the convolution, the mean and variance
    return y;
  }
  T4 backward(const Params& p, const T4& dy, Errors& e) const {
    std::vector<double> dgamma, dbeta;
    const T4 dz = bn_backward(dy, z, param(p, bn + ".weight"), cache, dgamma, dbeta);
    e.a += sum_rel_var(double(z.n * z.h * z.w));
    e.grad(bn + ".weight", dgamma, 0);
    e.grad(bn + ".bias", dbeta, 0);
    const T4 dw = conv_backward_weights(x, dz, stride, pad, w.h, w.w);
    e.grad(conv, dw.v, sum_rel_var(double(dz.n * dz.h * dz.w)));
    T4 dx = conv_backward_data(dz, w, stride, pad, x.h, x.w);
    e.a += sum_rel_var(double(w.n * w.h * w.w));
    return dx;
  }
};

struct Block {
  ConvBn c1, c2, ds;
  bool has_ds = false;
  Relu r1, r2;  // after bn1; after the add
  T4 forward(const Params& p, const std::string& pre, const T4& x, int64_t planes, int64_t stride, Channels& var,
             double& a, int relu_index) {
    c1 = {pre + "conv1.weight", pre + "bn1", stride, 1, {}, {}, {}, {}};
    c2 = {pre + "conv2.weight", pre + "bn2", 1, 1, {}, {}, {}, {}};
    Channels v1 = var;
    const T4 b1 = c1.forward(p, x, planes, 3, v1, a);
    r1.forward(b1, v1, relu_index);
    T4 sum = c2.forward(p, r1.y, planes, 3, v1, a);
    has_ds = stride != 1 || x.c != planes;
    Channels vs = var;
    if (has_ds) {
      ds = {pre + "downsample.0.weight", pre + "downsample.1", stride, 0, {}, {}, {}, {}};
      const T4 sc = ds.forward(p, x, planes, 1, vs, a);
      for (size_t i = 0; i < sum.v.size(); ++i) sum.v[i] += sc.v[i];
    } else {
      for (size_t i = 0; i < sum.v.size(); ++i) sum.v[i] += x.v[i];
    }
    const Channels ms = mean_square(sum);
    var.assign(size_t(planes), 0.0);
    for (int64_t c = 0; c < planes; ++c)
      var[size_t(c)] = v1[size_t(c)] + vs[size_t(c)] + sum_rel_var(0) * ms[size_t(c)];
    r2.forward(sum, var, relu_index + 1);
    return r2.y;
  }
  // The shortcut first, then the body (as nn::Residual does).
  T4 backward(const Params& p, const T4& dout, Errors& e) const {
    const T4 g = r2.backward(dout, e);
    const double a0 = e.a;
    const T4 dsc = has_ds ? ds.backward(p, g, e) : g;
    const double a_sc = e.a;
    e.a = a0;
    T4 dx = c1.backward(p, r1.backward(c2.backward(p, g, e), e), e);
    e.a = std::max(e.a, a_sc);
    for (size_t i = 0; i < dx.v.size(); ++i) dx.v[i] += dsc.v[i];
    return dx;
  }
};

}  // namespace

struct Resnet18Cifar::Impl {
  Params p;
  std::vector<int64_t> labels;
  ConvBn stem{"conv1.weight", "bn1", 1, 1, {}, {}, {}, {}};
  Relu r0;
  std::vector<Block> blocks = std::vector<Block>(8);
  T4 h;  // the last block's output
  std::vector<double> feat, logits;
  double a = 0;  // the forward's A
};

std::vector<std::string> Resnet18Cifar::relu_names() {
  std::vector<std::string> names{"bn1"};
  for (int layer = 1; layer <= 4; ++layer)
    for (int b = 0; b < 2; ++b) {
      const std::string blk = "layer" + std::to_string(layer) + "." + std::to_string(b);
      names.push_back(blk + ".bn1");
      names.push_back(blk);
    }
  return names;
}

Resnet18Cifar::Resnet18Cifar(const Params& params, const T4& x, const std::vector<int64_t>& labels)
    : impl_(std::make_unique<Impl>()) {
  Impl& m = *impl_;
  m.p = params;
  m.labels = labels;
  Channels var(size_t(x.c), 0.0);  // the input is exact
  m.r0.forward(m.stem.forward(m.p, x, 64, 3, var, m.a), var, 0);
  T4 h = m.r0.y;
  for (int layer = 0; layer < 4; ++layer)
    for (int b = 0; b < 2; ++b) {
      const std::string pre = "layer" + std::to_string(layer + 1) + "." + std::to_string(b) + ".";
      const int i = layer * 2 + b;
      h = m.blocks[size_t(i)].forward(m.p, pre, h, int64_t{64} << layer, b == 0 && layer > 0 ? 2 : 1, var, m.a,
                                      1 + 2 * i);
    }
  // Global average pool and fc.
  const int64_t n = h.n, c = h.c, hw = h.h * h.w;
  const std::vector<double>& fw = param(m.p, "fc.weight");
  const std::vector<double>& fb = param(m.p, "fc.bias");
  const int64_t k = int64_t(fb.size());
  m.feat.assign(size_t(n * c), 0.0);
  m.logits.assign(size_t(n * k), 0.0);
  for (int64_t i = 0; i < n * c; ++i) {
    double s = 0;
    for (int64_t j = 0; j < hw; ++j) s += h.v[size_t(i * hw + j)];
    m.feat[size_t(i)] = s / double(hw);
  }
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < k; ++j) {
      double s = fb[size_t(j)];
      for (int64_t q = 0; q < c; ++q) s += m.feat[size_t(i * c + q)] * fw[size_t(j * c + q)];
      m.logits[size_t(i * k + j)] = s;
    }
  m.a += sum_rel_var(double(hw)) + sum_rel_var(double(c));
  m.h = std::move(h);
}

Resnet18Cifar::~Resnet18Cifar() = default;

Resnet18CifarResult Resnet18Cifar::backward(const std::vector<std::vector<uint8_t>>* masks) const {
  const Impl& m = *impl_;
  if (masks && masks->size() != relu_names().size())
    throw std::invalid_argument("f64 resnet18-cifar: expected " + std::to_string(relu_names().size()) + " masks");
  Resnet18CifarResult out;
  Errors e;
  e.a = m.a;
  e.masks = masks;
  e.out = &out;
  e.grad("logits", m.logits, 0);
  // Softmax cross-entropy, mean over the batch.
  const int64_t n = m.h.n, c = m.h.c, hw = m.h.h * m.h.w;
  const std::vector<double>& fw = param(m.p, "fc.weight");
  const int64_t k = int64_t(param(m.p, "fc.bias").size());
  std::vector<double> dl(size_t(n * k));
  for (int64_t i = 0; i < n; ++i) {
    const double* l = &m.logits[size_t(i * k)];
    double mx = l[0], z = 0;
    for (int64_t j = 0; j < k; ++j) mx = std::max(mx, l[j]);
    for (int64_t j = 0; j < k; ++j) z += std::exp(l[j] - mx);
    for (int64_t j = 0; j < k; ++j)
      dl[size_t(i * k + j)] = (std::exp(l[j] - mx) / z - (j == m.labels[size_t(i)] ? 1.0 : 0.0)) / double(n);
  }
  e.a += sum_rel_var(double(k));  // the softmax's sum
  std::vector<double> dfw(size_t(k * c), 0.0), dfb(size_t(k), 0.0), dfeat(size_t(n * c), 0.0);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < k; ++j) {
      const double d = dl[size_t(i * k + j)];
      dfb[size_t(j)] += d;
      for (int64_t q = 0; q < c; ++q) {
        dfw[size_t(j * c + q)] += d * m.feat[size_t(i * c + q)];
        dfeat[size_t(i * c + q)] += d * fw[size_t(j * c + q)];
      }
    }
  e.grad("fc.weight", dfw, sum_rel_var(double(n)));
  e.grad("fc.bias", dfb, sum_rel_var(double(n)));
  e.a += sum_rel_var(double(k));
  T4 dh(n, c, m.h.h, m.h.w);
  for (int64_t i = 0; i < n * c; ++i)
    for (int64_t j = 0; j < hw; ++j) dh.v[size_t(i * hw + j)] = dfeat[size_t(i)] / double(hw);
  for (int b = 7; b >= 0; --b) dh = m.blocks[size_t(b)].backward(m.p, dh, e);
  m.stem.backward(m.p, m.r0.backward(dh, e), e);
  return out;
}

}  // namespace tandem::testing::f64
