// The transformer ops through their public entry points (tandem/transformer_ops.h), on cpu and
// on virt, against PyTorch 2.15 (tests/golden/transformer_ops.safetensors, made by
// scripts/golden_transformer_ops.py), in f32 and bf16; errors relative to the largest torch
// value of each output.
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

#include <tuple>

#include "core/transformer_reference.h"
#include "core/virt_test_util.h"
#include "tandem/safetensors.h"
#include "tandem/transformer_ops.h"

namespace tandem::testing {
namespace {

using ref::Vec;

const NamedTensors& golden() {
  static const NamedTensors g = load_safetensors(TANDEM_SOURCE_DIR "/tests/golden/transformer_ops.safetensors");
  return g;
}

class TransformerGolden : public ::testing::TestWithParam<std::tuple<Device, DType>> {
 protected:
  Device dev() const { return std::get<0>(GetParam()); }
  DType dt() const { return std::get<1>(GetParam()); }
  std::string prefix() const { return std::string(dtype_name(dt())) + "."; }
  // The golden tensor `name` (stored as f32 or i64) as dtype `as` (exact for bf16 cases), on
  // the host.
  Tensor gold(const std::string& name, DType as) const {
    const Tensor& t = find_tensor(golden(), prefix() + name, "transformer golden");
    return t.dtype() == as ? t.clone() : t.to(as);
  }
  // The same on the test's device.
  Tensor input(const std::string& name, DType as) const { return on(dev(), gold(name, as)); }
  Tensor data(const std::string& name) const { return input(name, dt()); }
  Tensor empty(const Shape& shape, DType as = DType::f32) const { return Tensor::empty(shape, as, dev()); }
  Vec want(const std::string& name) const { return ref::values_of(gold(name, DType::f32)); }
  static Vec got(const Tensor& t) { return ref::values_of(to_host(t)); }
  double tol(double f32, double bf16) const { return dt() == DType::f32 ? f32 : bf16; }
};

TEST_P(TransformerGolden, Embedding) {
  const Tensor tok = input("emb.tokens", DType::i64), wte = data("emb.wte"), wpe = data("emb.wpe");
  const int64_t b = tok.size(0), t = tok.size(1), c = wte.size(1);
  Tensor y = empty({b, t, c}, dt());
  ops::embedding_forward(tok, wte, wpe, y);
  EXPECT_EQ(got(y), want("emb.y"));
  Tensor dwte = empty(wte.shape()), dwpe = empty(wpe.shape());
  ops::embedding_backward(data("emb.dy"), tok, dwte, dwpe, false);
  EXPECT_LE(ref::rel_err(got(dwte), want("emb.dwte")), tol(1e-5, 1.0 / 32));
  EXPECT_LE(ref::rel_err(got(dwpe), want("emb.dwpe")), tol(1e-5, 1.0 / 32));
}

TEST_P(TransformerGolden, LayerNorm) {
  const Tensor x = data("ln.x"), g = input("ln.gamma", DType::f32), b = input("ln.beta", DType::f32);
  const int64_t n = x.size(0), c = x.size(1);
  Tensor y = empty({n, c}, dt()), mean = empty({n}), rstd = empty({n});
  ops::layer_norm_forward(x, g, b, 1e-5f, y, mean, rstd);
  EXPECT_LE(ref::rel_err(got(y), want("ln.y")), tol(1e-5, 1.0 / 128));
  Tensor dx = empty({n, c}, dt()), dg = empty({c}), db = empty({c});
  ops::layer_norm_backward(data("ln.dy"), x, g, mean, rstd, dx, dg, db, false);
  EXPECT_LE(ref::rel_err(got(dx), want("ln.dx")), tol(1e-5, 1.0 / 128));
  EXPECT_LE(ref::rel_err(got(dg), want("ln.dgamma")), tol(1e-5, 1.0 / 32));
  EXPECT_LE(ref::rel_err(got(db), want("ln.dbeta")), tol(1e-5, 1.0 / 32));
}

TEST_P(TransformerGolden, Gelu) {
  const Tensor x = data("gelu.x");
  Tensor y = empty(x.shape(), dt()), dx = empty(x.shape(), dt());
  ops::gelu_forward(x, y);
  ops::gelu_backward(data("gelu.dy"), x, dx);
  EXPECT_LE(ref::rel_err(got(y), want("gelu.y")), tol(1e-5, 1.0 / 128));
  EXPECT_LE(ref::rel_err(got(dx), want("gelu.dx")), tol(1e-5, 1.0 / 128));
}

TEST_P(TransformerGolden, Attention) {
  const Tensor qkv = data("attn.qkv");
  const int64_t b = qkv.size(0), t = qkv.size(1), c = qkv.size(2) / 3, h = 2;
  Tensor y = empty({b, t, c}, dt()), lse = empty({b, h, t}), dqkv = empty(qkv.shape(), dt());
  ops::attention_forward(qkv, h, y, lse);
  ops::attention_backward(data("attn.dy"), qkv, y, lse, h, dqkv);
  EXPECT_LE(ref::rel_err(got(y), want("attn.y")), tol(1e-5, 1.0 / 64));
  EXPECT_LE(ref::rel_err(got(dqkv), want("attn.dqkv")), tol(1e-5, 1.0 / 64));
}

// The loss is read from the metrics (its sum over the counted rows and their count).
TEST_P(TransformerGolden, ClassifierCrossEntropy) {
  const Tensor h = data("cls.h"), w = data("cls.w");
  Tensor dh = empty(h.shape(), dt()), dw = empty(w.shape()), metrics = on(dev(), Tensor::zeros({4}));
  ops::classifier_cross_entropy(h, w, input("cls.targets", DType::i64), -1, 1.0f, dh, dw, false, metrics);
  const Vec m = got(metrics);
  EXPECT_EQ(m[2], static_cast<double>(h.size(0) - 2));  // two rows have target -1 (ignore_index)
  EXPECT_EQ(m[3], 0.0);
  EXPECT_NEAR(m[0] / m[2], want("cls.loss")[0], tol(1e-6 * want("cls.loss")[0], 0.06));
  EXPECT_LE(ref::rel_err(got(dh), want("cls.dh")), tol(1e-5, 1.0 / 64));
  EXPECT_LE(ref::rel_err(got(dw), want("cls.dw")), tol(1e-5, 1.0 / 128));
}

INSTANTIATE_TEST_SUITE_P(DevicesAndDtypes, TransformerGolden,
                         ::testing::Combine(::testing::Values(Device{}, Device{DeviceKind::virt, 0}),
                                            ::testing::Values(DType::f32, DType::bf16)),
                         [](const auto& i) {
                           return std::string(std::get<0>(i.param).is_host() ? "cpu_" : "virt_") +
                                  dtype_name(std::get<1>(i.param));
                         });

}  // namespace
}  // namespace tandem::testing
