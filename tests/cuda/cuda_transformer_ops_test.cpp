// The transformer ops (tandem/transformer_ops.h) on cuda against the cpu ops on the same
// inputs, through the public entry points, with sentinel bytes around every device tensor.
// f32: both compute in f32 and differ in the order of sums (and the exponentials' last bits):
// |cuda - cpu| <= 1e-4 |cpu| + 1e-4 (values and gradients of order one, sums of at most a few
// hundred terms). bf16 and f16: the inputs are rounded to the dtype first and both sides read
// the same values; each data output is rounded once on each side, so it may differ by one
// step of the dtype (2^-8, 2^-11 relative) plus the f32 terms; the cuda attention and
// classifier may also keep their probabilities in the dtype before the products (as
// PyTorch's do): 2^-6 (bf16) and 2^-9 (f16) of the largest value for those outputs.
// Skipped when no CUDA device is present.
#include <gtest/gtest.h>

#include <cmath>

#include "cuda/cuda_test_util.h"
#include "tandem/transformer_ops.h"

namespace tandem {
namespace {

using testing::Guarded;
using testing::random_tensor;

Tensor ids(const Shape& shape, int64_t vocab, uint64_t seed) {
  Tensor t = Tensor::empty(shape, DType::i64);
  Philox rng(seed, 5);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<int64_t>()[i] = rng.randint(static_cast<uint32_t>(vocab));
  return t;
}

// max |a - b| <= rel_max * max|b| + (f32 terms) for tensors of one shape (any float dtype).
void expect_near_max(const Tensor& a, const Tensor& b, double rel_max, const char* what) {
  ASSERT_EQ(a.shape(), b.shape()) << what;
  double err = 0, top = 0;
  for (int64_t i = 0; i < a.numel(); ++i) {
    err = std::max(err, std::fabs(a.item(i) - b.item(i)));
    top = std::max(top, std::fabs(b.item(i)));
  }
  EXPECT_LE(err, rel_max * top + 1e-4) << what << " (largest value " << top << ")";
}

class CudaTransformerOps : public ::testing::TestWithParam<DType> {
 protected:
  DType dt() const { return GetParam(); }
  // Values rounded to the test's dtype, as an f32-or-16-bit host tensor.
  Tensor data(const Shape& s, uint64_t seed) const {
    const Tensor t = random_tensor(s, seed);
    return dt() == DType::f32 ? t : t.to(dt());
  }
  double step() const { return dt() == DType::f32 ? 1e-4 : dt() == DType::bf16 ? 1.0 / 128 : 1.0 / 1024; }
  double loose() const { return dt() == DType::f32 ? 1e-4 : dt() == DType::bf16 ? 1.0 / 64 : 1.0 / 512; }
};

TEST_P(CudaTransformerOps, EmbeddingLayerNormGeluAdd) {
  TD_REQUIRE_CUDA();
  const Tensor tok = ids({3, 7}, 29, 1), wte = data({29, 16}, 2), wpe = data({9, 16}, 3), dy = data({3, 7, 16}, 4);
  Tensor y = Tensor::empty({3, 7, 16}, dt()), dwte = Tensor::empty({29, 16}), dwpe = Tensor::empty({9, 16});
  ops::embedding_forward(tok, wte, wpe, y);
  ops::embedding_backward(dy, tok, dwte, dwpe, false);
  Guarded gtok(tok), gwte(wte), gwpe(wpe), gdy(dy), gy(Shape{3, 7, 16}, dt()), gdwte(Shape{29, 16}, DType::f32),
      gdwpe(Shape{9, 16}, DType::f32);
  ops::embedding_forward(gtok.t, gwte.t, gwpe.t, gy.t);
  ops::embedding_backward(gdy.t, gtok.t, gdwte.t, gdwpe.t, false);
  expect_near_max(gy.check(), y, step(), "embedding y");
  expect_near_max(gdwte.check(), dwte, 1e-5, "embedding dwte");
  expect_near_max(gdwpe.check(), dwpe, 1e-5, "embedding dwpe");

  const Tensor x = data({21, 16}, 5), g = random_tensor({16}, 6, 0.5f, 1.5f), b = random_tensor({16}, 7);
  const Tensor ldy = data({21, 16}, 8);
  Tensor ly = Tensor::empty({21, 16}, dt()), m = Tensor::empty({21}), r = Tensor::empty({21});
  Tensor ldx = Tensor::empty({21, 16}, dt()), dg = Tensor::empty({16}), db = Tensor::empty({16});
  ops::layer_norm_forward(x, g, b, 1e-5f, ly, m, r);
  ops::layer_norm_backward(ldy, x, g, m, r, ldx, dg, db, false);
  Guarded gx(x), gg(g), gb(b), gldy(ldy), gly(Shape{21, 16}, dt()), gm(Shape{21}, DType::f32),
      gr(Shape{21}, DType::f32), gldx(Shape{21, 16}, dt()), gdg(Shape{16}, DType::f32), gdb(Shape{16}, DType::f32);
  ops::layer_norm_forward(gx.t, gg.t, gb.t, 1e-5f, gly.t, gm.t, gr.t);
  ops::layer_norm_backward(gldy.t, gx.t, gg.t, gm.t, gr.t, gldx.t, gdg.t, gdb.t, false);
  expect_near_max(gly.check(), ly, step(), "layer norm y");
  expect_near_max(gr.check(), r, 1e-5, "layer norm rstd");
  expect_near_max(gldx.check(), ldx, step(), "layer norm dx");
  expect_near_max(gdg.check(), dg, 1e-4, "layer norm dgamma");
  expect_near_max(gdb.check(), db, 1e-4, "layer norm dbeta");

  Tensor gy2 = Tensor::empty({21, 16}, dt()), gdx2 = Tensor::empty({21, 16}, dt()), s = Tensor::empty({21, 16}, dt());
  ops::gelu_forward(x, gy2);
  ops::gelu_backward(ldy, x, gdx2);
  ops::add_forward(gy2, gdx2, s);
  Guarded cy(Shape{21, 16}, dt()), cdx(Shape{21, 16}, dt()), cs(Shape{21, 16}, dt());
  ops::gelu_forward(gx.t, cy.t);
  ops::gelu_backward(gldy.t, gx.t, cdx.t);
  ops::add_forward(cy.t, cdx.t, cs.t);
  expect_near_max(cy.check(), gy2, step(), "gelu y");
  expect_near_max(cdx.check(), gdx2, step(), "gelu dx");
  expect_near_max(cs.check(), s, 2 * step(), "add");
}

TEST_P(CudaTransformerOps, AttentionAndClassifier) {
  TD_REQUIRE_CUDA();
  const int64_t b = 2, t = 70, c = 48, h = 3;  // T crosses 64-row blocks
  const Tensor qkv = data({b, t, 3 * c}, 11), dy = data({b, t, c}, 12);
  Tensor y = Tensor::empty({b, t, c}, dt()), lse = Tensor::empty({b, h, t}), dqkv = Tensor::empty({b, t, 3 * c}, dt());
  ops::attention_forward(qkv, h, y, lse);
  ops::attention_backward(dy, qkv, y, lse, h, dqkv);
  Guarded gq(qkv), gdy(dy), gy(Shape{b, t, c}, dt()), gl(Shape{b, h, t}, DType::f32), gd(Shape{b, t, 3 * c}, dt());
  ops::attention_forward(gq.t, h, gy.t, gl.t);
  ops::attention_backward(gdy.t, gq.t, gy.t, gl.t, h, gd.t);
  expect_near_max(gy.check(), y, loose(), "attention y");
  expect_near_max(gl.check(), lse, 1e-5, "attention lse");
  expect_near_max(gd.check(), dqkv, loose(), "attention dqkv");

  const Tensor hh = data({37, 32}, 13), w = data({53, 32}, 14);
  Tensor tg = ids({37}, 53, 15);
  tg.data<int64_t>()[4] = -1;  // ignored
  Tensor dh = Tensor::empty({37, 32}, dt()), dw = Tensor::empty({53, 32}), m = Tensor::zeros({4});
  ops::classifier_cross_entropy(hh, w, tg, -1, 1.0f, dh, dw, false, m);
  Guarded gh(hh), gw(w), gt(tg), gdh(Shape{37, 32}, dt()), gdw(Shape{53, 32}, DType::f32), gm(Tensor::zeros({4}));
  ops::classifier_cross_entropy(gh.t, gw.t, gt.t, -1, 1.0f, gdh.t, gdw.t, false, gm.t);
  const Tensor mm = gm.check();
  EXPECT_EQ(mm.item(2), 36.0);
  EXPECT_EQ(mm.item(3), 0.0);
  EXPECT_NEAR(mm.item(0) / mm.item(2), m.item(0) / m.item(2), 1e-5 * m.item(0) / m.item(2) + loose());
  expect_near_max(gdh.check(), dh, loose(), "classifier dh");
  expect_near_max(gdw.check(), dw, loose(), "classifier dw");
}

// A loss scale on the device (a LossScaler's state, element 0: 1024): the gradients are the
// cpu op's with grad_loss 1024, within the dtype's step (the scale replaces cuda's row-count
// factor in the 16-bit copy of the logits' gradient, so no f16 gradient is flushed).
TEST_P(CudaTransformerOps, ClassifierLossScaledOnTheDevice) {
  TD_REQUIRE_CUDA();
  const Tensor hh = data({37, 32}, 31), w = data({53, 32}, 32);
  const Tensor tg = ids({37}, 53, 33);
  Tensor dh = Tensor::empty({37, 32}, dt()), dw = Tensor::empty({53, 32});
  ops::classifier_cross_entropy(hh, w, tg, -1, 1024.0f, dh, dw, false, Tensor());
  Tensor state = Tensor::zeros({4});
  state.data<float>()[0] = 1024.0f;
  Guarded gh(hh), gw(w), gt(tg), gs(state), gdh(Shape{37, 32}, dt()), gdw(Shape{53, 32}, DType::f32);
  ops::classifier_cross_entropy(gh.t, gw.t, gt.t, -1, 1.0f, gdh.t, gdw.t, false, Tensor(), gs.t);
  expect_near_max(gdh.check(), dh, loose(), "scaled classifier dh");
  expect_near_max(gdw.check(), dw, loose(), "scaled classifier dw");
  gs.check();
}

TEST_P(CudaTransformerOps, LinearInOut) {
  TD_REQUIRE_CUDA();
  const int64_t n = 37, in = 48, out = 65;
  const Tensor x = data({n, in}, 21), w = data({in, out}, 22), b = random_tensor({out}, 23), dy = data({n, out}, 24);
  Tensor y = Tensor::empty({n, out}, dt()), dx = Tensor::empty({n, in}, dt());
  Tensor dw = random_tensor({in, out}, 25), db = random_tensor({out}, 26);
  Guarded gx(x), gw(w), gb(b), gdy(dy), gy(Shape{n, out}, dt()), gdx(Shape{n, in}, dt()), gdw(dw), gdb(db);
  ops::linear_in_out_forward(x, w, b, y);
  ops::linear_in_out_backward_data(dy, w, dx);
  ops::linear_in_out_backward_weights(x, dy, dw, db, true);
  ops::linear_in_out_forward(gx.t, gw.t, gb.t, gy.t);
  ops::linear_in_out_backward_data(gdy.t, gw.t, gdx.t);
  ops::linear_in_out_backward_weights(gx.t, gdy.t, gdw.t, gdb.t, true);
  expect_near_max(gy.check(), y, step(), "linear_in_out y");
  expect_near_max(gdx.check(), dx, step(), "linear_in_out dx");
  expect_near_max(gdw.check(), dw, 1e-5, "linear_in_out dw");
  expect_near_max(gdb.check(), db, 1e-5, "linear_in_out db");
}

INSTANTIATE_TEST_SUITE_P(Dtypes, CudaTransformerOps, ::testing::Values(DType::f32, DType::bf16, DType::f16),
                         [](const auto& i) { return std::string(dtype_name(i.param)); });

}  // namespace
}  // namespace tandem
