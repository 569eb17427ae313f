// Flat Adam/AdamW/SGD kernels against the float64 reference, at every SIMD level this CPU
// supports, for ragged sizes and 2-D shapes, with each output-copy dtype.
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

#include "gtest_printers.h"
#include "optim/reference_optim.h"
#include "tandem/dtype.h"
#include "tandem/error.h"
#include "tandem/optim/kernels.h"
#include "tandem/tensor.h"

namespace tandem::optim {
namespace {

using testing::RefAdamState;
using testing::RefSgdState;

// Forces a SIMD level for one test and restores the previous one afterwards.
class ScopedSimdLevel {
 public:
  explicit ScopedSimdLevel(SimdLevel level) : saved_(simd_level()) { set_simd_level(level); }
  ~ScopedSimdLevel() { set_simd_level(saved_); }

 private:
  SimdLevel saved_;
};

std::vector<float> uniform(int64_t n, float lo, float hi, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = d(rng);
  return v;
}

std::vector<float> normal(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, 1.0f);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = d(rng);
  return v;
}

std::vector<double> to_double(const std::vector<float>& v) { return {v.begin(), v.end()}; }

bool bit_equal(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// |got - want| <= rtol*|want| + atol*max|want| for every element; reports the first miss.
::testing::AssertionResult close_to(const std::vector<float>& got, const std::vector<double>& want,
                                    double rtol, double atol) {
  double scale = 0;
  for (double w : want) scale = std::max(scale, std::abs(w));
  for (size_t i = 0; i < got.size(); ++i) {
    if (!(std::abs(got[i] - want[i]) <= rtol * std::abs(want[i]) + atol * scale))
      return ::testing::AssertionFailure()
             << "element " << i << " of " << got.size() << ": got " << got[i] << ", want "
             << want[i] << " (scale " << scale << ")";
  }
  return ::testing::AssertionSuccess();
}

// The output copy must equal the fp32 parameter converted with tandem's scalar conversions.
::testing::AssertionResult copy_matches(const std::vector<uint16_t>& out16,
                                        const std::vector<float>& out32, DType dtype,
                                        const std::vector<float>& param) {
  for (size_t i = 0; i < param.size(); ++i) {
    if (dtype == DType::f32) {
      if (std::memcmp(&out32[i], &param[i], 4) != 0)
        return ::testing::AssertionFailure() << "f32 copy differs at " << i;
    } else {
      const uint16_t want = dtype == DType::bf16 ? float_to_bf16(param[i]) : float_to_f16(param[i]);
      if (out16[i] != want)
        return ::testing::AssertionFailure() << dtype_name(dtype) << " copy differs at " << i
                                             << ": got " << out16[i] << ", want " << want;
    }
  }
  return ::testing::AssertionSuccess();
}

enum class Algo { adam, adamw, sgd_momentum, sgd_nesterov };
const char* algo_name(Algo a) {
  switch (a) {
    case Algo::adam: return "adam";
    case Algo::adamw: return "adamw";
    case Algo::sgd_momentum: return "sgd_momentum";
    case Algo::sgd_nesterov: return "sgd_nesterov";
  }
  return "?";
}

// Float buffers of one optimizer run.
struct Buffers {
  std::vector<float> param, m, v;
  std::vector<uint16_t> out16;
  std::vector<float> out32;
};

constexpr double kLr = 1e-2, kBeta1 = 0.9, kBeta2 = 0.999, kEps = 1e-8, kWd = 0.05;
constexpr double kMomentum = 0.9;

// Runs `steps` updates of `algo` on buffers b (optionally writing a copy as out_dtype).
void run_kernel(Algo algo, Buffers& b, const std::vector<std::vector<float>>& grads,
                int64_t first_step, DType out_dtype, bool with_copy) {
  const int64_t n = static_cast<int64_t>(b.param.size());
  b.out16.assign(b.param.size(), 0);
  b.out32.assign(b.param.size(), 0.0f);
  void* out = !with_copy ? nullptr
              : out_dtype == DType::f32 ? static_cast<void*>(b.out32.data())
                                        : static_cast<void*>(b.out16.data());
  for (size_t s = 0; s < grads.size(); ++s) {
    if (algo == Algo::adam || algo == Algo::adamw) {
      AdamParams p;
      p.lr = kLr;
      p.beta1 = kBeta1;
      p.beta2 = kBeta2;
      p.eps = kEps;
      p.weight_decay = kWd;
      p.decoupled = algo == Algo::adamw;
      p.step = first_step + static_cast<int64_t>(s);
      adam_step(b.param.data(), grads[s].data(), b.m.data(), b.v.data(), n, p, out, out_dtype);
    } else {
      SgdParams p;
      p.lr = kLr;
      p.momentum = kMomentum;
      p.weight_decay = kWd;
      p.nesterov = algo == Algo::sgd_nesterov;
      p.init_buffer = s == 0;
      sgd_step(b.param.data(), grads[s].data(), b.m.data(), n, p, out, out_dtype);
    }
  }
}

using KernelCase = std::tuple<SimdLevel, DType, Shape>;

class KernelTest : public ::testing::TestWithParam<KernelCase> {};

TEST_P(KernelTest, MatchesFloat64ReferenceAndScalarLevel) {
  const auto& [level, out_dtype, shape] = GetParam();
  if (!simd_level_supported(level))
    GTEST_SKIP() << "this CPU does not support SIMD level " << simd_level_name(level);
  const int64_t n = shape_numel(shape);  // every element, not the first dimension
  constexpr int kSteps = 4;
  const std::vector<float> param0 = uniform(n, -1.0f, 1.0f, 11);
  std::vector<std::vector<float>> grads;
  for (int s = 0; s < kSteps; ++s) grads.push_back(normal(n, 100 + s));

  for (Algo algo : {Algo::adam, Algo::adamw, Algo::sgd_momentum, Algo::sgd_nesterov}) {
    SCOPED_TRACE(algo_name(algo));
    const bool adam = algo == Algo::adam || algo == Algo::adamw;
    // Moments start from a previous state so that every term of the update matters.
    const std::vector<float> m0 = adam ? normal(n, 21) : std::vector<float>(n, 0.0f);
    std::vector<float> v0 = uniform(n, 0.0f, 2.0f, 22);

    Buffers b{param0, m0, v0, {}, {}};
    {
      ScopedSimdLevel forced(level);
      run_kernel(algo, b, grads, /*first_step=*/1, out_dtype, /*with_copy=*/true);
    }
    EXPECT_TRUE(copy_matches(b.out16, b.out32, out_dtype, b.param));

    // Every level performs the same fp32 operations: bit-identical to the scalar kernel.
    Buffers s{param0, m0, v0, {}, {}};
    {
      ScopedSimdLevel forced(SimdLevel::scalar);
      run_kernel(algo, s, grads, 1, out_dtype, /*with_copy=*/false);
    }
    EXPECT_TRUE(bit_equal(b.param, s.param)) << "param differs from the scalar level";
    EXPECT_TRUE(bit_equal(b.m, s.m)) << "first buffer differs from the scalar level";

    if (adam) {
      RefAdamState r{to_double(param0), to_double(m0), to_double(v0)};
      for (int st = 0; st < kSteps; ++st)
        testing::ref_adam_step(r, to_double(grads[st]), kLr, kBeta1, kBeta2, kEps, kWd,
                               algo == Algo::adamw, st + 1);
      EXPECT_TRUE(close_to(b.param, r.param, 1e-6, 1e-6)) << "param";
      EXPECT_TRUE(close_to(b.m, r.exp_avg, 1e-5, 1e-6)) << "exp_avg";
      EXPECT_TRUE(close_to(b.v, r.exp_avg_sq, 1e-5, 1e-7)) << "exp_avg_sq";
    } else {
      RefSgdState r{to_double(param0), {}, false};
      for (int st = 0; st < kSteps; ++st)
        testing::ref_sgd_step(r, to_double(grads[st]), kLr, kMomentum, kWd,
                              algo == Algo::sgd_nesterov);
      EXPECT_TRUE(close_to(b.param, r.param, 1e-6, 1e-6)) << "param";
      EXPECT_TRUE(close_to(b.m, r.momentum_buffer, 1e-5, 1e-6)) << "momentum_buffer";
    }
  }
}

std::string case_name(const ::testing::TestParamInfo<KernelCase>& info) {
  const auto& [level, dtype, shape] = info.param;
  std::string s = fmt::format("{}_{}", simd_level_name(level), dtype_name(dtype));
  for (int64_t d : shape) s += fmt::format("_{}", d);
  return s;
}

INSTANTIATE_TEST_SUITE_P(
    Sizes, KernelTest,
    ::testing::Combine(::testing::Values(SimdLevel::scalar, SimdLevel::avx2, SimdLevel::avx512),
                       ::testing::Values(DType::f32, DType::bf16, DType::f16),
                       ::testing::Values(Shape{1}, Shape{7}, Shape{15}, Shape{16}, Shape{17},
                                         Shape{1023}, Shape{1024}, Shape{1025}, Shape{33, 31},
                                         Shape{3, 5, 7}, Shape{1000003})),
    case_name);

class KernelLevelTest : public ::testing::TestWithParam<SimdLevel> {
 protected:
  void SetUp() override {
    if (!simd_level_supported(GetParam()))
      GTEST_SKIP() << "this CPU does not support SIMD level " << simd_level_name(GetParam());
    forced_ = std::make_unique<ScopedSimdLevel>(GetParam());
  }
  void TearDown() override { forced_.reset(); }
  std::unique_ptr<ScopedSimdLevel> forced_;
};

// Same inputs give the same bits, whatever the number of threads that split the tiles, for
// every algorithm (the bf16 copy included).
TEST_P(KernelLevelTest, RepeatedCallsAreBitIdenticalAcrossThreadCounts) {
  const int64_t n = 300001;  // above the threading threshold, ragged tail
  const std::vector<float> param0 = uniform(n, -1.0f, 1.0f, 1), m0 = normal(n, 2),
                           v0 = uniform(n, 0.0f, 1.0f, 3), g = normal(n, 4);
  const int saved_threads = omp_get_max_threads();
  for (Algo algo : {Algo::adam, Algo::adamw, Algo::sgd_momentum, Algo::sgd_nesterov}) {
    SCOPED_TRACE(algo_name(algo));
    std::vector<Buffers> results;
    for (int threads : {2, 2, 1, 3}) {
      omp_set_num_threads(threads);
      Buffers b{param0, m0, v0, {}, {}};
      run_kernel(algo, b, {g, g}, 5, DType::bf16, true);
      results.push_back(std::move(b));
    }
    for (size_t i = 1; i < results.size(); ++i) {
      EXPECT_TRUE(bit_equal(results[i].param, results[0].param)) << "run " << i;
      EXPECT_TRUE(bit_equal(results[i].m, results[0].m)) << "run " << i;
      EXPECT_TRUE(bit_equal(results[i].v, results[0].v)) << "run " << i;
      EXPECT_EQ(results[i].out16, results[0].out16) << "run " << i;
    }
  }
  omp_set_num_threads(saved_threads);
}

// 1 - lr*wd rounds to 1 in fp32, yet the decay must not vanish: the kernel's result must
// show no systematic bias against the float64 reference (which decays), while dropping the
// decay would bias every element by about lr*wd*param per step.
TEST_P(KernelLevelTest, AdamWTinyDecayIsNotAbsorbedByRounding) {
  const double lr = 1e-3, wd = 2.5e-5;  // lr*wd = 2.5e-8 < 2^-25
  ASSERT_EQ(1.0f - static_cast<float>(lr * wd), 1.0f);
  const int64_t n = 200000;
  constexpr int kSteps = 8;
  const std::vector<float> param0 = uniform(n, 1.0f, 2.0f, 5);
  std::vector<float> p = param0, m(n, 0.0f), v(n, 0.0f);
  RefAdamState r{to_double(param0), std::vector<double>(n, 0.0), std::vector<double>(n, 0.0)};
  for (int s = 1; s <= kSteps; ++s) {
    const std::vector<float> g = normal(n, 50 + s);
    AdamParams ap;
    ap.lr = lr;
    ap.weight_decay = wd;
    ap.decoupled = true;
    ap.step = s;
    adam_step(p.data(), g.data(), m.data(), v.data(), n, ap);
    testing::ref_adam_step(r, to_double(g), lr, 0.9, 0.999, 1e-8, wd, true, s);
  }
  double bias = 0, decay = 0;
  for (int64_t i = 0; i < n; ++i) {
    bias += p[i] - r.param[i];
    decay += lr * wd * r.param[i] * kSteps;
  }
  bias /= n;
  decay /= n;
  EXPECT_LT(std::abs(bias), 0.1 * decay) << "mean error " << bias << " vs total decay " << decay;
}

// The step is int64: a step past 2^31 keeps its bias corrections (betas near 1 make them
// differ from 1), where a 32-bit counter would wrap negative.
TEST_P(KernelLevelTest, StepCounterIsInt64) {
  static_assert(std::is_same_v<decltype(AdamParams::step), int64_t>);
  const int64_t step = (int64_t{1} << 31) + 3;
  const double beta1 = 1.0 - 1e-9, beta2 = 1.0 - 1e-10;
  const int64_t n = 37;
  std::vector<float> p = uniform(n, -1, 1, 7), m = normal(n, 8), v = uniform(n, 0, 1, 9);
  const std::vector<float> g = normal(n, 10);
  RefAdamState r{to_double(p), to_double(m), to_double(v)};
  AdamParams ap;
  ap.lr = 1e-2;
  ap.beta1 = beta1;
  ap.beta2 = beta2;
  ap.step = step;
  adam_step(p.data(), g.data(), m.data(), v.data(), n, ap);
  testing::ref_adam_step(r, to_double(g), 1e-2, beta1, beta2, 1e-8, 0.0, false, step);
  EXPECT_TRUE(close_to(p, r.param, 1e-6, 1e-6));
}

// Bias correction depends only on the step passed in: state from elsewhere plus step k.
TEST_P(KernelLevelTest, BiasCorrectionUsesTheGivenStep) {
  const int64_t n = 1025;
  for (int64_t step : {1, 2, 7, 1000}) {
    std::vector<float> p = uniform(n, -1, 1, 1), m = normal(n, 2), v = uniform(n, 0, 1, 3);
    const std::vector<float> g = normal(n, 4);
    RefAdamState r{to_double(p), to_double(m), to_double(v)};
    AdamParams ap;
    ap.lr = 1e-2;
    ap.step = step;
    adam_step(p.data(), g.data(), m.data(), v.data(), n, ap);
    testing::ref_adam_step(r, to_double(g), 1e-2, 0.9, 0.999, 1e-8, 0.0, false, step);
    EXPECT_TRUE(close_to(p, r.param, 1e-6, 1e-6)) << "step " << step;
  }
}

INSTANTIATE_TEST_SUITE_P(Levels, KernelLevelTest,
                         ::testing::Values(SimdLevel::scalar, SimdLevel::avx2, SimdLevel::avx512),
                         [](const auto& info) { return std::string(simd_level_name(info.param)); });

TEST(KernelArgs, BadArgumentsThrowInvalidArgument) {
  float x = 1, g = 1, m = 0, v = 0;
  AdamParams ap;
  auto adam_code = [&](AdamParams p, int64_t n, DType dt, void* out) {
    try {
      adam_step(&x, &g, &m, &v, n, p, out, dt);
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("[adam_step]"), std::string::npos) << e.what();
      return e.code();
    }
    return ErrorCode::internal;
  };
  EXPECT_EQ(adam_code(ap, -1, DType::f32, nullptr), ErrorCode::invalid_argument);
  AdamParams bad = ap;
  bad.step = 0;
  EXPECT_EQ(adam_code(bad, 1, DType::f32, nullptr), ErrorCode::invalid_argument);
  bad = ap;
  bad.beta2 = 1.0;
  EXPECT_EQ(adam_code(bad, 1, DType::f32, nullptr), ErrorCode::invalid_argument);
  uint8_t out[4];
  EXPECT_EQ(adam_code(ap, 1, DType::u8, out), ErrorCode::invalid_argument);
  EXPECT_EQ(x, 1.0f) << "a rejected call must not write";

  SgdParams sp;
  sp.momentum = 0.9;
  EXPECT_THROW(sgd_step(&x, &g, nullptr, 1, sp), Error);
  sp.momentum = 0;
  sp.nesterov = true;
  EXPECT_THROW(sgd_step(&x, &g, nullptr, 1, sp), Error);
  sp.nesterov = false;
  sgd_step(&x, &g, nullptr, 0, sp);  // n == 0 is a no-op
  EXPECT_EQ(x, 1.0f);
}

TEST(SimdLevels, NamesParseAndUnsupportedLevelsThrow) {
  for (SimdLevel l : {SimdLevel::scalar, SimdLevel::avx2, SimdLevel::avx512})
    EXPECT_EQ(parse_simd_level(simd_level_name(l)), l);
  try {
    parse_simd_level("sse9");
    ADD_FAILURE() << "no throw";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::invalid_argument);
    EXPECT_NE(std::string(e.what()).find("sse9"), std::string::npos);
  }
  EXPECT_TRUE(simd_level_supported(SimdLevel::scalar));
  EXPECT_TRUE(simd_level_supported(best_simd_level()));
  for (SimdLevel l : {SimdLevel::avx2, SimdLevel::avx512}) {
    if (simd_level_supported(l)) continue;
    try {
      set_simd_level(l);
      ADD_FAILURE() << "forcing unsupported " << simd_level_name(l) << " did not throw";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::not_available);
      EXPECT_NE(std::string(e.what()).find(simd_level_name(l)), std::string::npos) << e.what();
    }
  }
  EXPECT_STREQ(simd_level_name(), simd_level_name(simd_level()));
}

}  // namespace
}  // namespace tandem::optim
