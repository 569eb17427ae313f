// The fused classifier + cross-entropy on the cpu against a float64 reference (logits,
// softmax and both gradients written out), whose gradients are checked by finite differences.
// Tolerances (relative to the largest reference value of each output):
//  - f32: loss 1e-6 (a C = 24-term dot product per logit, a V-term sum of exponentials);
//    dh and dw 1e-5 (sums over V = 300 or N = 37 terms of the f32 gradient).
//  - bf16 (h and w rounded to bf16): logits come out of oneDNN's bf16 matmul in f32 (exact
//    products, f32 sums), so the loss keeps the f32 bound (1e-5: oneDNN's f32 sums order
//    differently). The gradient of the logits is rounded to bf16 once (2^-8 of each term)
//    before the two products, and dh is rounded once more: element-wise
//    |err| <= 2^-8 |ref| + 2^-8 S + 1e-5 max|ref|, S = the same product on absolute values.
#include <gtest/gtest.h>

#include <cmath>

#include "backend/cpu/cpu_isa.h"
#include "backend/cpu/cpu_transformer.h"
#include "core/transformer_reference.h"

namespace tandem::testing {
namespace {

using ref::Vec;

constexpr int64_t kIgnore = -1;

struct Case {
  int64_t n, c, v;
  Vec h, w;
  std::vector<int64_t> tgt;
};

Case make_case(int64_t n, int64_t c, int64_t v, DType dt, uint64_t seed) {
  Case k{n, c, v, ref::random_values(n * c, seed, dt, -2, 2), ref::random_values(v * c, seed + 1, dt, -2, 2), {}};
  Philox rng(seed, 5);
  for (int64_t i = 0; i < n; ++i) k.tgt.push_back(rng.randint(static_cast<uint32_t>(v)));
  return k;
}

Tensor targets_of(const std::vector<int64_t>& t, DType dt) {
  const int64_t n = static_cast<int64_t>(t.size());
  Tensor out = Tensor::empty({n}, dt);
  for (int64_t i = 0; i < n; ++i) {
    if (dt == DType::i32)
      out.data<int32_t>()[i] = static_cast<int32_t>(t[i]);
    else
      out.data<int64_t>()[i] = t[i];
  }
  return out;
}

// S for the bf16 bound: sum over the products of |dlogits| with |w| (for dh) and |h| (for dw).
std::pair<Vec, Vec> abs_products(const Case& k) {
  Case a = k;
  for (double& x : a.h) x = std::fabs(x);
  for (double& x : a.w) x = std::fabs(x);
  const int64_t counted = ref::classifier(k.h, k.w, k.tgt, k.n, k.c, k.v).counted;
  Vec sh(k.n * k.c, 0.0), sw(k.v * k.c, 0.0);
  for (int64_t i = 0; i < k.n; ++i) {
    if (k.tgt[i] < 0 || k.tgt[i] >= k.v) continue;
    Vec z(k.v);
    double mx = -INFINITY, sum = 0.0;
    for (int64_t j = 0; j < k.v; ++j) {
      double s = 0.0;
      for (int64_t c = 0; c < k.c; ++c) s += k.h[i * k.c + c] * k.w[j * k.c + c];
      z[j] = s;
      mx = std::max(mx, s);
    }
    for (double x : z) sum += std::exp(x - mx);
    for (int64_t j = 0; j < k.v; ++j) {
      const double g = std::fabs(std::exp(z[j] - mx) / sum - (j == k.tgt[i] ? 1.0 : 0.0)) / counted;
      for (int64_t c = 0; c < k.c; ++c) {
        sh[i * k.c + c] += g * a.w[j * k.c + c];
        sw[j * k.c + c] += g * a.h[i * k.c + c];
      }
    }
  }
  return {sh, sw};
}

class Classifier : public ::testing::TestWithParam<std::tuple<DType, int64_t>> {
 protected:
  void SetUp() override {
    if (std::get<0>(GetParam()) == DType::bf16 && !ops::cpu::native_bf16())
      GTEST_SKIP() << "oneDNN has no bf16 matmul at this CPU level (the storage wrapper widens to f32 there)";
  }
};

// Block rows 0 (one block) and 8 (five blocks, the last partial); some rows ignored, one
// target outside the vocabulary.
TEST_P(Classifier, MatchesFloat64) {
  const auto [dt, block] = GetParam();
  Case k = make_case(37, 24, 300, dt, 1);
  k.tgt[3] = kIgnore;
  k.tgt[20] = kIgnore;
  k.tgt[30] = 300 + 5;  // invalid: counted in metrics[3]
  const Tensor h = ref::tensor_of(k.h, {k.n, k.c}, dt), w = ref::tensor_of(k.w, {k.v, k.c}, dt);
  Tensor dh = Tensor::empty({k.n, k.c}, dt), dw = Tensor::full({k.v, k.c}, 0.0f), m = Tensor::zeros({4});
  const float loss = ops::cpu::classifier_cross_entropy(h, w, targets_of(k.tgt, DType::i64), kIgnore, 1.0f, dh, dw,
                                                        false, m, block);
  const ref::ClassifierOut want = ref::classifier(k.h, k.w, k.tgt, k.n, k.c, k.v);
  ASSERT_EQ(want.counted, 34);
  const bool f32 = dt == DType::f32;
  EXPECT_NEAR(loss, want.loss, (f32 ? 1e-6 : 1e-5) * want.loss);
  EXPECT_NEAR(m.item(0), want.loss * 34, 1e-5 * want.loss * 34);
  EXPECT_EQ(m.item(1), static_cast<double>(want.correct));
  EXPECT_EQ(m.item(2), 34.0);
  EXPECT_EQ(m.item(3), 1.0);
  if (f32) {
    EXPECT_LE(ref::rel_err(ref::values_of(dh), want.dh), 1e-5);
    EXPECT_LE(ref::rel_err(ref::values_of(dw), want.dw), 1e-5);
  } else {
    const auto [sh, sw] = abs_products(k);
    const Vec gh = ref::values_of(dh), gw = ref::values_of(dw);
    const double u = 1.0 / 256, mh = ref::max_abs(want.dh), mw = ref::max_abs(want.dw);
    for (size_t i = 0; i < gh.size(); ++i)
      ASSERT_LE(std::fabs(gh[i] - want.dh[i]), u * std::fabs(want.dh[i]) + u * sh[i] + 1e-5 * mh) << "dh " << i;
    for (size_t i = 0; i < gw.size(); ++i)
      ASSERT_LE(std::fabs(gw[i] - want.dw[i]), u * sw[i] + 1e-5 * mw) << "dw " << i;
  }
  for (int64_t j = 0; j < k.c; ++j) {  // ignored and invalid rows have no gradient
    EXPECT_EQ(dh.item(3 * k.c + j), 0.0);
    EXPECT_EQ(dh.item(30 * k.c + j), 0.0);
  }
}

INSTANTIATE_TEST_SUITE_P(Blocks, Classifier,
                         ::testing::Combine(::testing::Values(DType::f32, DType::bf16), ::testing::Values(0, 8)),
                         [](const auto& i) {
                           return std::string(dtype_name(std::get<0>(i.param))) + "_block" +
                                  std::to_string(std::get<1>(i.param));
                         });

// grad_loss scales both gradients; accumulate adds into dw (the tied embedding's gradient);
// i32 targets; no gradients requested gives the loss alone.
TEST(Classifier, ScalesAccumulatesAndEvaluates) {
  const Case k = make_case(10, 8, 40, DType::f32, 2);
  const Tensor h = ref::tensor_of(k.h, {k.n, k.c}, DType::f32), w = ref::tensor_of(k.w, {k.v, k.c}, DType::f32);
  const ref::ClassifierOut want = ref::classifier(k.h, k.w, k.tgt, k.n, k.c, k.v);
  Tensor dh = Tensor::empty({k.n, k.c}), dw = Tensor::full({k.v, k.c}, 0.5f);
  ops::cpu::classifier_cross_entropy(h, w, targets_of(k.tgt, DType::i32), kIgnore, 0.25f, dh, dw, true, Tensor(), 3);
  Vec want_dh = want.dh, want_dw = want.dw;
  for (double& x : want_dh) x *= 0.25;
  for (double& x : want_dw) x = 0.5 + 0.25 * x;
  EXPECT_LE(ref::rel_err(ref::values_of(dh), want_dh), 1e-5);
  EXPECT_LE(ref::rel_err(ref::values_of(dw), want_dw), 1e-6);
  const float eval = ops::cpu::classifier_cross_entropy(h, w, targets_of(k.tgt, DType::i64), kIgnore, 1.0f, Tensor(),
                                                        Tensor(), false, Tensor());
  EXPECT_NEAR(eval, want.loss, 1e-6 * want.loss);
}

TEST(Classifier, AllRowsIgnoredGivesNanAndZeroGradients) {
  const Case k = make_case(4, 8, 16, DType::f32, 3);
  const Tensor h = ref::tensor_of(k.h, {k.n, k.c}, DType::f32), w = ref::tensor_of(k.w, {k.v, k.c}, DType::f32);
  Tensor dh = Tensor::full({k.n, k.c}, 3.0f), dw = Tensor::full({k.v, k.c}, 3.0f), m = Tensor::zeros({4});
  const float loss = ops::cpu::classifier_cross_entropy(h, w, targets_of({-1, -1, -1, -1}, DType::i64), kIgnore, 1.0f,
                                                        dh, dw, false, m);
  EXPECT_TRUE(std::isnan(loss));
  EXPECT_EQ(ref::max_abs(ref::values_of(dh)), 0.0);
  EXPECT_EQ(ref::max_abs(ref::values_of(dw)), 0.0);
  EXPECT_EQ(ref::values_of(m), (Vec{0, 0, 0, 0}));
}

TEST(ClassifierReference, GradientsAreTheLossGradients) {
  const Case k = make_case(3, 4, 5, DType::f32, 4);
  const ref::ClassifierOut o = ref::classifier(k.h, k.w, k.tgt, k.n, k.c, k.v);
  const auto by_h = [&](const Vec& h) { return ref::classifier(h, k.w, k.tgt, k.n, k.c, k.v).loss; };
  const auto by_w = [&](const Vec& w) { return ref::classifier(k.h, w, k.tgt, k.n, k.c, k.v).loss; };
  EXPECT_LE(ref::rel_err(o.dh, ref::finite_diff(by_h, k.h)), 1e-6);
  EXPECT_LE(ref::rel_err(o.dw, ref::finite_diff(by_w, k.w)), 1e-6);
}

}  // namespace
}  // namespace tandem::testing
