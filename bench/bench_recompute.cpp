// Activation recompute (--recompute blocks) on a GPT on the cpu: activation bytes and step time
// with and without it, beside the memory plan.
// Usage: bench_recompute [model=gpt-mini] [batch=8] [T=256] [steps=3] [threads=2]
// Prints, for recompute off and on:
//   recompute <off|on> kept_MiB <k> peak_MiB <p> plan_kept_MiB <pk> plan_peak_MiB <pp> step_s <t>
// kept: activation bytes allocated between forward_loss and backward_loss; peak: the step's
// peak; both from the host allocator's exact byte counts minus the parameters, gradients,
// AdamW state and batch, in the last step. step_s: the median step's wall time (forward,
// backward and AdamW; recompute adds one forward of the blocks).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "tandem/allocator.h"
#include "tandem/host_allocator_stats.h"
#include "tandem/nn/gpt.h"
#include "tandem/ops.h"
#include "tandem/optim/optimizer.h"
#include "tandem/rng.h"
#include "tandem/train/memory_plan.h"

namespace {

using namespace tandem;

Tensor tokens_of(const Shape& s, int64_t vocab, uint64_t seed) {
  Tensor t = Tensor::empty(s, DType::i64);
  Philox rng(seed, 9);
  for (int64_t i = 0; i < t.numel(); ++i)
    t.data<int64_t>()[i] = rng.randint(static_cast<uint32_t>(vocab));
  return t;
}

int64_t fixed_bytes(nn::Module& m, const optim::Optimizer& opt, const std::vector<Tensor>& batch) {
  int64_t b = 0;
  for (nn::Parameter* p : m.parameters())
    b += static_cast<int64_t>(p->value.nbytes() + p->grad.nbytes());
  for (const nn::NamedTensor& t : opt.state()) b += static_cast<int64_t>(t.tensor.nbytes());
  for (const Tensor& t : batch) b += static_cast<int64_t>(t.nbytes());
  return b;
}

double mib(int64_t b) {
  return static_cast<double>(b) / (1 << 20);
}

}  // namespace

int main(int argc, char** argv) {
  const std::string model = argc > 1 ? argv[1] : "gpt-mini";
  const int64_t batch = argc > 2 ? std::atoll(argv[2]) : 8;
  const int64_t t = argc > 3 ? std::atoll(argv[3]) : 256;
  const int steps = argc > 4 ? std::atoi(argv[4]) : 3;
  ops::set_num_threads(argc > 5 ? std::atoi(argv[5]) : 2);
  for (const bool recompute : {false, true}) {
    nn::GptConfig c = nn::gpt_config(model, 50257);
    c.block_size = std::max(c.block_size, t);
    nn::Gpt m(c);
    m.set_recompute(recompute);
    m.train();
    auto opt = optim::make_optimizer("adamw", m.parameters(), {});
    train::PlanInputs in;
    in.batch_size = batch;
    in.input_sample = {t};
    in.fused_loss = true;
    in.recompute = recompute;
    const train::MemoryPlan plan = train::plan_memory(m, in);
    const Tensor tokens = tokens_of({batch, t}, 50257, 1),
                 targets = tokens_of({batch, t}, 50257, 2);
    const Tensor metrics = Tensor::zeros({4});
    int64_t kept = 0, peak = 0;
    std::vector<double> secs;
    for (int s = 0; s < steps; ++s) {
      const int64_t fixed = fixed_bytes(m, *opt, {tokens, targets, metrics});
      reset_host_peak_stats();
      const auto t0 = std::chrono::steady_clock::now();
      opt->zero_grad();
      m.forward_loss(tokens, targets, metrics);
      kept = static_cast<int64_t>(host_allocator().stats().allocated_bytes) - fixed;
      m.backward_loss();
      peak = static_cast<int64_t>(host_allocator().stats().peak_allocated_bytes) - fixed;
      opt->step();
      secs.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
    std::sort(secs.begin(), secs.end());
    std::printf(
        "recompute %s kept_MiB %.2f peak_MiB %.2f plan_kept_MiB %.2f plan_peak_MiB %.2f step_s "
        "%.3f\n",
        recompute ? "on" : "off", mib(kept), mib(peak), mib(plan.activations_kept),
        mib(plan.activations_step), secs[secs.size() / 2]);
  }
  return 0;
}
