// A split step (--devices) takes the single-device step's update path: mixed precision, the
// loss scaler (an inf/NaN on any replica skips the step on all and halves the scale),
// --clip-grad-norm on the combined gradient, and the optimizer on the CPU
// (--optimizer-device cpu).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "dist/dist_test_util.h"
#include "split_test_util.h"
#include "tandem/data/synthetic_dataset.h"
#include "tandem/op_support.h"
#include "tandem/ops.h"
#include "tandem/stream.h"
#include "tandem/train/trainer.h"
#include "tandem/virt.h"
#include "train/run_builder.h"
#include "train/step_loop.h"

namespace tandem::testing {
namespace {

std::shared_ptr<const data::Dataset> train_set(int64_t n) { return split_train_set(n); }
std::shared_ptr<const data::Dataset> test_set() { return split_test_set(); }

struct Case {
  std::string name, devices, split, precision, loss_scale, optimizer, optimizer_device;
  double clip;  // --clip-grad-norm (0: none)
  int64_t steps;      // of batch 16
  double tolerance;   // of the largest weight
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

class SplitUpdate : public ::testing::TestWithParam<Case> {};

// The mlp (no BatchNorm), batch 16: the split run against one virt device with the same flags
// (SGD: Adam's normalisation would magnify the last bits of near-zero gradients). In bf16 and
// fp16 each replica's loss gradient is the mean over its own part, rounded to the compute dtype
// before the sample weight (n_d / N) applies in f32, where one device rounds the mean over the
// whole batch: unless the parts are equal (then both roundings are exact powers of two apart),
// the gradients differ by the dtype's rounding. Measured after 2 steps: 5.1e-4 (bf16, 12 + 4),
// 5.3e-4 (bf16, 10 + 6), 1.2e-4 (bf16 with the scaler and clipping), 7.5e-5 (fp16) of the
// largest weight, against 2.3e-3 between one device in bf16 and in fp32 after 1 step; bf16 training
// of this mlp then amplifies any such difference (bf16 against fp32: 0.12 after 20 steps), so
// the unequal cases run 2 steps. Equal parts in bf16 and the fp32 cases run 20 steps and
// differ only by the order of the float sums (measured 1.4e-7 to 4e-7).
TEST_P(SplitUpdate, EqualsOneDevice) {
  const Case& c = GetParam();
  set_virt_device_count(2);
  train::TrainConfig one = dist_config(c.optimizer);
  one.device = "virt:0";
  one.precision = c.precision;
  one.loss_scale = c.loss_scale;
  one.clip_grad_norm = c.clip;
  train::Trainer single(one, train_set(16 * c.steps), test_set());
  const train::TrainResult r1 = single.fit();
  train::TrainConfig split = one;
  split.devices = c.devices;
  split.split = c.split;
  split.optimizer_device = c.optimizer_device;
  train::Trainer both(split, train_set(16 * c.steps), test_set());
  const train::TrainResult r2 = both.fit();
  ASSERT_EQ(r2.split_parts.size(), static_cast<size_t>(c.steps));
  const double diff = relative_difference(trained_weights(single), trained_weights(both));
  // Where bf16 is stored only (a CPU without oneDNN's bf16 kernels, or TANDEM_MAX_CPU_ISA=avx2),
  // each product is the f32 sgemm's, whose blocking depends on the row count (8 per part
  // against 16): rows differ in their last f32 bits, and rounding the outputs to bf16 turns
  // some of those into bf16 ulp flips that 20 steps of this mlp amplify (measured 8.1e-5 of the
  // largest weight at avx2, against 1.4e-7 to 4e-7 with native bf16): 2e-4 there.
  const bool stored_only = c.precision == "bf16" && !ops::compute_note(DType::bf16, Device{}).empty();
  EXPECT_LT(diff, stored_only ? std::max(c.tolerance, 2e-4) : c.tolerance);
  EXPECT_GT(diff, -1.0);
  EXPECT_NEAR(r1.epochs[0].train_loss, r2.epochs[0].train_loss, 100 * c.tolerance);
  ASSERT_EQ(r1.epochs[0].loss_scaled, r2.epochs[0].loss_scaled);
  if (r1.epochs[0].loss_scaled) {
    EXPECT_EQ(r1.epochs[0].loss_scale, r2.epochs[0].loss_scale);
    EXPECT_EQ(r1.epochs[0].skipped_steps, r2.epochs[0].skipped_steps);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Flags, SplitUpdate,
    ::testing::Values(Case{"bf16", "virt:0,virt:1", "3,1", "bf16", "auto", "sgd", "device", 0, 2, 1e-3},
                      Case{"bf16_5_3", "virt:0,virt:1", "5,3", "bf16", "auto", "sgd", "device", 0, 2, 1e-3},
                      Case{"bf16_cpu", "virt:0,cpu", "1,1", "bf16", "auto", "sgd", "device", 0, 20, 1e-5},
                      Case{"bf16_scaled_clipped", "virt:0,virt:1", "3,1", "bf16", "dynamic", "sgd", "device", 0.5, 2, 1e-3},
                      Case{"fp16_scaled", "cpu,virt:1", "3,1", "fp16", "auto", "sgd", "device", 0, 2, 1e-3},
                      Case{"fp32_clipped", "virt:0,virt:1", "3,1", "fp32", "auto", "sgd", "device", 0.1, 20, 1e-5},
                      Case{"optimizer_on_cpu", "virt:0,virt:1", "auto", "fp32", "auto", "sgd", "cpu", 0, 20, 1e-5}),
    [](const ::testing::TestParamInfo<Case>& i) { return i.param.name; });

// --optimizer-device cpu with a split against the split with the optimizer on its first
// device: the same kernels on the same fp32 inputs, so the same weights bit for bit.
TEST(SplitUpdate, OptimizerOnTheCpuEqualsTheFirstDevice) {
  set_virt_device_count(2);
  train::TrainConfig c = dist_config("adamw");
  c.devices = "virt:0,virt:1";
  c.split = "3,1";
  train::Trainer on_device(c, train_set(320), test_set());
  on_device.fit();
  c.optimizer_device = "cpu";
  train::Trainer offloaded(c, train_set(320), test_set());
  EXPECT_NE(offloaded.describe().find("on the cpu (offloaded"), std::string::npos) << offloaded.describe();
  offloaded.fit();
  EXPECT_EQ(relative_difference(trained_weights(on_device), trained_weights(offloaded)), 0.0);
}

// Host copies of the parameters' values, ordered after the work queued on their device's
// stream (not waited for: in a split step an accelerator starts only once every part is issued).
std::vector<Tensor> copy_values(const std::vector<nn::Parameter*>& params) {
  std::vector<Tensor> out;
  for (nn::Parameter* p : params) {
    const Device d = p->value.device();
    out.push_back(p->value.to(Device{}, runtime_for(d).current_stream(d.index)));
  }
  return out;
}

std::vector<std::vector<float>> host_values(const std::vector<Tensor>& copies) {
  std::vector<std::vector<float>> out;
  for (const Tensor& t : copies) {
    t.storage()->pending_write().synchronize();
    out.push_back(t.to_vector());
  }
  return out;
}

// fp16 with the dynamic loss scaler over virt:0 + virt:1: an inf written into one gradient of
// replica 1 in the first step skips that step on every replica (replica 1 computes its second
// step at the initial weights) and halves the scale (2^16 -> 2^15); the second step runs.
TEST(SplitUpdate, AnInfOnOneReplicaSkipsTheStepOnAll) {
  set_virt_device_count(2);
  train::TrainConfig c = dist_config("sgd");
  c.precision = "fp16";
  c.loss_scale = "dynamic";
  c.devices = "virt:0,virt:1";
  c.split = "1,1";
  c.log_interval = 1;
  std::unique_ptr<train::Run> r = train::build_run(c, train_set(32), test_set());
  const std::vector<std::vector<float>> initial = host_values(copy_values(r->params));
  int calls = 0;
  std::vector<Tensor> replica1_at_step2;
  r->split->set_grad_hook([&](size_t device, const std::vector<nn::Parameter*>& params) {
    if (device != 1) return;
    ++calls;
    if (calls == 1) ops::scale_(params[0]->grad, INFINITY);  // 0 * inf: NaN too, both non-finite
    if (calls == 2) replica1_at_step2 = copy_values(params);
  });
  int64_t global_step = 0;
  train::train_epoch(*r, 1, global_step, train::TrainCallbacks{});
  ASSERT_EQ(calls, 2);
  EXPECT_EQ(relative_difference(initial, host_values(replica1_at_step2)), 0.0) << "replica 1 took the skipped step";
  const optim::LossScalerState st = r->scaler->read();
  EXPECT_EQ(st.skipped_steps, 1);
  EXPECT_EQ(st.scale, 32768.0f);
  EXPECT_EQ(r->optimizer().step_count(), 1);
  EXPECT_GT(relative_difference(initial, host_values(copy_values(r->params))), 0.0) << "the second step did not run";
}

}  // namespace
}  // namespace tandem::testing
