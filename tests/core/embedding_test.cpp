// Token + position embedding on the cpu: the forward is one rounded sum per element (exact
// against the same f32 sum); the backward against a float64 scatter-add, within 1e-6 of the
// largest gradient (each sum has at most B*T = 256 f32 terms of magnitude <= 1: at most
// 256 * 2^-24 = 1.5e-5 absolute in the worst case, about 1e-6 typically for random signs; the
// bound is checked relative to max|ref| ~ 10), and bit-identical for 1, 2 and 3 threads.
#include <gtest/gtest.h>

#include "backend/cpu/cpu_backend.h"
#include "core/transformer_reference.h"
#include "tandem/ops.h"

namespace tandem::testing {
namespace {

using ref::Vec;

Tensor tokens_of(const std::vector<int64_t>& ids, int64_t b, int64_t t, DType dt) {
  Tensor tok = Tensor::empty({b, t}, dt);
  for (int64_t i = 0; i < b * t; ++i) {
    if (dt == DType::i32)
      tok.data<int32_t>()[i] = static_cast<int32_t>(ids[i]);
    else
      tok.data<int64_t>()[i] = ids[i];
  }
  return tok;
}

std::vector<int64_t> random_ids(int64_t n, int64_t vocab, uint64_t seed) {
  Philox rng(seed, 3);
  std::vector<int64_t> ids(static_cast<size_t>(n));
  for (auto& id : ids) id = rng.randint(static_cast<uint32_t>(vocab));
  return ids;
}

class Embedding : public ::testing::TestWithParam<std::tuple<DType, DType>> {};

TEST_P(Embedding, ForwardIsOneRoundedSum) {
  const auto [dt, id_dt] = GetParam();
  const int64_t B = 3, T = 7, V = 11, C = 20, P = 9;
  const Vec wte = ref::random_values(V * C, 1, dt), wpe = ref::random_values(P * C, 2, dt);
  const std::vector<int64_t> ids = random_ids(B * T, V, 3);
  Tensor y = Tensor::empty({B, T, C}, dt);
  ops::CpuBackend().embedding_forward(tokens_of(ids, B, T, id_dt), ref::tensor_of(wte, {V, C}, dt),
                              ref::tensor_of(wpe, {P, C}, dt), y);
  const Vec got = ref::values_of(y);
  for (int64_t i = 0; i < B * T; ++i)
    for (int64_t j = 0; j < C; ++j) {
      const float s = static_cast<float>(wte[ids[i] * C + j]) + static_cast<float>(wpe[(i % T) * C + j]);
      ASSERT_EQ(got[i * C + j], dt == DType::f32 ? s : bf16_to_float(float_to_bf16(s))) << i << ", " << j;
    }
}

TEST_P(Embedding, BackwardMatchesFloat64) {
  const auto [dt, id_dt] = GetParam();
  const int64_t B = 4, T = 64, V = 50, C = 32, P = 70;
  const Vec dy = ref::random_values(B * T * C, 4, dt);
  const std::vector<int64_t> ids = random_ids(B * T, V, 5);
  Tensor dwte = Tensor::full({V, C}, 7.0f), dwpe = Tensor::full({P, C}, 7.0f);
  ops::CpuBackend().embedding_backward(ref::tensor_of(dy, {B, T, C}, dt), tokens_of(ids, B, T, id_dt), dwte, dwpe, false);
  Vec want_te(V * C, 0.0), want_pe(P * C, 0.0);
  for (int64_t i = 0; i < B * T; ++i)
    for (int64_t j = 0; j < C; ++j) {
      want_te[ids[i] * C + j] += dy[i * C + j];
      want_pe[(i % T) * C + j] += dy[i * C + j];
    }
  EXPECT_LE(ref::rel_err(ref::values_of(dwte), want_te), 1e-6);
  EXPECT_LE(ref::rel_err(ref::values_of(dwpe), want_pe), 1e-6);  // rows >= T are zero
  // accumulate adds the same sums again
  ops::CpuBackend().embedding_backward(ref::tensor_of(dy, {B, T, C}, dt), tokens_of(ids, B, T, id_dt), dwte, Tensor(), true);
  for (double& v : want_te) v *= 2;
  EXPECT_LE(ref::rel_err(ref::values_of(dwte), want_te), 1e-6);
}

INSTANTIATE_TEST_SUITE_P(Dtypes, Embedding,
                         ::testing::Combine(::testing::Values(DType::f32, DType::bf16),
                                            ::testing::Values(DType::i32, DType::i64)),
                         [](const auto& i) {
                           return std::string(dtype_name(std::get<0>(i.param))) + "_" +
                                  dtype_name(std::get<1>(i.param));
                         });

// Many repeated ids (256 positions over 20 ids) and rows wide enough to run in parallel.
TEST(Embedding, BackwardIsBitIdenticalForAnyThreadCount) {
  const int64_t B = 4, T = 64, V = 20, C = 256;
  const Tensor dy = ref::tensor_of(ref::random_values(B * T * C, 6, DType::f32), {B, T, C}, DType::f32);
  const Tensor tok = tokens_of(random_ids(B * T, V, 7), B, T, DType::i64);
  const auto runs = ref::with_1_2_3_threads([&] {
    Tensor dwte = Tensor::empty({V, C}), dwpe = Tensor::empty({T, C});
    ops::CpuBackend().embedding_backward(dy, tok, dwte, dwpe, false);
    return ref::concat(ref::values_of(dwte), ref::values_of(dwpe));
  });
  EXPECT_EQ(runs[0], runs[1]);
  EXPECT_EQ(runs[0], runs[2]);
}

TEST(Embedding, TokenOutsideTheVocabularyIsNamed) {
  Tensor tok = tokens_of({1, 2, 8, 3}, 2, 2, DType::i32);
  Tensor wte = Tensor::zeros({8, 4}), y = Tensor::empty({2, 2, 4});
  try {
    ops::CpuBackend().embedding_forward(tok, wte, Tensor(), y);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "[embedding_forward] token 8 at [1, 0] is outside [0, 8)");
  }
  Tensor dwte = Tensor::full({8, 4}, 1.0f);
  EXPECT_THROW(ops::CpuBackend().embedding_backward(y, tok, dwte, Tensor(), false), Error);
  EXPECT_EQ(dwte.item(0), 1.0);  // nothing written before the check
}

}  // namespace
}  // namespace tandem::testing
