// The cpu backend caches oneDNN convolution primitives per shape. A cached primitive must run
// correctly on any thread, not only on the one that created it (virt stream workers, loader
// threads and the main thread all call the same kernels). Each case runs forward,
// backward-data and backward-weights on one thread, then again on a second and a third
// thread (one after the other, same shapes, so the second and third reuse the cached
// primitives), and compares every result with a float64 reference.
#include <gtest/gtest.h>
#include <ostream>

#include <cmath>
#include <thread>
#include <vector>

#include "tandem/ops.h"
#include "tandem/rng.h"

using namespace tandem;

namespace {

struct ConvCase {
  Shape x, w;
  ops::Conv2dParams p;
};
void PrintTo(const ConvCase& c, std::ostream* os) {
  *os << "x " << shape_str(c.x) << " w " << shape_str(c.w) << " stride " << c.p.stride_h << "x" << c.p.stride_w
      << " pad " << c.p.pad_h << "x" << c.p.pad_w;
}

Tensor random_tensor(const Shape& s, uint64_t seed) {
  Tensor t = Tensor::empty(s);
  Philox rng(seed, 0);
  float* d = t.data<float>();
  for (int64_t i = 0; i < t.numel(); ++i) d[i] = rng.uniform() * 2.0f - 1.0f;
  return t;
}

// Reference in double: y[n,k,p,q] = b[k] + sum_{c,r,s} x[n,c,p*sh-ph+r,q*sw-pw+s] w[k,c,r,s],
// and its adjoints dx (from dy, w) and dw, db (from x, dy).
struct Reference {
  std::vector<double> y, dx, dw, db;
};

Reference reference(const ConvCase& c, const Tensor& x, const Tensor& w, const Tensor& b, const Tensor& dy) {
  const Shape ys = ops::conv2d_output_shape(c.x, c.w, c.p);
  const int64_t N = c.x[0], C = c.x[1], H = c.x[2], W = c.x[3];
  const int64_t K = c.w[0], R = c.w[2], S = c.w[3], P = ys[2], Q = ys[3];
  const float *xp = x.data<float>(), *wp = w.data<float>(), *bp = b.data<float>(), *dyp = dy.data<float>();
  Reference r;
  r.y.assign(static_cast<size_t>(shape_numel(ys)), 0.0);
  r.dx.assign(static_cast<size_t>(x.numel()), 0.0);
  r.dw.assign(static_cast<size_t>(w.numel()), 0.0);
  r.db.assign(static_cast<size_t>(K), 0.0);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t k = 0; k < K; ++k)
      for (int64_t p = 0; p < P; ++p)
        for (int64_t q = 0; q < Q; ++q) {
          const size_t yi = static_cast<size_t>(((n * K + k) * P + p) * Q + q);
          double acc = bp[k];
          const double g = dyp[yi];
          r.db[static_cast<size_t>(k)] += g;
          for (int64_t ch = 0; ch < C; ++ch)
            for (int64_t u = 0; u < R; ++u)
              for (int64_t v = 0; v < S; ++v) {
                const int64_t h = p * c.p.stride_h - c.p.pad_h + u, ww = q * c.p.stride_w - c.p.pad_w + v;
                if (h < 0 || h >= H || ww < 0 || ww >= W) continue;
                const size_t xi = static_cast<size_t>(((n * C + ch) * H + h) * W + ww);
                const size_t wi = static_cast<size_t>(((k * C + ch) * R + u) * S + v);
                acc += static_cast<double>(xp[xi]) * wp[wi];
                r.dx[xi] += g * wp[wi];
                r.dw[wi] += g * xp[xi];
              }
          r.y[yi] = acc;
        }
  return r;
}

void expect_near(const std::vector<double>& ref, const Tensor& got, const char* what, int thread) {
  ASSERT_EQ(static_cast<int64_t>(ref.size()), got.numel());
  const float* g = got.data<float>();
  for (size_t i = 0; i < ref.size(); ++i) {
    ASSERT_NEAR(g[i], ref[i], 1e-4 * (1.0 + std::fabs(ref[i])))
        << what << " element " << i << " on thread " << thread;
  }
}

class CpuConvThreads : public ::testing::TestWithParam<ConvCase> {};

TEST_P(CpuConvThreads, CachedPrimitivesRunOnAnyThread) {
  const ConvCase c = GetParam();
  const Shape ys = ops::conv2d_output_shape(c.x, c.w, c.p);
  const Tensor x = random_tensor(c.x, 1), w = random_tensor(c.w, 2), b = random_tensor({c.w[0]}, 3);
  const Tensor dy = random_tensor(ys, 4);
  const Reference ref = reference(c, x, w, b, dy);
  for (int thread = 0; thread < 3; ++thread) {
    Tensor y = Tensor::empty(ys), dx = Tensor::empty(c.x), dw = Tensor::empty(c.w), db = Tensor::empty({c.w[0]});
    Tensor dw_acc = Tensor::zeros(c.w), db_acc = Tensor::zeros({c.w[0]});
    std::thread t([&] {
      ops::conv2d_forward(x, w, b, c.p, y);
      ops::conv2d_backward_data(dy, w, c.p, dx);
      ops::conv2d_backward_weights(x, dy, c.p, dw, db, false);
      ops::conv2d_backward_weights(x, dy, c.p, dw_acc, db_acc, true);
    });
    t.join();
    expect_near(ref.y, y, "y", thread);
    expect_near(ref.dx, dx, "dx", thread);
    expect_near(ref.dw, dw, "dw", thread);
    expect_near(ref.db, db, "db", thread);
    expect_near(ref.dw, dw_acc, "dw (accumulated)", thread);
    expect_near(ref.db, db_acc, "db (accumulated)", thread);
  }
}

// Shapes of the virt ops test, the reference CNN's layers, and a strided/padded one.
INSTANTIATE_TEST_SUITE_P(Shapes, CpuConvThreads,
                         ::testing::Values(ConvCase{{2, 3, 7, 6}, {4, 3, 3, 3}, {2, 1, 1, 0}},
                                           ConvCase{{8, 1, 28, 28}, {32, 1, 3, 3}, {1, 1, 1, 1}},
                                           ConvCase{{8, 32, 14, 14}, {64, 32, 3, 3}, {1, 1, 1, 1}},
                                           ConvCase{{3, 5, 9, 11}, {6, 5, 5, 3}, {2, 3, 2, 1}}));

}  // namespace
