// Fused causal self-attention on the cpu against the float64 reference (written with the
// plain chain rule through the softmax, not the lse form the kernel uses), whose backward is
// checked by finite differences.
// Tolerances (errors relative to the largest reference value of each output):
//  - f32: 1e-5 for y, lse and dqkv. Scores are D = 16-term f32 dot products (~2^-20
//    relative), the exponentials are within 2^-22 and the products P v and dS k sum at most
//    T = 70 terms; together a few 1e-7, bounded with a margin of 10.
//  - bf16 (inputs rounded to bf16): y is rounded once, so element-wise 2^-8 |ref| plus the
//    f32 term. dqkv is rounded once too, but the backward also reads the forward's y as bf16
//    (Di = sum dO * O, as flash attention does), which moves dS = P (dP - Di) by up to
//    2^-8 |Di| per row: the bound is 2^-8 |ref| + 2^-7 max|ref|.
#include <gtest/gtest.h>

#include "backend/cpu/cpu_backend.h"
#include "core/transformer_reference.h"
#include "tandem/ops.h"

namespace tandem::testing {
namespace {

using ref::Vec;

struct Outputs {
  Vec y, lse, dqkv;
};

Outputs run_attention(const Vec& qkv, const Vec& dy, const ref::AttentionDims& s, DType dt) {
  const Tensor tq = ref::tensor_of(qkv, {s.b, s.t, 3 * s.c}, dt);
  Tensor y = Tensor::empty({s.b, s.t, s.c}, dt), lse = Tensor::empty({s.b, s.h, s.t});
  ops::CpuBackend().attention_forward(tq, s.h, y, lse);
  Tensor dqkv = Tensor::empty({s.b, s.t, 3 * s.c}, dt);
  ops::CpuBackend().attention_backward(ref::tensor_of(dy, {s.b, s.t, s.c}, dt), tq, y, lse, s.h, dqkv);
  return {ref::values_of(y), ref::values_of(lse), ref::values_of(dqkv)};
}

class Attention : public ::testing::TestWithParam<DType> {};

// T = 70 crosses the 64-query block boundary with a partial block.
TEST_P(Attention, MatchesFloat64) {
  const DType dt = GetParam();
  const ref::AttentionDims s{2, 70, 48, 3};
  const Vec qkv = ref::random_values(s.b * s.t * 3 * s.c, 1, dt, -1.5, 1.5);
  const Vec dy = ref::random_values(s.b * s.t * s.c, 2, dt);
  const Outputs got = run_attention(qkv, dy, s, dt);
  const ref::AttentionOut want = ref::attention(qkv, s);
  const Vec want_d = ref::attention_backward(dy, qkv, s);
  const bool f32 = dt == DType::f32;
  const double r = f32 ? 0.0 : 1.0 / 256;
  EXPECT_TRUE(ref::within(got.y, want.y, r, 1e-5 * ref::max_abs(want.y)));
  EXPECT_LE(ref::rel_err(got.lse, want.lse), 1e-5);
  EXPECT_TRUE(ref::within(got.dqkv, want_d, r, (f32 ? 1e-5 : 1.0 / 128) * ref::max_abs(want_d)));
}

INSTANTIATE_TEST_SUITE_P(Dtypes, Attention, ::testing::Values(DType::f32, DType::bf16),
                         [](const auto& i) { return std::string(dtype_name(i.param)); });

TEST(AttentionReference, BackwardIsTheForwardsGradient) {
  const ref::AttentionDims s{1, 4, 4, 2};
  const Vec qkv = ref::random_values(s.b * s.t * 3 * s.c, 3, DType::f32, -2, 2);
  const Vec dy = ref::random_values(s.b * s.t * s.c, 4, DType::f32);
  const auto loss = [&](const Vec& x) { return ref::dot(ref::attention(x, s).y, dy); };
  EXPECT_LE(ref::rel_err(ref::attention_backward(dy, qkv, s), ref::finite_diff(loss, qkv)), 1e-6);
}

// Changing the keys and values of positions after t leaves y[.. t] unchanged, bit for bit.
TEST(Attention, IsCausal) {
  const ref::AttentionDims s{1, 20, 16, 2};
  Vec qkv = ref::random_values(s.t * 3 * s.c, 5, DType::f32);
  const Vec dy = ref::random_values(s.t * s.c, 6, DType::f32);
  const Outputs a = run_attention(qkv, dy, s, DType::f32);
  for (int64_t i = 10 * 3 * s.c; i < s.t * 3 * s.c; ++i) qkv[i] = -qkv[i] * 2;
  const Outputs b = run_attention(qkv, dy, s, DType::f32);
  for (int64_t i = 0; i < 10 * s.c; ++i) ASSERT_EQ(a.y[i], b.y[i]) << i;
}

TEST(Attention, BitIdenticalForAnyThreadCount) {
  const ref::AttentionDims s{2, 70, 48, 3};
  const Vec qkv = ref::random_values(s.b * s.t * 3 * s.c, 7, DType::f32);
  const Vec dy = ref::random_values(s.b * s.t * s.c, 8, DType::f32);
  const auto runs = ref::with_1_2_3_threads([&] { return run_attention(qkv, dy, s, DType::f32); });
  for (int i : {1, 2}) {
    EXPECT_EQ(runs[0].y, runs[i].y);
    EXPECT_EQ(runs[0].lse, runs[i].lse);
    EXPECT_EQ(runs[0].dqkv, runs[i].dqkv);
  }
}

}  // namespace
}  // namespace tandem::testing
