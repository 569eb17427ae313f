// SGD, Adam, AdamW and the LR schedules against PyTorch 1.13 values stored by
// scripts/golden_optim.py in tests/golden/optim.safetensors.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "gtest_printers.h"
#include "tandem/optim/kernels.h"
#include "tandem/optim/optimizer.h"
#include "tandem/optim/schedule.h"
#include "tandem/safetensors.h"

namespace tandem::optim {
namespace {

const std::string kGolden = std::string(TANDEM_SOURCE_DIR) + "/tests/golden/optim.safetensors";

// max |a - b| / max |b|, the relative error of a whole tensor.
double rel_error(const Tensor& got, const Tensor& want) {
  EXPECT_EQ(got.shape(), want.shape());
  const std::vector<float> a = got.to_vector(), b = want.to_vector();
  double diff = 0, scale = 0;
  for (size_t i = 0; i < b.size(); ++i) {
    diff = std::max(diff, std::abs(static_cast<double>(a[i]) - b[i]));
    scale = std::max(scale, std::abs(static_cast<double>(b[i])));
  }
  return diff / std::max(scale, 1e-30);
}

struct GoldenConfig {
  std::string name;  // prefix in the golden file
  std::string optimizer;
  OptimizerOptions options;
  std::vector<std::string> state_keys;
};

std::vector<GoldenConfig> configs() {
  std::vector<GoldenConfig> c;
  OptimizerOptions sgd;
  sgd.lr = 0.1;
  sgd.momentum = 0.9;
  sgd.weight_decay = 0.01;
  c.push_back({"sgd", "sgd", sgd, {"momentum_buffer"}});
  OptimizerOptions nesterov = sgd;
  nesterov.nesterov = true;
  c.push_back({"sgd_nesterov", "sgd", nesterov, {"momentum_buffer"}});
  OptimizerOptions plain = sgd;
  plain.momentum = 0.0;
  c.push_back({"sgd_plain", "sgd", plain, {}});
  OptimizerOptions adam;
  adam.lr = 0.01;
  adam.betas = {0.9, 0.999};
  adam.eps = 1e-8;
  adam.weight_decay = 0.01;
  c.push_back({"adam", "adam", adam, {"exp_avg", "exp_avg_sq"}});
  OptimizerOptions adamw;
  adamw.lr = 0.01;
  adamw.betas = {0.8, 0.99};
  adamw.eps = 1e-6;
  adamw.weight_decay = 0.1;
  c.push_back({"adamw", "adamw", adamw, {"exp_avg", "exp_avg_sq"}});
  return c;
}

class GoldenOptimizerTest : public ::testing::TestWithParam<SimdLevel> {};

TEST_P(GoldenOptimizerTest, ThreeStepsMatchTorch) {
  const SimdLevel level = GetParam();
  if (!simd_level_supported(level))
    GTEST_SKIP() << "this CPU does not support SIMD level " << simd_level_name(level);
  const SimdLevel saved = simd_level();
  set_simd_level(level);
  const NamedTensors golden = load_safetensors(kGolden);
  auto get = [&](const std::string& name) { return find_tensor(golden, name, kGolden); };

  for (const GoldenConfig& cfg : configs()) {
    SCOPED_TRACE(cfg.name);
    nn::Parameter w{"w", get("init.w").clone(), Tensor::zeros({3, 5})};
    nn::Parameter b{"b", get("init.b").clone(), Tensor::zeros({4})};
    b.decay = false;  // torch: its own group with weight_decay 0
    auto opt = make_optimizer(cfg.optimizer, {&w, &b}, cfg.options);
    for (int s = 1; s <= 3; ++s) {
      const std::string k = std::to_string(s);
      w.grad.copy_from(get("grad." + k + ".w"));
      b.grad.copy_from(get("grad." + k + ".b"));
      opt->step();
      EXPECT_LE(rel_error(w.value, get(cfg.name + "." + k + ".w")), 1e-6) << "w after step " << s;
      EXPECT_LE(rel_error(b.value, get(cfg.name + "." + k + ".b")), 1e-6) << "b after step " << s;
      std::map<std::string, Tensor> state;
      for (const nn::NamedTensor& nt : opt->state()) state[nt.name] = nt.tensor;
      for (const std::string& key : cfg.state_keys) {
        for (const char* p : {"w", "b"}) {
          const std::string ours = std::string(p) + "." + key;
          ASSERT_TRUE(state.count(ours)) << "missing state " << ours;
          EXPECT_LE(rel_error(state[ours], get(cfg.name + "." + k + "." + ours)), 1e-6)
              << ours << " after step " << s;
        }
      }
    }
    EXPECT_EQ(opt->step_count(), 3);
  }
  set_simd_level(saved);
}

INSTANTIATE_TEST_SUITE_P(Levels, GoldenOptimizerTest,
                         ::testing::Values(SimdLevel::scalar, SimdLevel::avx2, SimdLevel::avx512),
                         [](const auto& info) { return std::string(simd_level_name(info.param)); });

std::vector<double> golden_lrs(const std::string& key) {
  std::map<std::string, std::string> meta;
  load_safetensors(kGolden, &meta);
  EXPECT_TRUE(meta.count(key)) << key;
  std::vector<double> v;
  std::stringstream ss(meta[key]);
  for (std::string item; std::getline(ss, item, ',');) v.push_back(std::stod(item));
  return v;
}

void expect_schedule(const LrSchedule& s, const std::vector<double>& want) {
  ASSERT_FALSE(want.empty());
  for (size_t i = 0; i < want.size(); ++i)
    EXPECT_NEAR(s.lr(static_cast<int64_t>(i)), want[i], 1e-12 * 0.1) << s.name() << " step " << i;
}

TEST(GoldenSchedule, StepMatchesTorchStepLR) {
  expect_schedule(StepSchedule(0.1, 3, 0.5), golden_lrs("sched.step"));
}

TEST(GoldenSchedule, CosineMatchesTorchCosineAnnealingLR) {
  expect_schedule(CosineSchedule(0.1, 0, 10, 0.001), golden_lrs("sched.cosine"));
}

TEST(GoldenSchedule, CosineWithWarmupMatchesTorchLinearThenCosine) {
  expect_schedule(CosineSchedule(0.1, 4, 14, 0.001), golden_lrs("sched.cosine_warmup"));
}

}  // namespace
}  // namespace tandem::optim
