// Adam with bf16 moments (exp_avg and exp_avg_sq stored with stochastic rounding, tandem/
// optim_ops.h): every SIMD level gives the scalar kernel's bits; each stored moment is one of
// the two bf16 neighbours of the f32 moment, and over many elements the rounding is unbiased
// where round-to-nearest would not be; the parameter update is the f32 kernel's for the same
// widened moments; the optimizer keeps bf16 state and refuses it where it cannot run.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "tandem/dtype.h"
#include "tandem/error.h"
#include "tandem/nn/module.h"
#include "tandem/optim/adam.h"
#include "tandem/optim/kernels.h"
#include "tandem/tensor.h"

namespace tandem::optim {
namespace {

struct Moments {
  std::vector<float> param;
  std::vector<uint16_t> m, v;
};

// Two steps of AdamW with bf16 moments on n elements at SIMD level `level`.
Moments two_steps(SimdLevel level, int64_t n) {
  const SimdLevel saved = simd_level();
  set_simd_level(level);
  std::mt19937 rng(5);
  std::normal_distribution<float> d(0.0f, 1.0f);
  Moments r;
  std::vector<float> g(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) r.param.push_back(d(rng)), g[static_cast<size_t>(i)] = 0.1f * d(rng);
  r.m.assign(static_cast<size_t>(n), 0);
  r.v.assign(static_cast<size_t>(n), 0);
  AdamParams ap;
  ap.lr = 1e-3, ap.weight_decay = 0.01, ap.decoupled = true, ap.rounding_seed = 42;
  for (int64_t step = 1; step <= 2; ++step) {
    ap.step = step;
    adam_step_bf16_moments(r.param.data(), g.data(), r.m.data(), r.v.data(), n, ap);
  }
  set_simd_level(saved);
  return r;
}

TEST(Bf16Moments, EveryLevelGivesTheScalarBits) {
  const Moments ref = two_steps(SimdLevel::scalar, 1003);
  for (SimdLevel level : {SimdLevel::avx2, SimdLevel::avx512}) {
    if (!simd_level_supported(level)) {
      std::printf("[  SKIPPED ] level %s: this CPU does not support it\n", simd_level_name(level));
      continue;
    }
    const Moments got = two_steps(level, 1003);
    EXPECT_EQ(got.m, ref.m) << simd_level_name(level);
    EXPECT_EQ(got.v, ref.v) << simd_level_name(level);
    EXPECT_EQ(std::memcmp(got.param.data(), ref.param.data(), ref.param.size() * 4), 0) << simd_level_name(level);
  }
}

// One step from zero moments: m = (1 - beta1) g exactly in f32. Every stored m is one of the two
// bf16 values around it, and their mean over 65536 equal elements is m within 0.5% of the gap
// (round-to-nearest would always give the nearer neighbour: a bias of up to half the gap).
TEST(Bf16Moments, StoredMomentsAreNeighboursAndUnbiased) {
  const int64_t n = 65536;
  const float grad = 1.0f + 1.0f / 3.0f;  // (1 - beta1) * grad is not a bf16 value
  std::vector<float> p(static_cast<size_t>(n), 0.5f), g(static_cast<size_t>(n), grad);
  std::vector<uint16_t> m(static_cast<size_t>(n), 0), v(static_cast<size_t>(n), 0);
  AdamParams ap;
  ap.lr = 1e-3, ap.rounding_seed = 7, ap.step = 1;
  adam_step_bf16_moments(p.data(), g.data(), m.data(), v.data(), n, ap);
  const float exact = 0.1f * grad;  // fmaf(beta1, 0, (1 - beta1) * g) in f32
  uint32_t bits;
  std::memcpy(&bits, &exact, 4);
  const float down = bf16_to_float(static_cast<uint16_t>(bits >> 16));
  const float up = bf16_to_float(static_cast<uint16_t>((bits >> 16) + 1));
  ASSERT_LT(down, exact);
  ASSERT_GT(up, exact);
  double sum = 0;
  int64_t ups = 0;
  for (uint16_t b : m) {
    const float x = bf16_to_float(b);
    ASSERT_TRUE(x == down || x == up) << x;
    ups += x == up;
    sum += x;
  }
  EXPECT_GT(ups, 0);
  EXPECT_LT(ups, n);
  EXPECT_NEAR(sum / static_cast<double>(n), static_cast<double>(exact), 0.005 * (up - down));
}

// The parameter update reads the widened moments and is the f32 kernel's for them.
TEST(Bf16Moments, UpdateIsTheF32KernelsOnTheWidenedMoments) {
  const int64_t n = 257;
  std::mt19937 rng(9);
  std::normal_distribution<float> d(0.0f, 1.0f);
  std::vector<float> p(static_cast<size_t>(n)), g(static_cast<size_t>(n));
  std::vector<uint16_t> m(static_cast<size_t>(n)), v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    p[static_cast<size_t>(i)] = d(rng), g[static_cast<size_t>(i)] = d(rng);
    m[static_cast<size_t>(i)] = float_to_bf16(0.01f * d(rng));
    v[static_cast<size_t>(i)] = float_to_bf16(0.001f * std::fabs(d(rng)));
  }
  std::vector<float> p32 = p, m32(static_cast<size_t>(n)), v32(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    m32[static_cast<size_t>(i)] = bf16_to_float(m[static_cast<size_t>(i)]),
    v32[static_cast<size_t>(i)] = bf16_to_float(v[static_cast<size_t>(i)]);
  AdamParams ap;
  ap.lr = 1e-2, ap.step = 3, ap.weight_decay = 0.1, ap.decoupled = true;
  adam_step_bf16_moments(p.data(), g.data(), m.data(), v.data(), n, ap);
  adam_step(p32.data(), g.data(), m32.data(), v32.data(), n, ap);
  EXPECT_EQ(std::memcmp(p.data(), p32.data(), static_cast<size_t>(n) * 4), 0);
  for (int64_t i = 0; i < n; ++i)  // the stored moments: within one bf16 step of the f32 ones
    EXPECT_LE(std::fabs(bf16_to_float(m[static_cast<size_t>(i)]) - m32[static_cast<size_t>(i)]),
              std::fabs(m32[static_cast<size_t>(i)]) / 128.0f + 1e-30f);
}

TEST(Bf16Moments, AdamWKeepsBf16StateAndRefusesLateChanges) {
  nn::Parameter w;
  w.name = "w";
  w.value = Tensor::from_vector({4}, {1, 2, 3, 4});
  w.grad = Tensor::from_vector({4}, {0.5f, -0.5f, 1, -1});
  AdamW opt({&w}, 1e-2);
  opt.set_moments_dtype(DType::bf16);
  opt.step();
  bool found = false;
  for (const nn::NamedTensor& t : opt.state())
    if (t.name.find("exp_avg") != std::string::npos) {
      EXPECT_EQ(t.tensor.dtype(), DType::bf16) << t.name;
      found = true;
    }
  EXPECT_TRUE(found);
  EXPECT_LT(w.value.data<float>()[0], 1.0f);  // the update ran
  try {
    opt.set_moments_dtype(DType::f32);
    ADD_FAILURE() << "changed after the first step";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("set before the first step"), std::string::npos) << e.what();
  }
  EXPECT_THROW(AdamW({&w}).set_moments_dtype(DType::f16), Error);
}

// A checkpoint's moments in the other dtype (a run resumed with another --optimizer-moments
// and --force) are converted on load: bf16 widened exactly, f32 rounded to the nearest bf16.
TEST(Bf16Moments, LoadStateConvertsTheOtherMomentDtype) {
  nn::Parameter w;
  w.name = "w";
  w.value = Tensor::from_vector({4}, {1, 2, 3, 4});
  w.grad = Tensor::from_vector({4}, {0.5f, -0.5f, 1, -1});
  AdamW f32_opt({&w}, 1e-2);
  f32_opt.step();
  const std::vector<nn::NamedTensor> saved = f32_opt.state();
  AdamW bf16_opt({&w}, 1e-2);
  bf16_opt.set_moments_dtype(DType::bf16);
  bf16_opt.load_state(saved, f32_opt.step_count());
  int moments = 0;
  for (const nn::NamedTensor& t : bf16_opt.state()) {
    if (t.name.find("exp_avg") == std::string::npos) continue;
    ++moments;
    ASSERT_EQ(t.tensor.dtype(), DType::bf16) << t.name;
    for (const nn::NamedTensor& s : saved) {
      if (s.name != t.name) continue;
      for (int64_t i = 0; i < 4; ++i) {
        const Tensor nearest = Tensor::from_vector({1}, {static_cast<float>(s.tensor.item(i))}).to(DType::bf16);
        EXPECT_EQ(t.tensor.item(i), nearest.item()) << t.name << "[" << i << "]";
      }
    }
  }
  EXPECT_EQ(moments, 2);
  AdamW back({&w}, 1e-2);  // and widened again
  back.load_state(bf16_opt.state(), bf16_opt.step_count());
  for (const nn::NamedTensor& t : back.state()) {
    if (t.name.find("exp_avg") != std::string::npos) {
      EXPECT_EQ(t.tensor.dtype(), DType::f32) << t.name;
    }
  }
  // Another shape is still refused, naming the state.
  std::vector<nn::NamedTensor> bad = saved;
  for (nn::NamedTensor& t : bad)
    if (t.name.find("exp_avg") != std::string::npos) t.tensor = Tensor::zeros({3}, DType::f32);
  EXPECT_THROW(AdamW({&w}, 1e-2).load_state(bad, 1), Error);
}

}  // namespace
}  // namespace tandem::optim
