// GELU (tanh form) and the residual add on the cpu against float64 references, and the
// vectorised exp behind GELU and the softmaxes.
// Tolerances:
//  - vexp: relative 2^-22 (Cephes' expf is within 2 ulp of e^x).
//  - GELU forward, f32: tanh(u) = 1 - 2 / (e^(2u) + 1) carries an absolute error of about
//    2^-22 (from vexp and the division), which 0.5 x (1 + t) scales by |x|/2; each product
//    adds a rounding of |y|. Bound per element: 2^-21 (|x| + |y|).
//  - GELU backward, f32: the error of t enters through (1 - t^2) scaled by
//    0.5 |x| sqrt(2/pi) (1 + 0.134 x^2), so the bound per element is 2^-20 (1 + |x|^3) |dy|.
//  - bf16 (inputs rounded to bf16): the f32 bounds plus one bf16 rounding, 2^-8 |ref|.
//  - the residual add: exact (one rounding of a + b, as f32 or bf16 arithmetic gives).
#include <gtest/gtest.h>

#include <cmath>

#include "backend/cpu/cpu_isa.h"
#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/cpu_transformer_kernels.h"
#include "backend/cpu/cpu_vec_math.h"
#include "core/transformer_reference.h"

namespace tandem::testing {
namespace {

using ref::Vec;

TEST(VecMath, ExpWithinTwoUlp) {
  double worst = 0.0;
  for (int i = 0; i <= 200000; ++i) {
    const float x = -87.0f + static_cast<float>(i) * (175.3f / 200000.0f);
    const double want = std::exp(static_cast<double>(x));
    worst = std::max(worst, std::fabs(ops::cpu::vexp(x) - want) / want);
  }
  EXPECT_LE(worst, std::ldexp(1.0, -22));
  EXPECT_EQ(ops::cpu::vexp(-100.0f), 0.0f);
  EXPECT_EQ(ops::cpu::vexp(-INFINITY), 0.0f);
  EXPECT_TRUE(std::isnan(ops::cpu::vexp(NAN)));
  EXPECT_TRUE(std::isfinite(ops::cpu::vexp(1000.0f)));
  EXPECT_EQ(ops::cpu::vtanh(20.0f), 1.0f);
  EXPECT_EQ(ops::cpu::vtanh(-20.0f), -1.0f);
}

// x spread over [-8, 8] with the exact values 0 and +-1 included.
Vec gelu_inputs(DType dt) {
  Vec x = ref::random_values(3001, 3, dt, -8.0, 8.0);
  x[0] = 0.0;
  x[1] = 1.0;
  x[2] = -1.0;
  return x;
}

class Gelu : public ::testing::TestWithParam<DType> {};

TEST_P(Gelu, ForwardMatchesFloat64) {
  const DType dt = GetParam();
  const Vec x = gelu_inputs(dt);
  const int64_t n = static_cast<int64_t>(x.size());
  Tensor y = Tensor::empty({n}, dt);
  ops::CpuBackend().gelu_forward(ref::tensor_of(x, {n}, dt), y);
  const Vec got = ref::values_of(y);
  const double r = dt == DType::f32 ? 0.0 : 1.0 / 256;
  for (int64_t i = 0; i < n; ++i) {
    const double want = ref::gelu(x[i]);
    ASSERT_LE(std::fabs(got[i] - want), std::ldexp(1.0, -21) * (std::fabs(x[i]) + std::fabs(want)) + r * std::fabs(want))
        << "x = " << x[i];
  }
  EXPECT_EQ(got[0], 0.0);
}

TEST_P(Gelu, BackwardMatchesFloat64) {
  const DType dt = GetParam();
  const Vec x = gelu_inputs(dt);
  const int64_t n = static_cast<int64_t>(x.size());
  const Vec dy = ref::random_values(n, 4, dt, -2.0, 2.0);
  Tensor dx = Tensor::empty({n}, dt);
  ops::CpuBackend().gelu_backward(ref::tensor_of(dy, {n}, dt), ref::tensor_of(x, {n}, dt), dx);
  const Vec got = ref::values_of(dx);
  const double r = dt == DType::f32 ? 0.0 : 1.0 / 256;
  for (int64_t i = 0; i < n; ++i) {
    const double want = dy[i] * ref::gelu_grad(x[i]);
    const double ax = std::fabs(x[i]);
    ASSERT_LE(std::fabs(got[i] - want), std::ldexp(1.0, -20) * (1 + ax * ax * ax) * std::fabs(dy[i]) + r * std::fabs(want))
        << "x = " << x[i];
  }
}

INSTANTIATE_TEST_SUITE_P(Dtypes, Gelu, ::testing::Values(DType::f32, DType::bf16),
                         [](const auto& i) { return std::string(dtype_name(i.param)); });

// The reference derivative against central differences of the reference GELU.
TEST(GeluReference, GradientIsTheDerivative) {
  for (double x = -6.0; x <= 6.0; x += 0.37) {
    const double fd = (ref::gelu(x + 1e-6) - ref::gelu(x - 1e-6)) / 2e-6;
    EXPECT_NEAR(ref::gelu_grad(x), fd, 1e-8) << x;
  }
}

TEST(Gelu, InstructionSetBuildsAgree) {
  if (!ops::cpu::has_avx512()) GTEST_SKIP() << "this CPU has no AVX-512 (or TANDEM_CPU_KERNELS=baseline)";
  const Vec xd = gelu_inputs(DType::f32);
  std::vector<float> x(xd.begin(), xd.end()), y1(x.size()), y2(x.size());
  const int64_t n = static_cast<int64_t>(x.size());
  ops::cpu::transformer_kernels_avx2().gelu_forward(DType::f32, x.data(), y1.data(), n);
  ops::cpu::transformer_kernels_avx512().gelu_forward(DType::f32, x.data(), y2.data(), n);
  EXPECT_EQ(y1, y2);  // element-wise, no reductions: the same operations in both builds
}

TEST(ResidualAdd, ExactInEachDtype) {
  for (DType dt : {DType::f32, DType::bf16}) {
    const Vec a = ref::random_values(1000, 5, dt, -3, 3), b = ref::random_values(1000, 6, dt, -3, 3);
    const Tensor ta = ref::tensor_of(a, {10, 100}, dt), tb = ref::tensor_of(b, {10, 100}, dt);
    Tensor y = Tensor::empty({10, 100}, dt);
    ops::CpuBackend().add_forward(ta, tb, y);
    const Vec got = ref::values_of(y);
    for (size_t i = 0; i < a.size(); ++i) {
      const float sum = static_cast<float>(a[i]) + static_cast<float>(b[i]);
      ASSERT_EQ(got[i], dt == DType::f32 ? sum : bf16_to_float(float_to_bf16(sum))) << dtype_name(dt) << " " << i;
    }
    ops::CpuBackend().add_forward(ta, tb, ta);  // in place
    EXPECT_EQ(ref::values_of(ta), got);
  }
}

}  // namespace
}  // namespace tandem::testing
