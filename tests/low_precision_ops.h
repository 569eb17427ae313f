// The bf16 and f16 op tests shared by the cpu/virt suite (tests/core/ops_dtype_test.cpp) and
// the cuda suite (tests/cuda/cuda_low_precision_test.cpp): every op in a low precision against
// the f32 op on the cpu, on the same rounded inputs. Each suite instantiates LowPrecisionOps
// with its devices.
//
// f16 (cpu: storage, computed through the f32 kernels): the unit roundoff is u = 2^-11, and a
// result below f16's normal range (2^-14) rounds to the subnormal grid of step 2^-24, so the
// bound below gains 2^-25 absolute for f16 outputs.
//
// Tolerance. A bf16 value has an 8-bit significand, so rounding a result to bf16 (nearest
// even) moves it by at most u = 2^-8 of its magnitude. The kernels multiply bf16 values
// exactly in f32 and accumulate in f32, so a K-term reduction differs from the f32 reference
// on the same rounded inputs by at most about K * 2^-24 * S on each side, S = the sum of the
// terms' magnitudes (the same op applied to |inputs|). Hence, per element,
//   |bf16 result - f32 reference| <= u * |ref| + 2 * K * 2^-24 * S     (bf16 outputs)
//   |f32 result  - f32 reference| <=             2 * K * 2^-24 * S     (f32 outputs: dw, db,
//                                                                     statistics, loss, probs)
// Ops that only select, mask or scale elements (relu, max pooling, dropout, scale_) must
// equal the f32 reference rounded to bf16 exactly.
// cuda: the same bounds (cuDNN and cuBLAS multiply the 16-bit inputs exactly and accumulate
// in f32 on tensor cores), except that a convolution's f32 bias is added after cuDNN rounded
// the product, so conv2d_forward's y with a bias is rounded twice and gains u * |conv(x, w)|.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <tuple>

#include "tandem/cuda.h"
#include "tandem/ops.h"
#include "tandem/rng.h"
#include "tandem/stream.h"
#include "tandem/virt.h"
#include "core/virt_test_util.h"

