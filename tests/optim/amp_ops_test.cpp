// The mixed-precision ops (tandem/amp_ops.h) on cpu and virt against float64 references: the
// fused inf/NaN check finds a non-finite value in any grad and position (sizes around the
// vector tails), unscaling multiplies by the f32 reciprocal, clip_grad_norm_ matches
// torch.nn.utils.clip_grad_norm_'s formula, and run_if_finite runs its task only on a clean
// check. Bad arguments name the tensor.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "core/virt_test_util.h"
#include "tandem/amp_ops.h"
#include "tandem/rng.h"
#include "tandem/virt.h"

namespace tandem::ops {
namespace {

using tandem::testing::to_host;

Tensor on(Device d, const Tensor& h) {
  if (d.is_host()) return h.clone();
  Tensor t = h.to(d, virt_current_stream(d.index));
  t.storage()->pending_write().synchronize();
  return t;
}

Tensor random(int64_t n, uint64_t seed) {
  Tensor t = Tensor::empty({n});
  Philox rng(seed, 0);
  for (int64_t i = 0; i < n; ++i) t.data<float>()[i] = 4.0f * rng.uniform() - 2.0f;
  return t;
}

Tensor state_with(Device d, float scale) { return on(d, Tensor::from_vector({4}, {scale, 0, 0, 0})); }

class AmpOpsTest : public ::testing::TestWithParam<DeviceKind> {
 protected:
  Device dev() const { return Device{GetParam(), 0}; }
};

TEST_P(AmpOpsTest, CheckFindsAnyNonFiniteAndUnscales) {
  const std::vector<int64_t> sizes{1, 7, 1023, 1024, 1025};
  for (float bad : {std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(), std::nanf("")}) {
    for (size_t which = 0; which < sizes.size(); ++which) {
      std::vector<Tensor> host, grads;
      for (size_t i = 0; i < sizes.size(); ++i) host.push_back(random(sizes[i], 10 + i));
      const int64_t at = sizes[which] - 1;  // the last element: the vector tail
      host[which].data<float>()[at] = bad;
      for (const Tensor& h : host) grads.push_back(on(dev(), h));
      Tensor st = state_with(dev(), 8.0f);
      amp_unscale_check_(grads, st);
      EXPECT_EQ(to_host(st).data<float>()[kFoundInf], 1.0f) << "grad " << which << " value " << bad;
    }
  }
  std::vector<Tensor> host, grads;
  for (size_t i = 0; i < sizes.size(); ++i) host.push_back(random(sizes[i], 20 + i));
  for (const Tensor& h : host) grads.push_back(on(dev(), h));
  Tensor st = state_with(dev(), 3.0f);
  amp_unscale_check_(grads, st);
  EXPECT_EQ(to_host(st).data<float>()[kFoundInf], 0.0f);
  const float inv = static_cast<float>(1.0 / 3.0);
  for (size_t i = 0; i < sizes.size(); ++i) {
    const Tensor g = to_host(grads[i]);
    for (int64_t j = 0; j < sizes[i]; ++j) ASSERT_EQ(g.data<float>()[j], host[i].data<float>()[j] * inv);
  }
}

TEST_P(AmpOpsTest, ClipGradNormMatchesTorchFormula) {
  for (double max_norm : {0.5, 1e6}) {
    const std::vector<int64_t> sizes{1, 7, 1025};
    std::vector<Tensor> host, grads;
    double sq = 0;
    for (size_t i = 0; i < sizes.size(); ++i) {
      host.push_back(random(sizes[i], 30 + i));
      for (int64_t j = 0; j < sizes[i]; ++j) sq += std::pow(static_cast<double>(host[i].data<float>()[j]), 2);
      grads.push_back(on(dev(), host[i]));
    }
    Tensor norm = Tensor::empty({1}, DType::f32, dev());
    clip_grad_norm_(grads, max_norm, norm);
    const double want = std::sqrt(sq);
    EXPECT_NEAR(to_host(norm).data<float>()[0], want, want * 1e-6);
    const double coef = std::min(1.0, max_norm / (want + 1e-6));
    double sq_after = 0;
    for (size_t i = 0; i < sizes.size(); ++i) {
      const Tensor g = to_host(grads[i]);
      for (int64_t j = 0; j < sizes[i]; ++j) {
        EXPECT_NEAR(g.data<float>()[j], host[i].data<float>()[j] * coef, 1e-6);
        sq_after += std::pow(static_cast<double>(g.data<float>()[j]), 2);
      }
    }
    EXPECT_NEAR(std::sqrt(sq_after), std::min(want, max_norm), 1e-5);
  }
}

TEST_P(AmpOpsTest, RunIfFiniteRunsOnlyOnACleanCheck) {
  Tensor st = state_with(dev(), 1.0f);
  int runs = 0;
  run_if_finite(st, {}, [&] { ++runs; });
  to_host(st);
  virt_current_stream(0).synchronize();
  EXPECT_EQ(runs, 1);
  amp_unscale_check_({on(dev(), Tensor::from_vector({1}, {std::nanf("")}))}, st);
  run_if_finite(st, {}, [&] { ++runs; });
  virt_current_stream(0).synchronize();
  EXPECT_EQ(runs, 1);
}

TEST_P(AmpOpsTest, BadArgumentsNameTheTensor) {
  Tensor st = state_with(dev(), 1.0f);
  try {
    amp_unscale_check_({on(dev(), Tensor::zeros({2}, DType::i32))}, st);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("grads[0]"), std::string::npos) << e.what();
  }
  EXPECT_THROW(amp_update_scale_(Tensor::zeros({3}), AmpScaleParams{}), Error);
  AmpScaleParams p;
  p.growth_factor = 1.0f;
  EXPECT_THROW(amp_update_scale_(st, p), Error);
  Tensor norm = Tensor::empty({1}, DType::f32, dev());
  EXPECT_THROW(clip_grad_norm_({}, 0.0, norm), Error);
}

INSTANTIATE_TEST_SUITE_P(Devices, AmpOpsTest, ::testing::Values(DeviceKind::cpu, DeviceKind::virt),
                         [](const auto& info) { return std::string(device_kind_name(info.param)); });

}  // namespace
}  // namespace tandem::ops
