// The offloaded optimizer's checks of a step (OffloadOptions::clip_grad_norm, loss_scale,
// speculate): updates that run as the gradients arrive and are rolled back when the global
// norm or the inf/NaN check says so give the bits of updates that wait for the checks, in
// every case, rolled-back steps included:
//  - clipping that bites on some steps and not on others, delay 0 and delay 1, speculative
//    against synchronous; in fp32 also against the on-device optimizer after the device's
//    ops::clip_grad_norm_ (the same kernel, the same gradients);
//  - dynamic loss scaling with forced overflows (an inf in one gradient): the step is skipped
//    exactly (no parameter, moment or step count changes), the scale halves, and the run
//    equals the synchronous one and the on-device scaler's gated steps.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "core/virt_test_util.h"
#include "tandem/amp_ops.h"
#include "tandem/ops.h"
#include "tandem/optim/loss_scaler.h"
#include "tandem/optim/offload.h"
#include "tandem/virt.h"

namespace tandem::optim {
namespace {

using tandem::testing::on;
using tandem::testing::random_host;
using tandem::testing::to_host;

constexpr Device kVirt{DeviceKind::virt, 0};
const std::vector<Shape> kShapes{{7}, {1023}, {33, 31}, {1025}, {17}};
constexpr int kSteps = 8;

bool bit_equal(const Tensor& a, const Tensor& b) {
  const Tensor ha = to_host(a), hb = to_host(b);
  return ha.nbytes() == hb.nbytes() && std::memcmp(ha.raw_data(), hb.raw_data(), ha.nbytes()) == 0;
}

struct Params {
  std::vector<std::unique_ptr<nn::Parameter>> owned;
  std::vector<nn::Parameter*> ptrs;
};

Params make_params(Device d) {
  Params ps;
  for (size_t i = 0; i < kShapes.size(); ++i) {
    auto p = std::make_unique<nn::Parameter>();
    std::string name(1, 'p');  // built apart and moved in: GCC 12's -Wrestrict false positive otherwise
    name += std::to_string(i);
    p->name = std::move(name);
    p->value = on(d, random_host(kShapes[i], 10 + i));
    p->grad = on(d, Tensor::zeros(kShapes[i]));
    ps.ptrs.push_back(p.get());
    ps.owned.push_back(std::move(p));
  }
  return ps;
}

// Step k's gradients times `times` (steps of large and small norm alternate: clipping at 3
// bites on the large ones only), with an inf in parameter 2 on the steps in `inf_steps`.
void set_grads(const Params& ps, int k, float times, const std::vector<int>& inf_steps = {}) {
  const float size = k % 3 == 1 ? 0.01f : 1.0f;
  for (size_t i = 0; i < ps.ptrs.size(); ++i) {
    Tensor h = random_host(kShapes[i], 1000 * static_cast<uint64_t>(k) + i);
    for (int64_t j = 0; j < h.numel(); ++j) h.data<float>()[j] *= size * times;
    for (int s : inf_steps)
      if (s == k && i == 2) h.data<float>()[5] = std::numeric_limits<float>::infinity();
    ps.ptrs[i]->grad = on(ps.ptrs[i]->grad.device(), h);
  }
}

OptimizerOptions adamw() {
  OptimizerOptions o;
  o.lr = 0.01;
  o.weight_decay = 0.1;
  return o;
}

float scale_of(const LossScaler& s) { return s.read().scale; }

// The offloaded run: `speculate`, `delay`, clipping at `clip`, a scaler starting at `scale`
// (0: none). Returns the device parameters after flush(), and the skipped steps.
struct Result {
  std::vector<Tensor> values;
  std::vector<int> skipped;
  int64_t steps = 0;
};

Result offloaded(bool speculate, int delay, double clip, float scale, const std::vector<int>& inf_steps = {}) {
  Params ps = make_params(kVirt);
  std::unique_ptr<LossScaler> scaler;
  if (scale > 0) {
    LossScalerOptions so;
    so.init_scale = scale;
    scaler = std::make_unique<LossScaler>(kVirt, so);
  }
  OffloadOptions off;
  off.bucket_cap_mb = 0.004;  // several buckets
  off.delay = delay;
  off.clip_grad_norm = clip;
  off.speculate = speculate;
  if (scaler) off.loss_scale = scaler->state();
  OffloadOptimizer opt("adamw", ps.ptrs, adamw(), off);
  EXPECT_GT(opt.buckets().size(), 2u);
  Result r;
  for (int k = 0; k < kSteps; ++k) {
    set_grads(ps, k, scaler ? scale_of(*scaler) : 1.0f, inf_steps);
    opt.step();
    if (scaler) {
      if (opt.last_step_skipped()) r.skipped.push_back(k);
      scaler->set_found_inf(opt.last_step_skipped());
      scaler->update();
    }
  }
  opt.flush();
  for (nn::Parameter* p : ps.ptrs) r.values.push_back(to_host(p->value));
  r.steps = opt.step_count();
  return r;
}

// The on-device optimizer: clipping with the device's op, the scaler's gated step.
Result on_device(double clip, float scale, const std::vector<int>& inf_steps = {}) {
  Params ps = make_params(kVirt);
  std::unique_ptr<LossScaler> scaler;
  if (scale > 0) {
    LossScalerOptions so;
    so.init_scale = scale;
    scaler = std::make_unique<LossScaler>(kVirt, so);
  }
  std::unique_ptr<Optimizer> opt = make_optimizer("adamw", ps.ptrs, adamw());
  Tensor norm = Tensor::empty({1}, DType::f32, kVirt);
  Result r;
  for (int k = 0; k < kSteps; ++k) {
    set_grads(ps, k, scaler ? scale_of(*scaler) : 1.0f, inf_steps);
    const int64_t skipped = scaler ? scaler->read().skipped_steps : 0;
    if (scaler) scaler->unscale_(ps.ptrs);
    if (clip > 0) {
      std::vector<Tensor> gs;
      for (nn::Parameter* p : ps.ptrs) gs.push_back(p->grad);
      ops::clip_grad_norm_(gs, clip, norm);
    }
    if (scaler) {
      scaler->step(*opt);
      scaler->update();
      if (scaler->read().skipped_steps > skipped) r.skipped.push_back(k);
    } else {
      opt->step();
    }
  }
  for (nn::Parameter* p : ps.ptrs) r.values.push_back(to_host(p->value));
  r.steps = opt->step_count();
  return r;
}

void expect_same(const Result& a, const Result& b, const std::string& what) {
  ASSERT_EQ(a.values.size(), b.values.size());
  for (size_t i = 0; i < a.values.size(); ++i) EXPECT_TRUE(bit_equal(a.values[i], b.values[i])) << what << " p" << i;
  EXPECT_EQ(a.skipped, b.skipped) << what;
  EXPECT_EQ(a.steps, b.steps) << what;
}

TEST(OffloadChecks, ClippingThatBitesSometimesIsBitIdentical) {
  // Norms: about 26 on the large steps, 0.26 on the small ones; clipping at 3 bites on the large.
  const Result spec = offloaded(true, 0, 3.0, 0), sync = offloaded(false, 0, 3.0, 0), dev = on_device(3.0, 0);
  expect_same(spec, sync, "speculative vs synchronous");
  expect_same(spec, dev, "offloaded vs on-device clipping");
  // Clipping changed the result (it bit), and a bound above every norm changes nothing.
  const Result unclipped = on_device(0, 0);
  EXPECT_FALSE(bit_equal(spec.values[3], unclipped.values[3]));
  expect_same(offloaded(true, 0, 1e6, 0), unclipped, "a bound that never bites");
}

TEST(OffloadChecks, ClippingWithTheDelayedUpdateIsBitIdentical) {
  const Result spec = offloaded(true, 1, 3.0, 0), sync = offloaded(false, 1, 3.0, 0);
  expect_same(spec, sync, "delay 1: speculative vs synchronous");
  EXPECT_FALSE(bit_equal(spec.values[3], offloaded(true, 1, 0, 0).values[3]));  // it bit
}

TEST(OffloadChecks, OverflowSkipsExactlyTheStepAndHalvesTheScale) {
  const std::vector<int> inf_steps{2, 5};
  const Result spec = offloaded(true, 0, 0, 1024.0f, inf_steps);
  EXPECT_EQ(spec.skipped, inf_steps);
  EXPECT_EQ(spec.steps, kSteps - 2);
  expect_same(spec, offloaded(false, 0, 0, 1024.0f, inf_steps), "speculative vs synchronous");
  expect_same(spec, on_device(0, 1024.0f, inf_steps), "offloaded vs the gated on-device step");
  // With clipping too, and with the delay.
  expect_same(offloaded(true, 0, 3.0, 1024.0f, inf_steps), on_device(3.0, 1024.0f, inf_steps), "clip + scale");
  expect_same(offloaded(true, 1, 3.0, 1024.0f, inf_steps), offloaded(false, 1, 3.0, 1024.0f, inf_steps),
              "delay 1: clip + scale");
}

TEST(OffloadChecks, ASkippedStepLeavesEveryParameterAsItWas) {
  Params ps = make_params(kVirt);
  LossScalerOptions so;
  so.init_scale = 256.0;
  LossScaler scaler(kVirt, so);
  OffloadOptions off;
  off.bucket_cap_mb = 0.004;
  off.loss_scale = scaler.state();
  OffloadOptimizer opt("adamw", ps.ptrs, adamw(), off);
  for (int k = 0; k < 3; ++k) {
    set_grads(ps, k, scale_of(scaler), {2});
    std::vector<Tensor> before;
    opt.flush();
    for (nn::Parameter* p : ps.ptrs) before.push_back(to_host(p->value));
    const std::vector<nn::NamedTensor> state_before = [&] {
      std::vector<nn::NamedTensor> out;
      for (const nn::NamedTensor& t : opt.state()) out.push_back({t.name, t.tensor.clone(), false});
      return out;
    }();
    opt.step();
    scaler.set_found_inf(opt.last_step_skipped());
    scaler.update();
    opt.flush();
    EXPECT_EQ(opt.last_step_skipped(), k == 2);
    if (k != 2) continue;
    for (size_t i = 0; i < ps.ptrs.size(); ++i) EXPECT_TRUE(bit_equal(ps.ptrs[i]->value, before[i])) << i;
    const std::vector<nn::NamedTensor> after = opt.state();
    ASSERT_EQ(after.size(), state_before.size());
    for (size_t i = 0; i < after.size(); ++i) EXPECT_TRUE(bit_equal(after[i].tensor, state_before[i].tensor)) << after[i].name;
    EXPECT_EQ(opt.step_count(), 2);
    EXPECT_EQ(scale_of(scaler), 128.0f);
  }
}

}  // namespace
}  // namespace tandem::optim