namespace tandem::testing::low_precision {

using namespace tandem::ops;

constexpr double kU = 1.0 / 256;            // 2^-8, bf16 unit roundoff
constexpr double kF32 = 1.0 / 16777216.0;  // 2^-24, f32 unit roundoff

Tensor rand_host(const Shape& s, uint64_t seed, float lo = -2.0f, float hi = 2.0f) {
  Tensor t = Tensor::empty(s);
  Philox rng(seed, 7);
  float* p = t.data<float>();
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = lo + (hi - lo) * rng.uniform();
  return t;
}

// The low-precision dtype of the test running now (LowPrecisionOps sets it).
DType g_low = DType::bf16;
DType low() { return g_low; }
double unit() { return g_low == DType::f16 ? 1.0 / 2048 : kU; }
double subnormal_step() { return g_low == DType::f16 ? std::ldexp(1.0, -25) : 0.0; }

Tensor rounded(const Tensor& f) { return f.to(low()).to(DType::f32); }
Tensor abs_of(const Tensor& f) {
  Tensor a = f.clone();
  for (int64_t i = 0; i < a.numel(); ++i) a.data<float>()[i] = std::fabs(a.data<float>()[i]);
  return a;
}

class LowPrecisionOps : public ::testing::TestWithParam<std::tuple<Device, DType>> {
 protected:
  void SetUp() override {
    g_low = std::get<1>(GetParam());
    if (dev().kind == DeviceKind::cuda && (!cuda::built() || cuda::device_count() == 0))
      GTEST_SKIP() << "no CUDA device";
    if (!supports(Op::conv2d_forward, low(), dev()))
      GTEST_SKIP() << dtype_name(low()) << " is not supported on " << dev().str() << " (this CPU or oneDNN lacks it)";
  }
  Device dev() const { return std::get<0>(GetParam()); }
  // A host tensor on the device under test.
  Tensor on(const Tensor& h) const {
    if (dev().is_host()) return h.clone();
    return h.to(dev(), dev().kind == DeviceKind::virt ? virt_current_stream(dev().index)
                                                      : runtime(dev().kind).default_stream(dev().index));
  }
  // cuda adds a convolution's f32 bias after cuDNN rounded the product to the data dtype
  // (src/backend/cuda/cuda_conv.cpp), so its y is rounded twice.
  bool conv_bias_rounded_twice() const { return dev().kind == DeviceKind::cuda; }
  // Rounded to bf16 and stored as bf16 on the device.
  Tensor bf(const Tensor& h) const { return on(h.to(low())); }
  // Back on the host as f32.
  static Tensor back(const Tensor& t) {
    Tensor h = tandem::testing::to_host(t);
    return h.dtype() == DType::f32 ? h : h.to(DType::f32);
  }
};

// Per element |got - ref| <= (bf16_out ? u |ref| : 0) + 2 K 2^-24 S (S = |ref| when undefined),
// plus u |extra| where `extra` is defined (a second rounding of a value of that size).
void expect_close(const Tensor& got, const Tensor& ref, bool bf16_out, double k, const Tensor& s,
                  const std::string& what, const Tensor& extra = Tensor()) {
  ASSERT_EQ(got.numel(), ref.numel()) << what;
  int bad = 0;
  for (int64_t i = 0; i < ref.numel() && bad < 5; ++i) {
    const double r = ref.data<float>()[i], g = got.data<float>()[i];
    const double si = s.defined() ? s.data<float>()[i] : std::fabs(r);
    const double twice = extra.defined() ? unit() * std::fabs(extra.data<float>()[i]) : 0.0;
    const double tol = (bf16_out ? unit() * std::fabs(r) + subnormal_step() : 0.0) + 2.0 * k * kF32 * si + twice + 1e-30;
    if (!(std::fabs(g - r) <= tol)) {
      ++bad;
      ADD_FAILURE() << what << "[" << i << "]: got " << g << ", f32 reference " << r << ", tolerance " << tol;
    }
  }
}

// got must equal the f32 reference rounded to bf16, element for element.
void expect_rounded_equal(const Tensor& got, const Tensor& ref, const std::string& what) {
  ASSERT_EQ(got.numel(), ref.numel()) << what;
  const Tensor r = rounded(ref);
  int bad = 0;
  for (int64_t i = 0; i < ref.numel() && bad < 5; ++i) {
    const float g = got.data<float>()[i], e = r.data<float>()[i];
    if (g != e && !(std::isnan(g) && std::isnan(e))) {
      ++bad;
      ADD_FAILURE() << what << "[" << i << "]: got " << g << ", expected " << e;
    }
  }
}

TEST_P(LowPrecisionOps, Conv2d) {
  const Conv2dParams p{1, 2, 1, 0};
  const Shape xs{2, 5, 9, 8}, ws{6, 5, 3, 3};
  const Shape ys = conv2d_output_shape(xs, ws, p);
  const Tensor x = rounded(rand_host(xs, 1)), w = rounded(rand_host(ws, 2)), b = rand_host({6}, 3);
  const Tensor dy = rounded(rand_host(ys, 4));
  // Forward: K = C R S products (+ the bias).
  Tensor ref = Tensor::zeros(ys), s = Tensor::zeros(ys);
  conv2d_forward(x, w, b, p, ref);
  conv2d_forward(abs_of(x), abs_of(w), abs_of(b), p, s);
  Tensor y = on(Tensor::zeros(ys, low()));
  conv2d_forward(bf(x), bf(w), on(b), p, y);
  Tensor unbiased;  // the product the bias is added to, where it is rounded first
  if (conv_bias_rounded_twice()) {
    unbiased = Tensor::zeros(ys);
    conv2d_forward(x, w, Tensor(), p, unbiased);
  }
  expect_close(back(y), ref, true, 5 * 3 * 3 + 1, s, "conv2d_forward y", unbiased);
  // Backward data: K = K_out R S.
  Tensor dref = Tensor::zeros(xs), ds = Tensor::zeros(xs);
  conv2d_backward_data(dy, w, p, dref);
  conv2d_backward_data(abs_of(dy), abs_of(w), p, ds);
  Tensor dx = on(Tensor::zeros(xs, low()));
  conv2d_backward_data(bf(dy), bf(w), p, dx);
  expect_close(back(dx), dref, true, 6 * 3 * 3, ds, "conv2d_backward_data dx");
  // Backward weights into f32 dw/db, overwritten and accumulated: K = N P Q.
  for (bool acc : {false, true}) {
    const Tensor dw0 = rand_host(ws, 5), db0 = rand_host({6}, 6);
    Tensor wref = dw0.clone(), bref = db0.clone(), wsum = abs_of(dw0), bsum = abs_of(db0);
    conv2d_backward_weights(x, dy, p, wref, bref, acc);
    conv2d_backward_weights(abs_of(x), abs_of(dy), p, wsum, bsum, acc);
    Tensor dw = on(dw0), db = on(db0);
    conv2d_backward_weights(bf(x), bf(dy), p, dw, db, acc);
    const double k = static_cast<double>(ys[0] * ys[2] * ys[3]) + 1;
    expect_close(back(dw), wref, false, k, wsum, acc ? "conv2d dw (accumulate)" : "conv2d dw");
    expect_close(back(db), bref, false, k, bsum, acc ? "conv2d db (accumulate)" : "conv2d db");
  }
}

TEST_P(LowPrecisionOps, Linear) {
  const int64_t n = 7, in = 19, out = 5;
  const Tensor x = rounded(rand_host({n, in}, 11)), w = rounded(rand_host({out, in}, 12));
  const Tensor b = rand_host({out}, 13), dy = rounded(rand_host({n, out}, 14));
  Tensor ref = Tensor::zeros({n, out}), s = Tensor::zeros({n, out});
  linear_forward(x, w, b, ref);
  linear_forward(abs_of(x), abs_of(w), abs_of(b), s);
  Tensor y = on(Tensor::zeros({n, out}, low()));
  linear_forward(bf(x), bf(w), on(b), y);
  expect_close(back(y), ref, true, in + 1, s, "linear_forward y");
  Tensor y_nb = on(Tensor::zeros({n, out}, low())), ref_nb = Tensor::zeros({n, out});
  linear_forward(x, w, Tensor(), ref_nb);
  linear_forward(bf(x), bf(w), Tensor(), y_nb);
  expect_close(back(y_nb), ref_nb, true, in, s, "linear_forward y (no bias)");

  Tensor dref = Tensor::zeros({n, in}), ds = Tensor::zeros({n, in});
  linear_backward_data(dy, w, dref);
  linear_backward_data(abs_of(dy), abs_of(w), ds);
  Tensor dx = on(Tensor::zeros({n, in}, low()));
  linear_backward_data(bf(dy), bf(w), dx);
  expect_close(back(dx), dref, true, out, ds, "linear_backward_data dx");

  for (bool acc : {false, true}) {
    const Tensor dw0 = rand_host({out, in}, 15), db0 = rand_host({out}, 16);
    Tensor wref = dw0.clone(), bref = db0.clone(), wsum = abs_of(dw0), bsum = abs_of(db0);
    linear_backward_weights(x, dy, wref, bref, acc);
    linear_backward_weights(abs_of(x), abs_of(dy), wsum, bsum, acc);
    Tensor dw = on(dw0), db = on(db0);
    linear_backward_weights(bf(x), bf(dy), dw, db, acc);
    expect_close(back(dw), wref, false, n + 1, wsum, acc ? "linear dw (accumulate)" : "linear dw");
    expect_close(back(db), bref, false, n + 1, bsum, acc ? "linear db (accumulate)" : "linear db");
  }
}

TEST_P(LowPrecisionOps, LinearEmptyDimensions) {
  // in = 0: y = b rounded to bf16; n = 0: the overwritten dw and db become 0.
  const Tensor b = rand_host({4}, 17);
  Tensor y = on(Tensor::full({3, 4}, 5.0f).to(low()));
  linear_forward(bf(Tensor::zeros({3, 0})), bf(Tensor::zeros({4, 0})), on(b), y);
  const Tensor yh = back(y), br = rounded(b);
  for (int64_t i = 0; i < 3; ++i)
    for (int64_t j = 0; j < 4; ++j) ASSERT_EQ(yh.data<float>()[i * 4 + j], br.data<float>()[j]) << i << "," << j;
  Tensor dw = on(Tensor::full({4, 2}, 3.0f)), db = on(Tensor::full({4}, 3.0f));
  linear_backward_weights(bf(Tensor::zeros({0, 2})), bf(Tensor::zeros({0, 4})), dw, db, false);
  const Tensor dwh = back(dw), dbh = back(db);
  for (int64_t i = 0; i < 8; ++i) ASSERT_EQ(dwh.data<float>()[i], 0.0f) << i;
  for (int64_t i = 0; i < 4; ++i) ASSERT_EQ(dbh.data<float>()[i], 0.0f) << i;
}

TEST_P(LowPrecisionOps, BatchNorm) {
  const Shape xs{3, 4, 5, 6};
  const int64_t k = 3 * 5 * 6;  // values per channel: the statistics' reduction length
  const Tensor x = rounded(rand_host(xs, 21, -1.0f, 3.0f)), dy = rounded(rand_host(xs, 22));
  const Tensor gamma = rand_host({4}, 23, 0.5f, 1.5f), beta = rand_host({4}, 24);
  const Tensor rm0 = rand_host({4}, 25), rv0 = rand_host({4}, 26, 0.5f, 2.0f);
  for (bool relu : {false, true}) {
    const std::string tag = relu ? " (fused relu)" : "";
    Tensor yr = Tensor::zeros(xs), mr = Tensor::zeros({4}), vr = Tensor::zeros({4});
    Tensor rmr = rm0.clone(), rvr = rv0.clone();
    batch_norm_forward_training(x, gamma, beta, 1e-5, 0.1, yr, mr, vr, rmr, rvr, relu);
    Tensor y = on(Tensor::zeros(xs, low())), m = on(Tensor::zeros({4})), v = on(Tensor::zeros({4}));
    Tensor rm = on(rm0), rv = on(rv0);
    batch_norm_forward_training(bf(x), on(gamma), on(beta), 1e-5, 0.1, y, m, v, rm, rv, relu);
    // y is normalised (|y| ~ 1-3): each element's S is taken as the output scale, 4.
    const Tensor scale = Tensor::full(xs, 4.0f);
    expect_close(back(y), yr, true, k, scale, "batch_norm y" + tag);
    expect_close(back(m), mr, false, k, abs_of(mr), "batch_norm save_mean" + tag);
    expect_close(back(v), vr, false, k, abs_of(vr), "batch_norm save_var" + tag);
    expect_close(back(rm), rmr, false, k, abs_of(rmr), "batch_norm running_mean" + tag);
    expect_close(back(rv), rvr, false, k, abs_of(rvr), "batch_norm running_var" + tag);

    Tensor dxr = Tensor::zeros(xs), dgr = Tensor::zeros({4}), dbr = Tensor::zeros({4});
    batch_norm_backward(dy, x, gamma, mr, vr, 1e-5, dxr, dgr, dbr, false, relu, rounded(yr));
    Tensor dx = on(Tensor::zeros(xs, low())), dg = on(Tensor::zeros({4})), db = on(Tensor::zeros({4}));
    batch_norm_backward(bf(dy), bf(x), on(gamma), on(mr), on(vr), 1e-5, dx, dg, db, false, relu,
                        relu ? y : Tensor());
    expect_close(back(dx), dxr, true, k, Tensor::full(xs, 8.0f), "batch_norm dx" + tag);
    expect_close(back(dg), dgr, false, k, Tensor::full({4}, 4.0f * k), "batch_norm dgamma" + tag);
    expect_close(back(db), dbr, false, k, Tensor::full({4}, 2.0f * k), "batch_norm dbeta" + tag);
  }
  Tensor yr = Tensor::zeros(xs), y = on(Tensor::zeros(xs, low()));
  batch_norm_forward_inference(x, gamma, beta, rm0, rv0, 1e-5, yr, false);
  batch_norm_forward_inference(bf(x), on(gamma), on(beta), on(rm0), on(rv0), 1e-5, y, false);
  expect_close(back(y), yr, true, 1, Tensor::full(xs, 8.0f), "batch_norm_forward_inference y");
}

TEST_P(LowPrecisionOps, MaxPoolAndRelu) {
  const Shape xs{2, 3, 6, 7};
  const Tensor x = rounded(rand_host(xs, 31));
  for (const Pool2dParams p : {Pool2dParams{}, Pool2dParams{3, 3, 2, 2, 1, 1}}) {
    const Shape ys = max_pool2d_output_shape(xs, p);
    Tensor yr = Tensor::zeros(ys), ir = Tensor::zeros(ys, DType::i32);
    max_pool2d_forward(x, p, yr, ir);
    Tensor y = on(Tensor::zeros(ys, low())), idx = on(Tensor::zeros(ys, DType::i32));
    max_pool2d_forward(bf(x), p, y, idx);
    expect_rounded_equal(back(y), yr, "max_pool2d_forward y");
    const Tensor ih = tandem::testing::to_host(idx);
    for (int64_t i = 0; i < ir.numel(); ++i) ASSERT_EQ(ih.data<int32_t>()[i], ir.data<int32_t>()[i]) << i;
    const Tensor dy = rounded(rand_host(ys, 32));
    Tensor dxr = Tensor::zeros(xs), dx = on(Tensor::zeros(xs, low()));
    max_pool2d_backward(dy, ir, p, dxr);
    max_pool2d_backward(bf(dy), idx, p, dx);
    // Overlapping windows (kernel 3, stride 2) add up to 4 gradients into one input.
    expect_close(back(dx), dxr, true, 4, abs_of(dxr), "max_pool2d_backward dx");
  }
  Tensor r = Tensor::zeros(xs), rb = on(Tensor::zeros(xs, low()));
  relu_forward(x, r);
  relu_forward(bf(x), rb);
  expect_rounded_equal(back(rb), r, "relu_forward y");
  const Tensor g = rounded(rand_host(xs, 33));
  Tensor dr = Tensor::zeros(xs), db = on(Tensor::zeros(xs, low()));
  relu_backward(g, r, dr);
  relu_backward(bf(g), rb, db);
  expect_rounded_equal(back(db), dr, "relu_backward dx");
}

TEST_P(LowPrecisionOps, DropoutAndElementwise) {
  const Shape s{5, 37};
  const Tensor x = rounded(rand_host(s, 41)), src = rounded(rand_host(s, 42));
  Tensor yr = Tensor::zeros(s), mr = Tensor::zeros(s, DType::u8);
  dropout_forward(x, 0.3f, 9, 4, yr, mr);
  Tensor y = on(Tensor::zeros(s, low())), m = on(Tensor::zeros(s, DType::u8));
  dropout_forward(bf(x), 0.3f, 9, 4, y, m);
  expect_rounded_equal(back(y), yr, "dropout_forward y");
  Tensor dr = Tensor::zeros(s), d = on(Tensor::zeros(s, low()));
  dropout_backward(src, mr, 0.3f, dr);
  dropout_backward(bf(src), m, 0.3f, d);
  expect_rounded_equal(back(d), dr, "dropout_backward dx");

  Tensor ar = x.clone(), a = bf(x);
  add_(ar, src, -0.75f);
  add_(a, bf(src), -0.75f);
  Tensor as = abs_of(x);
  add_(as, abs_of(src), 0.75f);
  expect_close(back(a), ar, true, 1, as, "add_ dst");
  Tensor sr = x.clone(), sc = bf(x);
  scale_(sr, 0.3f);
  scale_(sc, 0.3f);
  expect_rounded_equal(back(sc), sr, "scale_ dst");
  zero_(sc);
  const Tensor z = back(sc);
  for (int64_t i = 0; i < z.numel(); ++i) ASSERT_EQ(z.data<float>()[i], 0.0f) << i;
}

TEST_P(LowPrecisionOps, CrossEntropy) {
  const int64_t n = 9, c = 11;
  const Tensor z = rounded(rand_host({n, c}, 51, -4.0f, 4.0f));
  Tensor labels = Tensor::empty({n}, DType::i64);
  for (int64_t i = 0; i < n; ++i) labels.data<int64_t>()[i] = (i * 5) % c;
  const Tensor lab = on(labels);
  // The loss: K = N C terms of magnitude <= ~|loss| + 8 (the logits' range).
  Tensor pr = Tensor::zeros({n, c}), p = on(Tensor::zeros({n, c}));
  const float lr = softmax_cross_entropy_forward(z, labels, 0.1f, pr);
  const float l = softmax_cross_entropy_forward(bf(z), lab, 0.1f, p);
  EXPECT_NEAR(l, lr, 2.0 * n * c * kF32 * (std::fabs(lr) + 8.0)) << "loss";
  expect_close(back(p), pr, false, c, Tensor::full({n, c}, 1.0f), "softmax probs");
  Tensor dr = Tensor::zeros({n, c}), d = on(Tensor::zeros({n, c}, low()));
  softmax_cross_entropy_backward(pr, labels, 0.1f, 2.0f, dr);
  softmax_cross_entropy_backward(p, lab, 0.1f, 2.0f, d);
  expect_close(back(d), dr, true, 2, abs_of(dr), "dlogits");
  EXPECT_EQ(count_correct(bf(z), lab), count_correct(z, labels));
  Tensor mr = Tensor::zeros({4}), m = on(Tensor::zeros({4}));
  softmax_cross_entropy_accumulate(z, labels, 0.1f, pr, mr);
  softmax_cross_entropy_accumulate(bf(z), lab, 0.1f, p, m);
  const Tensor mh = back(m);
  EXPECT_NEAR(mh.data<float>()[0], mr.data<float>()[0], 2.0 * n * c * kF32 * (mr.data<float>()[0] + 8.0 * n));
  for (int i = 1; i < 4; ++i) EXPECT_EQ(mh.data<float>()[i], mr.data<float>()[i]) << "metrics[" << i << "]";
}

}  // namespace tandem::testing::low_precision
