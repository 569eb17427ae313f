// The front end of the transformer ops (tandem/transformer_ops.h): argument errors name the
// argument and what was expected; f16 on the cpu runs through the storage wrapper, so each f16
// result is exactly the f32 op's result on the f16 inputs, rounded once to f16; the support
// query answers for them on cpu, virt and cuda's table. (Their values against PyTorch and
// float64: transformer_golden_test.cpp, attention_test.cpp, layer_norm_test.cpp and the
// other kernel tests; virt against cpu bit for bit: virt_ops_test.cpp.)
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "backend/cuda/cuda_support.h"
#include "tandem/op_support.h"
#include "tandem/rng.h"
#include "tandem/transformer_ops.h"

namespace tandem {
namespace {

using ops::Op;

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

Tensor uniform(const Shape& shape, uint64_t seed, DType dt = DType::f32) {
  Tensor t = Tensor::empty(shape);
  Philox rng(seed, 3);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = rng.uniform() * 2.0f - 1.0f;
  return dt == DType::f32 ? t : t.to(dt);
}

Tensor ids(const Shape& shape, int64_t vocab, uint64_t seed) {
  Tensor t = Tensor::empty(shape, DType::i64);
  Philox rng(seed, 5);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<int64_t>()[i] = rng.randint(static_cast<uint32_t>(vocab));
  return t;
}

TEST(TransformerOpsSupport, FloatDtypesOnEveryBackend) {
  for (Op op : {Op::embedding_forward, Op::embedding_backward, Op::layer_norm_forward, Op::layer_norm_backward,
                Op::gelu_forward, Op::gelu_backward, Op::add_forward, Op::attention_forward, Op::attention_backward,
                Op::classifier_cross_entropy, Op::linear_in_out_forward, Op::linear_in_out_backward_data,
                Op::linear_in_out_backward_weights}) {
    for (DType t : {DType::f32, DType::bf16, DType::f16}) {
      EXPECT_TRUE(ops::supports(op, t, Device{})) << ops::op_name(op) << " " << dtype_name(t);
      EXPECT_TRUE(ops::supports(op, t, Device{DeviceKind::virt, 0})) << ops::op_name(op);
      EXPECT_TRUE(ops::kCudaSupport.supports(op, t)) << ops::op_name(op);
    }
    EXPECT_FALSE(ops::supports(op, DType::i64, Device{})) << ops::op_name(op);
  }
}

TEST(TransformerOpsFrontEnd, ArgumentErrorsNameTheArgument) {
  const Tensor tok = ids({2, 3}, 5, 1), wte = uniform({5, 4}, 2), wpe = uniform({3, 4}, 3);
  EXPECT_EQ(error_of([&] {
              ops::embedding_forward(Tensor::zeros({2, 3}), wte, wpe, Tensor::empty({2, 3, 4}));
            }),
            "[embedding_forward] tokens must be i32 or i64, found f32");
  EXPECT_EQ(error_of([&] {
              ops::embedding_forward(tok, wte, uniform({2, 4}, 4), Tensor::empty({2, 3, 4}));
            }),
            "[embedding_forward] wpe must be [P, 4] with P >= T = 3, found [2, 4]");
  EXPECT_EQ(error_of([&] {
              ops::embedding_forward(tok, wte, wpe, Tensor::empty({2, 3, 5}));
            }),
            "[embedding_forward] y must have shape [2, 3, 4], found [2, 3, 5]");
  Tensor bad = tok.clone();
  bad.data<int64_t>()[4] = 9;
  EXPECT_EQ(error_of([&] {
              ops::embedding_forward(bad, wte, wpe, Tensor::empty({2, 3, 4}));
            }),
            "[embedding_forward] token 9 at [1, 1] is outside [0, 5)");

  const Tensor x = uniform({3, 4}, 5);
  EXPECT_EQ(error_of([&] {
              ops::layer_norm_forward(x, Tensor::zeros({4}, DType::bf16), Tensor(), 1e-5f, Tensor::empty({3, 4}),
                                      Tensor::empty({3}), Tensor::empty({3}));
            }),
            "[layer_norm_forward] gamma must be f32, found bf16");
  EXPECT_EQ(error_of([&] {
              ops::layer_norm_forward(x, Tensor::full({4}, 1.0f), Tensor(), 0.0f, Tensor::empty({3, 4}),
                                      Tensor::empty({3}), Tensor::empty({3}));
            }),
            "[layer_norm_forward] eps must be > 0, found 0");
  EXPECT_EQ(error_of([&] {
              ops::gelu_forward(x, Tensor::empty({3, 4}, DType::bf16));
            }),
            "[gelu_forward] y must be f32, found bf16");
  EXPECT_EQ(error_of([&] {
              ops::add_forward(x, uniform({4, 3}, 6), Tensor::empty({3, 4}));
            }),
            "[add_forward] b must have shape [3, 4], found [4, 3]");

  const Tensor qkv = uniform({1, 5, 12}, 7);
  EXPECT_EQ(error_of([&] {
              ops::attention_forward(qkv, 3, Tensor::empty({1, 5, 4}), Tensor::empty({1, 3, 5}));
            }),
            "[attention_forward] n_head 3 must be >= 1 and divide C = 4");
  EXPECT_EQ(error_of([&] {
              ops::attention_forward(uniform({1, 5, 10}, 8), 1, Tensor(), Tensor());
            }),
            "[attention_forward] qkv must be [B, T, 3C] with C >= 1, found [1, 5, 10]");
  EXPECT_EQ(error_of([&] {
              ops::attention_forward(qkv, 2, Tensor::empty({1, 5, 4}), Tensor::empty({1, 5, 2}));
            }),
            "[attention_forward] lse must have shape [1, 2, 5], found [1, 5, 2]");

  const Tensor h = uniform({4, 6}, 9), w = uniform({7, 6}, 10);
  EXPECT_EQ(error_of([&] {
              ops::classifier_cross_entropy(h, uniform({7, 5}, 11), ids({4}, 7, 12), -1, 1.0f, Tensor(), Tensor(),
                                            false, Tensor());
            }),
            "[classifier_cross_entropy] h [4, 6] has 6 features but w [7, 5] has 5");
  EXPECT_EQ(error_of([&] {
              ops::classifier_cross_entropy(h, w, ids({3}, 7, 12), -1, 1.0f, Tensor(), Tensor(), false, Tensor());
            }),
            "[classifier_cross_entropy] targets must have shape [4], found [3]");
  EXPECT_EQ(error_of([&] {
              ops::classifier_cross_entropy(h, w, ids({4}, 7, 12), -1, 1.0f, Tensor(),
                                            Tensor::empty({7, 6}, DType::bf16), false, Tensor());
            }),
            "[classifier_cross_entropy] dw must be f32, found bf16");
}

// Bytes of t equal to bytes of want (same dtype and numel).
::testing::AssertionResult same_bits(const Tensor& t, const Tensor& want) {
  if (t.dtype() != want.dtype() || t.numel() != want.numel()) return ::testing::AssertionFailure() << "mismatch";
  if (std::memcmp(t.raw_data(), want.raw_data(), t.nbytes()) != 0)
    return ::testing::AssertionFailure() << "bytes differ";
  return ::testing::AssertionSuccess();
}

// f16 is stored on the cpu and computed in f32 (cpu_f16.h): the f16 op's outputs are the f32
// op's outputs on the widened inputs, rounded once; its f32 outputs are the f32 op's.
TEST(TransformerOpsF16, CpuIsTheF32OpRoundedOnce) {
  const DType h16 = DType::f16;
  const auto w32 = [](const Tensor& t) { return t.to(DType::f32); };
  {  // embedding
    const Tensor tok = ids({2, 5}, 9, 1), wte = uniform({9, 8}, 2, h16), wpe = uniform({6, 8}, 3, h16);
    const Tensor dy = uniform({2, 5, 8}, 4, h16);
    Tensor y = Tensor::empty({2, 5, 8}, h16), y32 = Tensor::empty({2, 5, 8});
    ops::embedding_forward(tok, wte, wpe, y);
    ops::embedding_forward(tok, w32(wte), w32(wpe), y32);
    EXPECT_TRUE(same_bits(y, y32.to(h16)));
    Tensor dwte = Tensor::empty({9, 8}), dwte32 = Tensor::empty({9, 8});
    ops::embedding_backward(dy, tok, dwte, Tensor(), false);
    ops::embedding_backward(w32(dy), tok, dwte32, Tensor(), false);
    EXPECT_TRUE(same_bits(dwte, dwte32));
  }
  {  // layer norm
    const Tensor x = uniform({6, 10}, 5, h16), dy = uniform({6, 10}, 6, h16), g = uniform({10}, 7),
                 b = uniform({10}, 8);
    Tensor y = Tensor::empty({6, 10}, h16), y32 = Tensor::empty({6, 10}), m = Tensor::empty({6}),
           r = Tensor::empty({6});
    Tensor m32 = Tensor::empty({6}), r32 = Tensor::empty({6});
    ops::layer_norm_forward(x, g, b, 1e-5f, y, m, r);
    ops::layer_norm_forward(w32(x), g, b, 1e-5f, y32, m32, r32);
    EXPECT_TRUE(same_bits(y, y32.to(h16)));
    EXPECT_TRUE(same_bits(r, r32));
    Tensor dx = Tensor::empty({6, 10}, h16), dx32 = Tensor::empty({6, 10});
    Tensor dg = Tensor::empty({10}), dg32 = Tensor::empty({10});
    ops::layer_norm_backward(dy, x, g, m, r, dx, dg, Tensor(), false);
    ops::layer_norm_backward(w32(dy), w32(x), g, m32, r32, dx32, dg32, Tensor(), false);
    EXPECT_TRUE(same_bits(dx, dx32.to(h16)));
    EXPECT_TRUE(same_bits(dg, dg32));
  }
  {  // attention
    const Tensor qkv = uniform({2, 9, 24}, 9, h16), dy = uniform({2, 9, 8}, 10, h16);
    Tensor y = Tensor::empty({2, 9, 8}, h16), y32 = Tensor::empty({2, 9, 8});
    Tensor lse = Tensor::empty({2, 2, 9}), lse32 = Tensor::empty({2, 2, 9});
    ops::attention_forward(qkv, 2, y, lse);
    ops::attention_forward(w32(qkv), 2, y32, lse32);
    EXPECT_TRUE(same_bits(y, y32.to(h16)));
    EXPECT_TRUE(same_bits(lse, lse32));
    Tensor d = Tensor::empty({2, 9, 24}, h16), d32 = Tensor::empty({2, 9, 24});
    ops::attention_backward(dy, qkv, y, lse, 2, d);
    ops::attention_backward(w32(dy), w32(qkv), w32(y), lse32, 2, d32);
    EXPECT_TRUE(same_bits(d, d32.to(h16)));
  }
  {  // classifier
    const Tensor h = uniform({7, 8}, 11, h16), w = uniform({13, 8}, 12, h16), t = ids({7}, 13, 13);
    Tensor dh = Tensor::empty({7, 8}, h16), dh32 = Tensor::empty({7, 8});
    Tensor dw = Tensor::empty({13, 8}), dw32 = Tensor::empty({13, 8});
    Tensor m = Tensor::zeros({4}), m32 = Tensor::zeros({4});
    ops::classifier_cross_entropy(h, w, t, -1, 1.0f, dh, dw, false, m);
    ops::classifier_cross_entropy(w32(h), w32(w), t, -1, 1.0f, dh32, dw32, false, m32);
    EXPECT_TRUE(same_bits(dh, dh32.to(h16)));
    EXPECT_TRUE(same_bits(dw, dw32));
    EXPECT_TRUE(same_bits(m, m32));
  }
}

// The [in, out] linear layer against float64 sums of the same (rounded) inputs: f32 sums of
// at most 8 products of values in [-1, 1) (and the 0.5 start) are within 8 * 8 * 2^-24 < 1e-5;
// bf16 and f16 outputs are rounded once more (2^-8 and 2^-11 of each value); dw, db stay f32.
class LinearInOut : public ::testing::TestWithParam<DType> {};

TEST_P(LinearInOut, MatchesFloat64) {
  const DType dt = GetParam();
  const int64_t n = 5, in = 7, out = 3;
  const Tensor x = uniform({n, in}, 21, dt), w = uniform({in, out}, 22, dt), b = uniform({out}, 23);
  const Tensor dy = uniform({n, out}, 24, dt);
  Tensor y = Tensor::empty({n, out}, dt), dx = Tensor::empty({n, in}, dt);
  Tensor dw = Tensor::full({in, out}, 0.5f), db = Tensor::full({out}, 0.25f);
  ops::linear_in_out_forward(x, w, b, y);
  ops::linear_in_out_backward_data(dy, w, dx);
  ops::linear_in_out_backward_weights(x, dy, dw, db, true);  // accumulates onto 0.5 and 0.25
  const double r = dt == DType::f32 ? 0.0 : dt == DType::bf16 ? 1.0 / 256 : 1.0 / 2048;
  const auto near = [&](const Tensor& got, int64_t i, double want, double rel) {
    EXPECT_NEAR(got.item(i), want, rel * std::fabs(want) + 1e-5) << i;
  };
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < out; ++j) {
      double acc = b.item(j);
      for (int64_t k = 0; k < in; ++k) acc += x.item(i * in + k) * w.item(k * out + j);
      near(y, i * out + j, acc, r);
    }
  for (int64_t i = 0; i < n; ++i)
    for (int64_t k = 0; k < in; ++k) {
      double acc = 0;
      for (int64_t j = 0; j < out; ++j) acc += dy.item(i * out + j) * w.item(k * out + j);
      near(dx, i * in + k, acc, r);
    }
  for (int64_t k = 0; k < in; ++k)
    for (int64_t j = 0; j < out; ++j) {
      double acc = 0.5;
      for (int64_t i = 0; i < n; ++i) acc += x.item(i * in + k) * dy.item(i * out + j);
      near(dw, k * out + j, acc, 0.0);
    }
  for (int64_t j = 0; j < out; ++j) {
    double acc = 0.25;
    for (int64_t i = 0; i < n; ++i) acc += dy.item(i * out + j);
    near(db, j, acc, 0.0);
  }
  EXPECT_EQ(error_of([&] {
              ops::linear_in_out_forward(x, w, b, Tensor::empty({n, in}, dt));
            }),
            "[linear_in_out_forward] y must have shape [5, 3], found [5, 7]");
}

INSTANTIATE_TEST_SUITE_P(Dtypes, LinearInOut, ::testing::Values(DType::f32, DType::bf16, DType::f16),
                         [](const auto& i) { return std::string(dtype_name(i.param)); });

}  // namespace
}  // namespace tandem
