// --recompute blocks (nn::Block::set_recompute): a GPT-2 block keeps only its input between
// forward and backward and runs its forward again in backward.
//  - Bit-identical: three AdamW steps of a 3-layer GPT with and without recompute give the same
//    loss sums, every gradient and every updated weight bit for bit, on cpu f32 and on virt
//    (the same kernels on the same inputs; the GPT has no dropout, so no mask to replay).
//  - Memory, gpt-mini (6 layers, 384 wide) at batch 8 on the cpu, measured with the host
//    allocator's byte counts (exact sizes): the activation bytes held between forward and
//    backward shrink by more than half with recompute, a step's peak shrinks, and both figures
//    agree with the memory plan (nn::BufferPlan) within 1% (the plan rounds each buffer up to
//    512 bytes as the caching allocators do). Steps 2..4 leave the same bytes allocated and
//    reach the same peak: nothing grows in the steady state.
#include <gtest/gtest.h>

#include <cstdio>
#include <memory>
#include <vector>

#include "memory/memory_test_util.h"
#include "tandem/allocator.h"
#include "tandem/host_allocator_stats.h"
#include "tandem/nn/gpt.h"
#include "tandem/train/memory_plan.h"
#include "tandem/virt.h"

namespace tandem {
namespace {

using memory_test::same_bits;
using memory_test::sync;
using memory_test::tokens_of;

nn::GptConfig small() {
  return nn::GptConfig{61, 16, 3, 2, 32, 1e-5f};
}

optim::OptimizerOptions adamw() {
  optim::OptimizerOptions o;
  o.lr = 1e-2;
  o.weight_decay = 0.1;
  return o;
}

TEST(Recompute, BitIdenticalOnCpuAndVirt) {
  for (const Device dev : {Device{}, Device{DeviceKind::virt, 0}}) {
    nn::Gpt plain(small()), rc(small());
    EXPECT_EQ(rc.set_recompute(true), 3);
    for (nn::Gpt* m : {&plain, &rc}) {
      m->init_parameters(5);
      if (!dev.is_host()) m->to(dev);
      m->train();
    }
    auto opt_plain = optim::make_optimizer("adamw", plain.parameters(), adamw());
    auto opt_rc = optim::make_optimizer("adamw", rc.parameters(), adamw());
    const std::vector<nn::Parameter*> pp = plain.parameters(), pr = rc.parameters();
    for (int step = 0; step < 3; ++step) {
      const Stream s = runtime_for(dev.is_host() ? Device{} : dev).current_stream(dev.index);
      const Tensor tokens = dev.is_host() ? tokens_of({3, 16}, 61, 10 + step)
                                          : tokens_of({3, 16}, 61, 10 + step).to(dev, s);
      const Tensor targets = dev.is_host() ? tokens_of({3, 16}, 61, 20 + step)
                                           : tokens_of({3, 16}, 61, 20 + step).to(dev, s);
      Tensor metrics[2];
      int k = 0;
      for (auto [m, opt] : {std::pair{&plain, opt_plain.get()}, std::pair{&rc, opt_rc.get()}}) {
        metrics[k] = Tensor::empty({4}, DType::f32, dev);
        ops::zero_(metrics[k]);
        opt->zero_grad();
        m->forward_loss(tokens, targets, metrics[k]);
        m->backward_loss();
        ++k;
      }
      sync(dev);
      EXPECT_TRUE(same_bits(metrics[0], metrics[1])) << dev.str() << " step " << step;
      for (size_t i = 0; i < pp.size(); ++i)
        EXPECT_TRUE(same_bits(pp[i]->grad, pr[i]->grad))
            << dev.str() << " step " << step << " " << pp[i]->name;
      opt_plain->step();
      opt_rc->step();
      sync(dev);
    }
    for (size_t i = 0; i < pp.size(); ++i)
      EXPECT_TRUE(same_bits(pp[i]->value, pr[i]->value)) << dev.str() << " " << pp[i]->name;
  }
}

// An evaluation forward after training gives the same loss either way, and a backward after
// it is refused as without a forward.
TEST(Recompute, EvaluationForwardMatchesAndKeepsNothing) {
  nn::Gpt plain(small()), rc(small());
  rc.set_recompute(true);
  const Tensor tokens = tokens_of({2, 16}, 61, 1), targets = tokens_of({2, 16}, 61, 2);
  Tensor m0 = Tensor::zeros({4}), m1 = Tensor::zeros({4});
  plain.eval();
  rc.eval();
  plain.forward_loss(tokens, targets, m0);
  rc.forward_loss(tokens, targets, m1);
  EXPECT_TRUE(same_bits(m0, m1));
  EXPECT_THROW(rc.h[1]->backward(Tensor::zeros({2, 16, 32})), Error);
}

// Host bytes the step's fixed tensors hold: parameters, gradients, optimizer state, the batch.
int64_t static_bytes(nn::Module& m, const optim::Optimizer& opt, const std::vector<Tensor>& batch) {
  int64_t b = 0;
  for (nn::Parameter* p : m.parameters())
    b += static_cast<int64_t>(p->value.nbytes() + p->grad.nbytes());
  for (const nn::NamedTensor& t : opt.state()) b += static_cast<int64_t>(t.tensor.nbytes());
  for (const Tensor& t : batch) b += static_cast<int64_t>(t.nbytes());
  return b;
}

struct StepBytes {
  int64_t kept = 0;      // activation bytes allocated between forward and backward
  int64_t peak = 0;      // the step's peak of activation bytes
  int64_t boundary = 0;  // activation bytes allocated after the step
};

// Four steps of gpt-mini (vocab 512, T 128) at batch 8 on the cpu; the figures of steps 2..4.
std::vector<StepBytes> measure_gpt_mini(bool recompute, train::MemoryPlan& plan) {
  nn::GptConfig c = nn::gpt_config("gpt-mini", 512);
  c.block_size = 128;
  nn::Gpt m(c);
  m.set_recompute(recompute);
  m.train();
  auto opt = optim::make_optimizer("adamw", m.parameters(), adamw());
  train::PlanInputs in;
  in.batch_size = 8;
  in.input_sample = {128};
  in.fused_loss = true;
  in.train_samples = in.test_samples = 0;  // batches are not the model's
  in.recompute = recompute;
  plan = train::plan_memory(m, in);
  const Tensor tokens = tokens_of({8, 128}, 512, 1), targets = tokens_of({8, 128}, 512, 2);
  const Tensor metrics = Tensor::zeros({4});
  std::vector<StepBytes> out;
  for (int step = 0; step < 4; ++step) {
    const int64_t fixed = static_bytes(m, *opt, {tokens, targets, metrics});
    const auto allocated = [] {
      return static_cast<int64_t>(host_allocator().stats().allocated_bytes);
    };
    reset_host_peak_stats();
    opt->zero_grad();
    m.forward_loss(tokens, targets, metrics);
    StepBytes b;
    b.kept = allocated() - fixed;
    m.backward_loss();
    b.peak = static_cast<int64_t>(host_allocator().stats().peak_allocated_bytes) - fixed;
    opt->step();
    b.boundary = allocated() - static_bytes(m, *opt, {tokens, targets, metrics});
    if (step > 0) out.push_back(b);
  }
  return out;
}

TEST(Recompute, ShrinksActivationsAsPlannedGptMini) {
  train::MemoryPlan plain_plan, rc_plan;
  const std::vector<StepBytes> plain = measure_gpt_mini(false, plain_plan);
  const std::vector<StepBytes> rc = measure_gpt_mini(true, rc_plan);
  const auto mib = [](int64_t b) { return static_cast<double>(b) / (1 << 20); };
  std::printf(
      "gpt-mini batch 8 T 128 f32 on cpu: activations kept forward->backward %.2f MiB without "
      "recompute, "
      "%.2f MiB with (plan %.2f / %.2f); step peak %.2f MiB / %.2f MiB (plan %.2f / %.2f)\n",
      mib(plain[0].kept), mib(rc[0].kept), mib(plain_plan.activations_kept),
      mib(rc_plan.activations_kept), mib(plain[0].peak), mib(rc[0].peak),
      mib(plain_plan.activations_step), mib(rc_plan.activations_step));
  EXPECT_EQ(rc_plan.recompute_blocks, 6);
  EXPECT_LT(2 * rc[0].kept, plain[0].kept);
  EXPECT_LT(rc[0].peak, plain[0].peak);
  const auto near = [](int64_t measured, int64_t planned) {
    return planned >= measured &&
           static_cast<double>(planned - measured) <= 0.01 * static_cast<double>(measured);
  };
  for (const auto& [runs, plan] : {std::pair{&plain, &plain_plan}, std::pair{&rc, &rc_plan}}) {
    const StepBytes& first = runs->front();
    EXPECT_TRUE(near(first.kept, plan->activations_kept))
        << first.kept << " vs plan " << plan->activations_kept;
    EXPECT_TRUE(near(first.peak, plan->activations_step))
        << first.peak << " vs plan " << plan->activations_step;
    for (const StepBytes& b : *runs) {  // steady state: steps 2..4 alike
      EXPECT_EQ(b.boundary, first.boundary);
      EXPECT_EQ(b.peak, first.peak);
      EXPECT_EQ(b.kept, first.kept);
    }
  }
}

}  // namespace
}  // namespace tandem
