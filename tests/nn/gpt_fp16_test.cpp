// A GPT in fp16 with dynamic loss scaling (GradScaler's rules, optim::LossScaler): the fused
// classifier scales the loss gradient by the scaler's device state before it is rounded to
// f16 (forward_loss's grad_scale), so the gradients come out times the scale; and a scale too
// large for f16 overflows, which skips exactly that step (no weight changes) and halves the
// scale, until the steps run.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <memory>
#include <vector>

#include "tandem/nn/gpt.h"
#include "tandem/ops.h"
#include "tandem/optim/loss_scaler.h"
#include "tandem/optim/optimizer.h"
#include "tandem/rng.h"
#include "tandem/virt.h"

namespace tandem::nn {
namespace {

constexpr Device kVirt{DeviceKind::virt, 0};

GptConfig tiny() { return GptConfig{11, 8, 2, 2, 8, 1e-5f}; }

Tensor tokens_of(const Shape& s, int64_t vocab, uint64_t seed) {
  Tensor t = Tensor::empty(s, DType::i64);
  Philox rng(seed, 9);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<int64_t>()[i] = rng.randint(static_cast<uint32_t>(vocab));
  return t;
}

Tensor host(const Tensor& t) {
  const Stream s = virt_current_stream(0);
  Tensor h = t.to(Device{}, s);
  s.synchronize();
  return h;
}

bool same_bits(const Tensor& a, const Tensor& b) {
  return a.nbytes() == b.nbytes() && std::memcmp(a.raw_data(), b.raw_data(), a.nbytes()) == 0;
}

// The gradients of one fused loss step, scaled by the scaler state `state` (undefined: none).
std::vector<Tensor> grads_of(Gpt& m, const Tensor& state) {
  const Stream s = virt_current_stream(0);
  const Tensor tokens = tokens_of({2, 5}, 11, 5).to(kVirt, s), targets = tokens_of({2, 5}, 11, 6).to(kVirt, s);
  m.train();
  m.zero_grad();
  m.forward_loss(tokens, targets, Tensor(), 1.0f, -1, state);
  m.backward_loss();
  std::vector<Tensor> out;
  for (Parameter* p : m.parameters()) out.push_back(host(p->grad));
  return out;
}

TEST(GptFp16, TheFusedLossScalesTheGradientsByTheDeviceScale) {
  Gpt m(tiny());
  m.set_compute_dtype(DType::f16);
  m.to(kVirt);
  optim::LossScalerOptions o;
  o.init_scale = 1024.0;
  const optim::LossScaler scaler(kVirt, o);
  const std::vector<Tensor> plain = grads_of(m, Tensor()), scaled = grads_of(m, scaler.state());
  ASSERT_EQ(plain.size(), scaled.size());
  // Each gradient is 1024 times the unscaled one within f16 rounding (the unscaled run's small
  // gradients lose bits in f16 that the scaled one keeps): per tensor, within 5% of its largest.
  for (size_t i = 0; i < plain.size(); ++i) {
    double err = 0, top = 0;
    for (int64_t j = 0; j < plain[i].numel(); ++j) {
      const double a = plain[i].data<float>()[j] * 1024.0, b = scaled[i].data<float>()[j];
      err = std::max(err, std::abs(a - b));
      top = std::max(top, std::abs(a));
    }
    EXPECT_LE(err, 0.05 * top + 1e-6) << "parameter " << i;
  }
  EXPECT_GT(std::abs(scaled[0].data<float>()[0]), 0.0f);
}

TEST(GptFp16, AnOverflowSkipsExactlyItsStepAndHalvesTheScale) {
  Gpt m(tiny());
  m.set_compute_dtype(DType::f16);
  m.to(kVirt);
  optim::LossScalerOptions so;
  so.init_scale = std::ldexp(1.0, 30);  // the f16 gradients overflow until the scale is far smaller
  optim::LossScaler scaler(kVirt, so);
  optim::OptimizerOptions oo;
  oo.lr = 1e-2;
  std::unique_ptr<optim::Optimizer> opt = optim::make_optimizer("adamw", m.parameters(), oo);
  const Stream s = virt_current_stream(0);
  const Tensor tokens = tokens_of({2, 5}, 11, 5).to(kVirt, s), targets = tokens_of({2, 5}, 11, 6).to(kVirt, s);
  int skipped = 0, ran = 0;
  for (int step = 0; step < 24; ++step) {
    std::vector<Tensor> before;
    for (Parameter* p : m.parameters()) before.push_back(host(p->value));
    const optim::LossScalerState st0 = scaler.read();
    m.train();
    opt->zero_grad();
    m.forward_loss(tokens, targets, Tensor(), 1.0f, -1, scaler.state());
    m.backward_loss();
    scaler.step(*opt);
    scaler.update();
    const optim::LossScalerState st1 = scaler.read();
    bool unchanged = true;
    const std::vector<Parameter*> ps = m.parameters();
    for (size_t i = 0; i < ps.size(); ++i) unchanged = unchanged && same_bits(before[i], host(ps[i]->value));
    if (st1.skipped_steps > st0.skipped_steps) {
      ++skipped;
      EXPECT_TRUE(unchanged) << "step " << step << " was skipped but changed the weights";
      EXPECT_EQ(st1.scale, st0.scale / 2) << step;
      EXPECT_EQ(opt->step_count(), ran) << step;
    } else {
      ++ran;
      EXPECT_FALSE(unchanged) << "step " << step << " ran but changed nothing";
      EXPECT_EQ(st1.scale, st0.scale) << step;
      EXPECT_EQ(opt->step_count(), ran) << step;
    }
  }
  EXPECT_GE(skipped, 5);  // 2^30 is far beyond f16's 65504
  EXPECT_GE(ran, 3);
}

}  // namespace
}  // namespace tandem::nn
