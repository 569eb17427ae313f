// The transformer ops on the cpu against PyTorch 2.15 (tests/golden/transformer_ops.safetensors,
// made by scripts/golden_transformer_ops.py), in f32 and bf16; errors relative to the largest
// torch value of each output.
// Tolerances:
//  - f32: 1e-5 everywhere (both sides compute in f32 and differ only in the order of sums);
//    the embedding forward is exact (one f32 add per element on both sides).
//  - bf16: both sides compute in f32 and round once, so an element may land one bf16 step
//    (2^-8 relative) apart where the f32 values straddle a rounding boundary: 2^-7 for layer
//    norm's y and dx, GELU, and dw (torch's passes through the bf16 gradient of w.to(bf16):
//    one rounding). The embedding forward is exact (one f32 add, one rounding on both sides).
//    The f32 gradients dwte, dwpe, dgamma and dbeta are less exact on torch's side than on
//    tandem's: torch accumulates the embedding's in the bf16 gradient of wte.to(bf16) and
//    layer norm's partial sums in bf16 (3e-3 from the float64 sums on this data; tandem's are
//    within 1e-5 of float64, tests/core/layer_norm_test.cpp), hence 2^-5 for them.
//    torch's bf16 attention also rounds the probabilities to bf16 before P v and in the
//    backward, hence 2^-6 for y and dqkv. torch rounds the logits to bf16 before the
//    cross-entropy (tandem keeps them in f32): each logit moves by up to 2^-9 |z|, so the loss
//    by up to 2^-8 max|z| (max|z| about 16 here: 0.06), and dh gets 2^-6.
#include <gtest/gtest.h>

#include <cmath>

#include "backend/cpu/cpu_isa.h"
#include "backend/cpu/cpu_transformer.h"
#include "core/transformer_reference.h"
#include "tandem/safetensors.h"

