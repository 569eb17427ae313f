// Layer norm on the cpu against the float64 reference (tests/core/transformer_reference.h),
// whose backward is checked by finite differences.
// Tolerances (errors relative to the largest reference value of each output):
//  - f32: 1e-5. Row sums over C = 96 values carry at most ~C * 2^-24 relative error, and x
//    has mean 3 with spread 1, so x - mean loses about 2 bits more; the bound is 10x that.
//  - bf16 (inputs rounded to bf16, so the reference sees the same values): y and dx are
//    rounded once to bf16, so element-wise |err| <= 2^-8 |ref| + the f32 term 1e-5 max|ref|;
//    the f32 outputs (dgamma, dbeta, mean, rstd) keep the f32 bound.
#include <gtest/gtest.h>

#include "backend/cpu/cpu_isa.h"
#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/cpu_transformer_kernels.h"
#include "core/transformer_reference.h"
#include "tandem/ops.h"

namespace tandem::testing {
namespace {

using ref::Vec;
constexpr double kEps = 1e-5;
constexpr double kF32Tol = 1e-5;
constexpr double kBf16Unit = 1.0 / 256;

struct Case {
  int64_t n, c;
  Vec x, g, b, dy;
};

Case make_case(int64_t n, int64_t c, DType dt, uint64_t seed) {
  Case k{n, c, ref::random_values(n * c, seed, dt, 2.0, 4.0), ref::random_values(c, seed + 1, DType::f32, 0.5, 1.5),
         ref::random_values(c, seed + 2, DType::f32), ref::random_values(n * c, seed + 3, dt)};
  return k;
}

class LayerNorm : public ::testing::TestWithParam<DType> {};

TEST_P(LayerNorm, ForwardMatchesFloat64) {
  const DType dt = GetParam();
  const Case k = make_case(37, 96, dt, 1);
  Tensor y = Tensor::empty({k.n, k.c}, dt), mean = Tensor::empty({k.n}), rstd = Tensor::empty({k.n});
  ops::CpuBackend().layer_norm_forward(ref::tensor_of(k.x, {k.n, k.c}, dt), ref::tensor_of(k.g, {k.c}, DType::f32),
                               ref::tensor_of(k.b, {k.c}, DType::f32), static_cast<float>(kEps), y, mean, rstd);
  const ref::LayerNormOut want = ref::layer_norm(k.x, k.g, k.b, k.n, k.c, kEps);
  const double ymax = ref::max_abs(want.y);
  EXPECT_TRUE(ref::within(ref::values_of(y), want.y, dt == DType::f32 ? 0.0 : kBf16Unit, kF32Tol * ymax));
  EXPECT_LE(ref::rel_err(ref::values_of(mean), want.mean), kF32Tol);
  EXPECT_LE(ref::rel_err(ref::values_of(rstd), want.rstd), kF32Tol);
}

TEST_P(LayerNorm, BackwardMatchesFloat64) {
  const DType dt = GetParam();
  const Case k = make_case(37, 96, dt, 5);
  const Tensor x = ref::tensor_of(k.x, {k.n, k.c}, dt), g = ref::tensor_of(k.g, {k.c}, DType::f32);
  Tensor y = Tensor::empty({k.n, k.c}, dt), mean = Tensor::empty({k.n}), rstd = Tensor::empty({k.n});
  ops::CpuBackend().layer_norm_forward(x, g, Tensor(), static_cast<float>(kEps), y, mean, rstd);
  Tensor dx = Tensor::empty({k.n, k.c}, dt), dg = Tensor::empty({k.c}), db = Tensor::empty({k.c});
  ops::CpuBackend().layer_norm_backward(ref::tensor_of(k.dy, {k.n, k.c}, dt), x, g, mean, rstd, dx, dg, db, false);
  const ref::LayerNormGrad want = ref::layer_norm_backward(k.dy, k.x, k.g, k.n, k.c, kEps);
  EXPECT_TRUE(ref::within(ref::values_of(dx), want.dx, dt == DType::f32 ? 0.0 : kBf16Unit,
                          kF32Tol * ref::max_abs(want.dx)));
  EXPECT_LE(ref::rel_err(ref::values_of(dg), want.dgamma), kF32Tol);
  EXPECT_LE(ref::rel_err(ref::values_of(db), want.dbeta), kF32Tol);
  // accumulate adds to what dgamma and dbeta hold
  ops::CpuBackend().layer_norm_backward(ref::tensor_of(k.dy, {k.n, k.c}, dt), x, g, mean, rstd, Tensor(), dg, db, true);
  Vec twice = want.dgamma;
  for (double& v : twice) v *= 2;
  EXPECT_LE(ref::rel_err(ref::values_of(dg), twice), kF32Tol);
}

INSTANTIATE_TEST_SUITE_P(Dtypes, LayerNorm, ::testing::Values(DType::f32, DType::bf16),
                         [](const auto& i) { return std::string(dtype_name(i.param)); });

// The reference's backward is the gradient of its forward: sum(y * dy) differentiated by
// central differences (step 1e-6 in float64: truncation and rounding error about 1e-9).
TEST(LayerNormReference, BackwardIsTheForwardsGradient) {
  const int64_t n = 3, c = 5;
  const Vec x = ref::random_values(n * c, 9, DType::f32, -2, 2), g = ref::random_values(c, 10, DType::f32);
  const Vec dy = ref::random_values(n * c, 11, DType::f32);
  const auto loss_x = [&](const Vec& xx) { return ref::dot(ref::layer_norm(xx, g, {}, n, c, kEps).y, dy); };
  const auto loss_g = [&](const Vec& gg) { return ref::dot(ref::layer_norm(x, gg, {}, n, c, kEps).y, dy); };
  const ref::LayerNormGrad grad = ref::layer_norm_backward(dy, x, g, n, c, kEps);
  EXPECT_LE(ref::rel_err(grad.dx, ref::finite_diff(loss_x, x)), 1e-6);
  EXPECT_LE(ref::rel_err(grad.dgamma, ref::finite_diff(loss_g, g)), 1e-6);
}

// dgamma and dbeta sum over rows in fixed blocks: the same bits for 1, 2 and 3 threads.
TEST(LayerNorm, ParameterGradientsDoNotDependOnThreads) {
  const Case k = make_case(1000, 64, DType::f32, 21);
  const Tensor x = ref::tensor_of(k.x, {k.n, k.c}, DType::f32), g = ref::tensor_of(k.g, {k.c}, DType::f32);
  const Tensor dy = ref::tensor_of(k.dy, {k.n, k.c}, DType::f32);
  Tensor y = Tensor::empty({k.n, k.c}), mean = Tensor::empty({k.n}), rstd = Tensor::empty({k.n});
  ops::CpuBackend().layer_norm_forward(x, g, Tensor(), static_cast<float>(kEps), y, mean, rstd);
  const auto runs = ref::with_1_2_3_threads([&] {
    Tensor dg = Tensor::empty({k.c}), db = Tensor::empty({k.c}), dx = Tensor::empty({k.n, k.c});
    ops::CpuBackend().layer_norm_backward(dy, x, g, mean, rstd, dx, dg, db, false);
    return ref::concat(ref::values_of(dg), ref::values_of(db));
  });
  EXPECT_EQ(runs[0], runs[1]);
  EXPECT_EQ(runs[0], runs[2]);
}

// The AVX2 and AVX-512 builds compute the same formulas: equal up to the order of partial sums.
TEST(LayerNorm, InstructionSetBuildsAgree) {
  if (!ops::cpu::has_avx512()) GTEST_SKIP() << "this CPU has no AVX-512 (or TANDEM_CPU_KERNELS=baseline)";
  const Case k = make_case(19, 80, DType::f32, 31);
  std::vector<float> x(k.x.begin(), k.x.end()), g(k.g.begin(), k.g.end()), b(k.b.begin(), k.b.end());
  std::vector<float> y1(x.size()), y2(x.size()), m1(k.n), m2(k.n), r1(k.n), r2(k.n);
  ops::cpu::LayerNormArgs a;
  a.rows = k.n;
  a.cols = k.c;
  a.x = x.data();
  a.gamma = g.data();
  a.beta = b.data();
  a.y = y1.data();
  a.mean = m1.data();
  a.rstd = r1.data();
  ops::cpu::transformer_kernels_avx2().layer_norm_forward(a);
  a.y = y2.data();
  a.mean = m2.data();
  a.rstd = r2.data();
  ops::cpu::transformer_kernels_avx512().layer_norm_forward(a);
  for (size_t i = 0; i < y1.size(); ++i) EXPECT_NEAR(y1[i], y2[i], 1e-5) << i;
}

}  // namespace
}  // namespace tandem::testing
