// Every op of the cuda backend against the cpu backend on the same inputs, with sentinel
// bytes around every device tensor (an out-of-bounds write fails the test). Skipped when no
// CUDA device is present.
#include <gtest/gtest.h>

#include <cstring>

#include "cuda/cuda_test_util.h"
#include "tandem/ops.h"
#include "tandem/optim_ops.h"

namespace tandem {
namespace {

using testing::expect_close;
using testing::Guarded;
using testing::random_tensor;

constexpr double kRtol = 1e-4, kAtol = 1e-5;

TEST(CudaOps, Linear) {
  TD_REQUIRE_CUDA();
  const int64_t n = 37, in = 129, out = 65;
  Tensor x = random_tensor({n, in}, 1), w = random_tensor({out, in}, 2), b = random_tensor({out}, 3);
  Tensor dy = random_tensor({n, out}, 4);
  Guarded gx(x), gw(w), gb(b), gdy(dy);

  Tensor y = Tensor::empty({n, out});
  ops::linear_forward(x, w, b, y);
  Guarded gy(Shape{n, out}, DType::f32);
  ops::linear_forward(gx.t, gw.t, gb.t, gy.t);
  expect_close(gy.check(), y, kRtol, 1e-4, "linear_forward");

  Tensor y2 = Tensor::empty({n, out});
  ops::linear_forward(x, w, Tensor(), y2);
  Guarded gy2(Shape{n, out}, DType::f32);
  ops::linear_forward(gx.t, gw.t, Tensor(), gy2.t);
  expect_close(gy2.check(), y2, kRtol, 1e-4, "linear_forward without bias");

  Tensor dx = Tensor::empty({n, in});
  ops::linear_backward_data(dy, w, dx);
  Guarded gdx(Shape{n, in}, DType::f32);
  ops::linear_backward_data(gdy.t, gw.t, gdx.t);
  expect_close(gdx.check(), dx, kRtol, 1e-4, "linear_backward_data");

  for (bool acc : {false, true}) {
    Tensor dw0 = random_tensor({out, in}, 5), db0 = random_tensor({out}, 6);
    Guarded gdw(dw0), gdb(db0);
    Tensor dw = dw0.clone(), db = db0.clone();
    ops::linear_backward_weights(x, dy, dw, db, acc);
    ops::linear_backward_weights(gx.t, gdy.t, gdw.t, gdb.t, acc);
    expect_close(gdw.check(), dw, kRtol, 1e-4, acc ? "linear dw accumulate" : "linear dw");
    expect_close(gdb.check(), db, kRtol, 1e-4, acc ? "linear db accumulate" : "linear db");
  }
}

TEST(CudaOps, Conv2d) {
  TD_REQUIRE_CUDA();
  for (const ops::Conv2dParams& p : {ops::Conv2dParams{1, 1, 1, 1}, ops::Conv2dParams{2, 2, 0, 1}}) {
    Tensor x = random_tensor({3, 5, 13, 11}, 11), w = random_tensor({7, 5, 3, 3}, 12), b = random_tensor({7}, 13);
    const Shape ys = ops::conv2d_output_shape(x.shape(), w.shape(), p);
    Tensor dy = random_tensor(ys, 14);
    Guarded gx(x), gw(w), gb(b), gdy(dy);

    Tensor y = Tensor::empty(ys);
    ops::conv2d_forward(x, w, b, p, y);
    Guarded gy(ys, DType::f32);
    ops::conv2d_forward(gx.t, gw.t, gb.t, p, gy.t);
    expect_close(gy.check(), y, kRtol, 1e-4, "conv2d_forward");

    Tensor dx = Tensor::empty(x.shape());
    ops::conv2d_backward_data(dy, w, p, dx);
    Guarded gdx(x.shape(), DType::f32);
    ops::conv2d_backward_data(gdy.t, gw.t, p, gdx.t);
    expect_close(gdx.check(), dx, kRtol, 1e-4, "conv2d_backward_data");

    for (bool acc : {false, true}) {
      Tensor dw0 = random_tensor(w.shape(), 15), db0 = random_tensor({7}, 16);
      Guarded gdw(dw0), gdb(db0);
      Tensor dw = dw0.clone(), db = db0.clone();
      ops::conv2d_backward_weights(x, dy, p, dw, db, acc);
      ops::conv2d_backward_weights(gx.t, gdy.t, p, gdw.t, gdb.t, acc);
      expect_close(gdw.check(), dw, kRtol, 1e-3, "conv2d dw");
      expect_close(gdb.check(), db, kRtol, 1e-4, "conv2d db");
    }
  }
}

TEST(CudaOps, BatchNorm) {
  TD_REQUIRE_CUDA();
  const Shape xs{6, 4, 5, 7};
  Tensor x = random_tensor(xs, 21, -2.0f, 3.0f), gamma = random_tensor({4}, 22), beta = random_tensor({4}, 23);
  Tensor dy = random_tensor(xs, 24);
  Guarded gx(x), gg(gamma), gbeta(beta), gdy(dy);
  for (bool relu : {false, true}) {
    Tensor rm = random_tensor({4}, 25), rv = random_tensor({4}, 26, 0.5f, 1.5f);
    Guarded grm(rm), grv(rv);
    Tensor y = Tensor::empty(xs), sm = Tensor::empty({4}), sv = Tensor::empty({4});
    Guarded gy(xs, DType::f32), gsm(Shape{4}, DType::f32), gsv(Shape{4}, DType::f32);
    ops::batch_norm_forward_training(x, gamma, beta, 1e-5, 0.1, y, sm, sv, rm, rv, relu);
    ops::batch_norm_forward_training(gx.t, gg.t, gbeta.t, 1e-5, 0.1, gy.t, gsm.t, gsv.t, grm.t, grv.t, relu);
    expect_close(gy.check(), y, kRtol, 1e-4, "batch_norm y");
    expect_close(gsm.check(), sm, kRtol, 1e-5, "batch_norm save_mean");
    expect_close(gsv.check(), sv, kRtol, 1e-5, "batch_norm save_var");
    expect_close(grm.check(), rm, kRtol, 1e-5, "batch_norm running_mean");
    expect_close(grv.check(), rv, kRtol, 1e-5, "batch_norm running_var (unbiased)");

    Tensor dx = Tensor::empty(xs);
    Guarded gdx(xs, DType::f32);
    for (bool acc : {false, true}) {
      Tensor dg0 = random_tensor({4}, 27), db0 = random_tensor({4}, 28);
      Guarded gdg(dg0), gdb(db0);
      Tensor dg = dg0.clone(), db = db0.clone();
      ops::batch_norm_backward(dy, x, gamma, sm, sv, 1e-5, dx, dg, db, acc, relu, y);
      ops::batch_norm_backward(gdy.t, gx.t, gg.t, gsm.t, gsv.t, 1e-5, gdx.t, gdg.t, gdb.t, acc, relu, gy.t);
      expect_close(gdx.check(), dx, 1e-3, 1e-4, "batch_norm dx");
      expect_close(gdg.check(), dg, 1e-3, 1e-4, "batch_norm dgamma");
      expect_close(gdb.check(), db, 1e-3, 1e-4, "batch_norm dbeta");
    }

    Tensor yi = Tensor::empty(xs);
    Guarded gyi(xs, DType::f32);
    ops::batch_norm_forward_inference(x, gamma, beta, rm, rv, 1e-5, yi, relu);
    ops::batch_norm_forward_inference(gx.t, gg.t, gbeta.t, grm.t, grv.t, 1e-5, gyi.t, relu);
    expect_close(gyi.check(), yi, kRtol, 1e-4, "batch_norm inference");
  }
}

TEST(CudaOps, MaxPool) {
  TD_REQUIRE_CUDA();
  for (const ops::Pool2dParams& p : {ops::Pool2dParams{2, 2, 2, 2, 0, 0}, ops::Pool2dParams{3, 3, 2, 2, 1, 1}}) {
    Tensor x = random_tensor({2, 3, 9, 8}, 31);
    const Shape ys = ops::max_pool2d_output_shape(x.shape(), p);
    Guarded gx(x);
    Tensor y = Tensor::empty(ys), idx = Tensor::empty(ys, DType::i32);
    Guarded gy(ys, DType::f32), gidx(ys, DType::i32);
    ops::max_pool2d_forward(x, p, y, idx);
    ops::max_pool2d_forward(gx.t, p, gy.t, gidx.t);
    expect_close(gy.check(), y, 0, 0, "max_pool y");
    Tensor ridx = gidx.check();
    for (int64_t i = 0; i < idx.numel(); ++i) ASSERT_EQ(ridx.data<int32_t>()[i], idx.data<int32_t>()[i]) << i;

    Tensor dy = random_tensor(ys, 32);
    Guarded gdy(dy);
    Tensor dx = Tensor::empty(x.shape());
    Guarded gdx(x.shape(), DType::f32);
    ops::max_pool2d_backward(dy, idx, p, dx);
    ops::max_pool2d_backward(gdy.t, gidx.t, p, gdx.t);
    expect_close(gdx.check(), dx, 1e-6, 1e-6, "max_pool dx");
  }
}

TEST(CudaOps, ElementWiseAndDropout) {
  TD_REQUIRE_CUDA();
  const Shape s{3, 1001};
  Tensor x = random_tensor(s, 41), g = random_tensor(s, 42);
  Guarded gx(x), gg(g);

  Tensor y = Tensor::empty(s), dx = Tensor::empty(s);
  Guarded gy(s, DType::f32), gdx(s, DType::f32);
  ops::relu_forward(x, y);
  ops::relu_forward(gx.t, gy.t);
  expect_close(gy.check(), y, 0, 0, "relu_forward");
  ops::relu_backward(g, y, dx);
  ops::relu_backward(gg.t, gy.t, gdx.t);
  expect_close(gdx.check(), dx, 0, 0, "relu_backward");

  Tensor dy = Tensor::empty(s), mask = Tensor::empty(s, DType::u8);
  Guarded gdy(s, DType::f32), gmask(s, DType::u8);
  ops::dropout_forward(x, 0.3f, 1234, 5, dy, mask);
  ops::dropout_forward(gx.t, 0.3f, 1234, 5, gdy.t, gmask.t);
  Tensor rmask = gmask.check();
  int64_t kept = 0;
  for (int64_t i = 0; i < mask.numel(); ++i) {
    ASSERT_EQ(rmask.data<uint8_t>()[i], mask.data<uint8_t>()[i]) << "dropout mask differs from cpu at " << i;
    kept += mask.data<uint8_t>()[i];
  }
  EXPECT_NEAR(static_cast<double>(kept) / mask.numel(), 0.7, 0.05);
  expect_close(gdy.check(), dy, 1e-6, 0, "dropout_forward");
  ops::dropout_backward(g, mask, 0.3f, dx);
  ops::dropout_backward(gg.t, gmask.t, 0.3f, gdx.t);
  expect_close(gdx.check(), dx, 1e-6, 0, "dropout_backward");

  Tensor acc = x.clone();
  Guarded gacc(x);
  ops::add_(acc, g, -0.5f);
  ops::add_(gacc.t, gg.t, -0.5f);
  ops::scale_(acc, 3.0f);
  ops::scale_(gacc.t, 3.0f);
  expect_close(gacc.check(), acc, 1e-6, 1e-7, "add_ and scale_");
}

TEST(CudaOps, SoftmaxCrossEntropyAndAccuracy) {
  TD_REQUIRE_CUDA();
  for (int64_t c : {10, 37, 1000}) {
    const int64_t n = 53;
    Tensor z = random_tensor({n, c}, 51, -4.0f, 4.0f);
    Tensor labels = Tensor::empty({n}, DType::i64);
    for (int64_t i = 0; i < n; ++i) labels.data<int64_t>()[i] = (i * 7) % c;
    Guarded gz(z), glab(labels);
    for (float e : {0.0f, 0.1f}) {
      Tensor probs = Tensor::empty({n, c});
      Guarded gprobs(Shape{n, c}, DType::f32);
      const float loss = ops::softmax_cross_entropy_forward(z, labels, e, probs);
      const float gloss = ops::softmax_cross_entropy_forward(gz.t, glab.t, e, gprobs.t);
      EXPECT_NEAR(gloss, loss, 1e-5 * std::abs(loss) + 1e-6) << "c=" << c << " e=" << e;
      expect_close(gprobs.check(), probs, 1e-5, 1e-7, "softmax probs");
      Tensor d = Tensor::empty({n, c});
      Guarded gd(Shape{n, c}, DType::f32);
      ops::softmax_cross_entropy_backward(probs, labels, e, 2.0f, d);
      ops::softmax_cross_entropy_backward(gprobs.t, glab.t, e, 2.0f, gd.t);
      expect_close(gd.check(), d, 1e-4, 1e-7, "softmax_cross_entropy_backward");
      // The accumulating form (no host read-back) adds the same loss sum and correct count.
      Tensor m = Tensor::zeros({4});
      Guarded gm(m);
      ops::softmax_cross_entropy_accumulate(z, labels, e, probs, m);
      ops::softmax_cross_entropy_accumulate(gz.t, glab.t, e, gprobs.t, gm.t);
      expect_close(gm.check(), m, 1e-5, 1e-5, "softmax_cross_entropy_accumulate");
    }
    EXPECT_EQ(ops::count_correct(gz.t, glab.t), ops::count_correct(z, labels)) << "c=" << c;
  }
  // A label outside [0, C) is an argument error naming its row, as on the cpu.
  Tensor z = random_tensor({4, 3}, 52);
  Tensor labels = Tensor::empty({4}, DType::i64);
  for (int64_t i = 0; i < 4; ++i) labels.data<int64_t>()[i] = i == 2 ? 3 : 0;
  Guarded gz(z), glab(labels), gprobs(Shape{4, 3}, DType::f32);
  try {
    ops::softmax_cross_entropy_forward(gz.t, glab.t, 0.0f, gprobs.t);
    FAIL() << "expected Error(invalid_argument)";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::invalid_argument);
    EXPECT_NE(std::string(e.what()).find("label 3 in row 2"), std::string::npos) << e.what();
  }
}

// zero_ in every dtype (the only op the cuda backend runs in all of them).
TEST(CudaOps, ZeroInEveryDtype) {
  TD_REQUIRE_CUDA();
  for (DType dt : {DType::f32, DType::bf16, DType::f16, DType::i32, DType::i64, DType::u8}) {
    Guarded g(Shape{3, 333}, dt);  // sentinel bytes inside and around
    ops::zero_(g.t);
    Tensor r = g.check();
    const auto* b = static_cast<const unsigned char*>(r.raw_data());
    size_t nonzero = 0;
    for (size_t i = 0; i < r.nbytes(); ++i) nonzero += b[i] != 0;
    EXPECT_EQ(nonzero, 0u) << dtype_name(dt);
  }
}

// Convolution without bias (forward and the weight gradient without db).
TEST(CudaOps, Conv2dWithoutBias) {
  TD_REQUIRE_CUDA();
  const ops::Conv2dParams p{1, 1, 1, 1};
  Tensor x = random_tensor({2, 3, 9, 10}, 61), w = random_tensor({4, 3, 3, 3}, 62);
  const Shape ys = ops::conv2d_output_shape(x.shape(), w.shape(), p);
  Tensor dy = random_tensor(ys, 63);
  Guarded gx(x), gw(w), gdy(dy), gy(ys, DType::f32);
  Tensor y = Tensor::empty(ys);
  ops::conv2d_forward(x, w, Tensor(), p, y);
  ops::conv2d_forward(gx.t, gw.t, Tensor(), p, gy.t);
  expect_close(gy.check(), y, kRtol, 1e-4, "conv2d_forward without bias");
  Tensor dw = random_tensor(w.shape(), 64);
  Guarded gdw(dw);
  ops::conv2d_backward_weights(x, dy, p, dw, Tensor(), false);
  ops::conv2d_backward_weights(gx.t, gdy.t, p, gdw.t, Tensor(), false);
  expect_close(gdw.check(), dw, kRtol, 1e-3, "conv2d dw without db");
}

// Batch norm with 1615 elements per channel (more than one block of 256 threads, not a
// multiple of it), with and without running statistics.
TEST(CudaOps, BatchNormLargeChannelsAndNoRunningStats) {
  TD_REQUIRE_CUDA();
  const Shape xs{5, 3, 17, 19};
  Tensor x = random_tensor(xs, 71, -2.0f, 3.0f), gamma = random_tensor({3}, 72), beta = random_tensor({3}, 73);
  Tensor dy = random_tensor(xs, 74);
  Guarded gx(x), gg(gamma), gbeta(beta), gdy(dy);
  for (bool running : {true, false}) {
    Tensor rm = running ? random_tensor({3}, 75) : Tensor(), rv = running ? random_tensor({3}, 76, 0.5f, 1.5f) : Tensor();
    Tensor y = Tensor::empty(xs), sm = Tensor::empty({3}), sv = Tensor::empty({3});
    Guarded gy(xs, DType::f32), gsm(Shape{3}, DType::f32), gsv(Shape{3}, DType::f32);
    Guarded grm(running ? rm : Tensor::empty({3})), grv(running ? rv : Tensor::empty({3}));
    ops::batch_norm_forward_training(x, gamma, beta, 1e-5, 0.1, y, sm, sv, rm, rv, false);
    ops::batch_norm_forward_training(gx.t, gg.t, gbeta.t, 1e-5, 0.1, gy.t, gsm.t, gsv.t,
                                     running ? grm.t : Tensor(), running ? grv.t : Tensor(), false);
    const char* what = running ? "batch_norm (running stats)" : "batch_norm (no running stats)";
    expect_close(gy.check(), y, kRtol, 1e-4, what);
    expect_close(gsm.check(), sm, kRtol, 1e-5, what);
    expect_close(gsv.check(), sv, kRtol, 1e-5, what);
    if (running) {
      expect_close(grm.check(), rm, kRtol, 1e-5, "running_mean");
      expect_close(grv.check(), rv, kRtol, 1e-5, "running_var");
    }
    Tensor dx = Tensor::empty(xs), dg = Tensor::empty({3}), db = Tensor::empty({3});
    Guarded gdx(xs, DType::f32), gdg(Shape{3}, DType::f32), gdb(Shape{3}, DType::f32);
    ops::batch_norm_backward(dy, x, gamma, sm, sv, 1e-5, dx, dg, db, false, false, y);
    ops::batch_norm_backward(gdy.t, gx.t, gg.t, gsm.t, gsv.t, 1e-5, gdx.t, gdg.t, gdb.t, false, false, gy.t);
    expect_close(gdx.check(), dx, 1e-3, 1e-4, "batch_norm dx, large channels");
    expect_close(gdg.check(), dg, 1e-3, 1e-3, "batch_norm dgamma, large channels");
    expect_close(gdb.check(), db, 1e-3, 1e-3, "batch_norm dbeta, large channels");
  }
}

// 2^24 + 77 elements: more than the 65536 blocks x 256 threads of one grid, so the grid-stride
// loops of the element-wise kernels and of batch-norm inference run their tails.
TEST(CudaOps, GridStrideTails) {
  TD_REQUIRE_CUDA();
  const int64_t n = (int64_t{1} << 24) + 77;
  Tensor x = random_tensor({n}, 81), g = random_tensor({n}, 82);
  Guarded gx(x), gg(g), gy(Shape{n}, DType::f32);
  Tensor y = Tensor::empty({n});
  ops::relu_forward(x, y);
  ops::relu_forward(gx.t, gy.t);
  expect_close(gy.check(), y, 0, 0, "relu_forward, 2^24 + 77");
  Tensor acc = x.clone();
  ops::add_(acc, g, 0.25f);
  ops::scale_(acc, -2.0f);
  ops::add_(gx.t, gg.t, 0.25f);
  ops::scale_(gx.t, -2.0f);
  expect_close(gx.check(), acc, 1e-6, 1e-7, "add_ and scale_, 2^24 + 77");

  const Shape xs{1, 2, 1, n / 2 + 1};  // 2^24 + 78 elements in two channels
  Tensor bx = random_tensor(xs, 83), gamma = random_tensor({2}, 84), beta = random_tensor({2}, 85);
  Tensor rm = random_tensor({2}, 86), rv = random_tensor({2}, 87, 0.5f, 1.5f);
  Guarded gbx(bx), ggm(gamma), gbt(beta), grm(rm), grv(rv), gby(xs, DType::f32);
  Tensor by = Tensor::empty(xs);
  ops::batch_norm_forward_inference(bx, gamma, beta, rm, rv, 1e-5, by, true);
  ops::batch_norm_forward_inference(gbx.t, ggm.t, gbt.t, grm.t, grv.t, 1e-5, gby.t, true);
  expect_close(gby.check(), by, kRtol, 1e-5, "batch_norm inference, 2^24 + 78");
}

// Max pooling without indices (inference): the same values as with them.
TEST(CudaOps, MaxPoolWithoutIndices) {
  TD_REQUIRE_CUDA();
  const ops::Pool2dParams p{3, 3, 2, 2, 1, 1};
  Tensor x = random_tensor({2, 3, 11, 9}, 91);
  const Shape ys = ops::max_pool2d_output_shape(x.shape(), p);
  Guarded gx(x), gy(ys, DType::f32);
  Tensor y = Tensor::empty(ys);
  ops::max_pool2d_forward(x, p, y, Tensor());
  ops::max_pool2d_forward(gx.t, p, gy.t, Tensor());
  expect_close(gy.check(), y, 0, 0, "max_pool without indices");
}

// The optimizer ops on cuda give the cpu backend's results bit for bit (scalar cpu kernels):
// Adam with coupled L2, SGD without momentum, and the param copy in bf16 and f16.
TEST(CudaOps, OptimizerVariantsMatchCpuExactly) {
  TD_REQUIRE_CUDA();
  ops::set_simd_level(ops::SimdLevel::scalar);
  auto same = [](const Tensor& a, const Tensor& b, const std::string& what) {
    EXPECT_EQ(std::memcmp(a.raw_data(), b.raw_data(), b.nbytes()), 0) << what;
  };
  for (int64_t n : {1, 7, 1025, 70001}) {
    for (DType out_dt : {DType::bf16, DType::f16}) {
      const std::string tag = " n=" + std::to_string(n) + " out " + dtype_name(out_dt);
      Tensor p = random_tensor({n}, 101), g = random_tensor({n}, 102);
      Tensor m = random_tensor({n}, 103, -0.1f, 0.1f), v = random_tensor({n}, 104, 0.0f, 0.01f);
      Guarded gp(p), gg(g), gm(m), gv(v), gout(Shape{n}, out_dt);
      ops::AdamParams ap;
      ap.lr = 3e-3;
      ap.weight_decay = 0.05;
      ap.decoupled = false;  // Adam with L2: grad += weight_decay * param
      ap.step = 5;
      Tensor out = Tensor::empty({n}, out_dt);
      ops::adam_step(p, g, m, v, ap, out);
      ops::adam_step(gp.t, gg.t, gm.t, gv.t, ap, gout.t);
      same(gp.check(), p, "adam L2 param" + tag);
      same(gm.check(), m, "adam L2 exp_avg" + tag);
      same(gv.check(), v, "adam L2 exp_avg_sq" + tag);
      same(gout.check(), out, "adam L2 out" + tag);

      Tensor q = random_tensor({n}, 105);
      Guarded gq(q), gqout(Shape{n}, out_dt);
      ops::SgdParams sp;
      sp.lr = 0.05;
      sp.weight_decay = 1e-4;  // momentum 0: no buffer
      Tensor qout = Tensor::empty({n}, out_dt);
      ops::sgd_step(q, g, Tensor(), sp, qout);
      ops::sgd_step(gq.t, gg.t, Tensor(), sp, gqout.t);
      same(gq.check(), q, "sgd without momentum param" + tag);
      same(gqout.check(), qout, "sgd without momentum out" + tag);
    }
  }
  ops::set_simd_level(ops::best_simd_level());
}

}  // namespace
}  // namespace tandem