namespace tandem::testing {
namespace {

using ref::Vec;

const NamedTensors& golden() {
  static const NamedTensors g = load_safetensors(TANDEM_SOURCE_DIR "/tests/golden/transformer_ops.safetensors");
  return g;
}

class TransformerGolden : public ::testing::TestWithParam<DType> {
 protected:
  DType dt() const { return GetParam(); }
  std::string prefix() const { return std::string(dtype_name(dt())) + "."; }
  // The golden tensor `name` (stored as f32 or i64) as dtype `as` (exact for bf16 cases).
  Tensor gold(const std::string& name, DType as) const {
    const Tensor& t = find_tensor(golden(), prefix() + name, "transformer golden");
    return t.dtype() == as ? t.clone() : t.to(as);
  }
  Tensor data(const std::string& name) const { return gold(name, dt()); }
  Vec want(const std::string& name) const { return ref::values_of(gold(name, DType::f32)); }
  double tol(double f32, double bf16) const { return dt() == DType::f32 ? f32 : bf16; }
};

TEST_P(TransformerGolden, Embedding) {
  const Tensor tok = gold("emb.tokens", DType::i64), wte = data("emb.wte"), wpe = data("emb.wpe");
  const int64_t b = tok.size(0), t = tok.size(1), c = wte.size(1);
  Tensor y = Tensor::empty({b, t, c}, dt());
  ops::cpu::embedding_forward(tok, wte, wpe, y);
  EXPECT_EQ(ref::values_of(y), want("emb.y"));
  Tensor dwte = Tensor::empty(wte.shape()), dwpe = Tensor::empty(wpe.shape());
  ops::cpu::embedding_backward(data("emb.dy"), tok, dwte, dwpe, false);
  EXPECT_LE(ref::rel_err(ref::values_of(dwte), want("emb.dwte")), tol(1e-5, 1.0 / 32));
  EXPECT_LE(ref::rel_err(ref::values_of(dwpe), want("emb.dwpe")), tol(1e-5, 1.0 / 32));
}

TEST_P(TransformerGolden, LayerNorm) {
  const Tensor x = data("ln.x"), g = gold("ln.gamma", DType::f32), b = gold("ln.beta", DType::f32);
  const int64_t n = x.size(0), c = x.size(1);
  Tensor y = Tensor::empty({n, c}, dt()), mean = Tensor::empty({n}), rstd = Tensor::empty({n});
  ops::cpu::layer_norm_forward(x, g, b, 1e-5f, y, mean, rstd);
  EXPECT_LE(ref::rel_err(ref::values_of(y), want("ln.y")), tol(1e-5, 1.0 / 128));
  Tensor dx = Tensor::empty({n, c}, dt()), dg = Tensor::empty({c}), db = Tensor::empty({c});
  ops::cpu::layer_norm_backward(data("ln.dy"), x, g, mean, rstd, dx, dg, db, false);
  EXPECT_LE(ref::rel_err(ref::values_of(dx), want("ln.dx")), tol(1e-5, 1.0 / 128));
  EXPECT_LE(ref::rel_err(ref::values_of(dg), want("ln.dgamma")), tol(1e-5, 1.0 / 32));
  EXPECT_LE(ref::rel_err(ref::values_of(db), want("ln.dbeta")), tol(1e-5, 1.0 / 32));
}

TEST_P(TransformerGolden, Gelu) {
  const Tensor x = data("gelu.x");
  Tensor y = Tensor::empty(x.shape(), dt()), dx = Tensor::empty(x.shape(), dt());
  ops::cpu::gelu_forward(x, y);
  ops::cpu::gelu_backward(data("gelu.dy"), x, dx);
  EXPECT_LE(ref::rel_err(ref::values_of(y), want("gelu.y")), tol(1e-5, 1.0 / 128));
  EXPECT_LE(ref::rel_err(ref::values_of(dx), want("gelu.dx")), tol(1e-5, 1.0 / 128));
}

TEST_P(TransformerGolden, Attention) {
  const Tensor qkv = data("attn.qkv");
  const int64_t b = qkv.size(0), t = qkv.size(1), c = qkv.size(2) / 3, h = 2;
  Tensor y = Tensor::empty({b, t, c}, dt()), lse = Tensor::empty({b, h, t}), dqkv = Tensor::empty(qkv.shape(), dt());
  ops::cpu::attention_forward(qkv, h, y, lse);
  ops::cpu::attention_backward(data("attn.dy"), qkv, y, lse, h, dqkv);
  EXPECT_LE(ref::rel_err(ref::values_of(y), want("attn.y")), tol(1e-5, 1.0 / 64));
  EXPECT_LE(ref::rel_err(ref::values_of(dqkv), want("attn.dqkv")), tol(1e-5, 1.0 / 64));
}

TEST_P(TransformerGolden, ClassifierCrossEntropy) {
  if (dt() == DType::bf16 && !ops::cpu::native_bf16())
    GTEST_SKIP() << "oneDNN has no bf16 matmul at this CPU level (the storage wrapper widens to f32 there)";
  const Tensor h = data("cls.h"), w = data("cls.w");
  Tensor dh = Tensor::empty(h.shape(), dt()), dw = Tensor::empty(w.shape());
  const float loss = ops::cpu::classifier_cross_entropy(h, w, gold("cls.targets", DType::i64), -1, 1.0f, dh, dw,
                                                        false, Tensor());
  EXPECT_NEAR(loss, want("cls.loss")[0], tol(1e-6 * want("cls.loss")[0], 0.06));
  EXPECT_LE(ref::rel_err(ref::values_of(dh), want("cls.dh")), tol(1e-5, 1.0 / 64));
  EXPECT_LE(ref::rel_err(ref::values_of(dw), want("cls.dw")), tol(1e-5, 1.0 / 128));
}

INSTANTIATE_TEST_SUITE_P(Dtypes, TransformerGolden, ::testing::Values(DType::f32, DType::bf16),
                         [](const auto& i) { return std::string(dtype_name(i.param)); });

}  // namespace
}  // namespace tandem::testing
