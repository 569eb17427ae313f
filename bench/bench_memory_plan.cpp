// The memory plan against what a training step allocates on virt (its caching allocator counts
// every byte handed out): a model trained by hand for `steps` steps, the host waiting after
// each, then the steady state's bytes per category beside the plan's.
// Usage: bench_memory_plan [model=gpt-mini] [batch=8] [steps=3] [recompute=0] [threads=2]
// gpt models take T = the model's block size over a 50257-token vocabulary (AdamW); image models
// 3x224x224 inputs and 1000 classes (resnet18-cifar: 3x32x32, 10), SGD with momentum.
// Prints one line per category:
//   <category> planned_MiB <p> allocated_MiB <a> diff_percent <d>
// and the step's peak (activations at their peak, above the parameters, gradients and state).
#include <cstdio>
#include <cstdlib>
#include <string>

#include "tandem/nn/cross_entropy_loss.h"
#include "tandem/nn/gpt.h"
#include "tandem/nn/models.h"
#include "tandem/ops.h"
#include "tandem/optim/optimizer.h"
#include "tandem/rng.h"
#include "tandem/stream.h"
#include "tandem/train/memory_plan.h"
#include "tandem/virt.h"

namespace {

using namespace tandem;

constexpr Device kVirt{DeviceKind::virt, 0};

int64_t allocated() {
  return static_cast<int64_t>(virt_allocator(0).stats().allocated_bytes);
}

void line(const char* what, int64_t planned, int64_t got) {
  std::printf("%-16s planned_MiB %9.2f allocated_MiB %9.2f diff_percent %+.2f\n", what,
              static_cast<double>(planned) / (1 << 20), static_cast<double>(got) / (1 << 20),
              got ? 100.0 * static_cast<double>(planned - got) / static_cast<double>(got) : 0.0);
}

}  // namespace

int main(int argc, char** argv) {
  const std::string name = argc > 1 ? argv[1] : "gpt-mini";
  const int64_t batch = argc > 2 ? std::atoll(argv[2]) : 8;
  const int steps = argc > 3 ? std::atoi(argv[3]) : 3;
  const bool recompute = argc > 4 && std::atoi(argv[4]) != 0;
  ops::set_num_threads(argc > 5 ? std::atoi(argv[5]) : 2);
  const bool gpt = nn::is_sequence_model(name);
  const bool cifar = name == "resnet18-cifar";
  const int64_t t = gpt ? nn::sequence_block_size(name) : 0;
  const nn::ModelSpec spec =
      gpt ? nn::ModelSpec{0, 0, 0, 50257, false, t}
          : nn::ModelSpec{3, cifar ? 32 : 224, cifar ? 32 : 224, cifar ? 10 : 1000};
  nn::ModulePtr m = nn::make_model(name, spec, 0);
  m->train();
  train::PlanInputs in;
  in.device = kVirt;
  in.batch_size = batch;
  in.input_sample = gpt ? Shape{t} : Shape{3, spec.height, spec.width};
  in.fused_loss = gpt;
  in.num_classes = gpt ? 0 : spec.num_classes;
  in.optimizer = gpt ? "adamw" : "sgd";
  in.recompute = recompute;
  const train::MemoryPlan plan = train::plan_memory(*m, in);

  const Stream s = virt_current_stream(0);
  Philox rng(1, 2);
  Tensor input, target;
  if (gpt) {
    input = Tensor::empty({batch, t}, DType::i64);
    target = Tensor::empty({batch, t}, DType::i64);
    for (int64_t i = 0; i < input.numel(); ++i) input.data<int64_t>()[i] = rng.randint(50257);
    for (int64_t i = 0; i < target.numel(); ++i) target.data<int64_t>()[i] = rng.randint(50257);
  } else {
    input = Tensor::empty({batch, 3, spec.height, spec.width});
    for (int64_t i = 0; i < input.numel(); ++i)
      input.data<float>()[i] = 2.0f * rng.uniform() - 1.0f;
    target = Tensor::empty({batch}, DType::i64);
    for (int64_t i = 0; i < batch; ++i)
      target.data<int64_t>()[i] = rng.randint(static_cast<uint32_t>(spec.num_classes));
  }
  input = input.to(kVirt, s);
  target = target.to(kVirt, s);
  const Tensor metrics = Tensor::empty({4}, DType::f32, kVirt);
  nn::CrossEntropyLoss loss;
  s.synchronize();

  const int64_t before = allocated();
  m->to(kVirt);
  const int64_t weights = allocated() - before;
  optim::OptimizerOptions oo;
  oo.momentum = 0.9;
  auto opt = optim::make_optimizer(in.optimizer, m->parameters(), oo);
  int64_t peak = 0;
  for (int step = 0; step < steps; ++step) {
    ops::zero_(metrics);
    s.synchronize();
    virt_allocator(0).reset_peak_stats();
    opt->zero_grad();
    if (gpt) {
      m->loss_forward(input, target, metrics);
      m->loss_backward();
    } else {
      loss.forward_accumulate(m->forward(input), target, metrics);
      m->backward(loss.backward());
    }
    opt->step();
    s.synchronize();
    peak = static_cast<int64_t>(virt_allocator(0).stats().peak_allocated_bytes);
  }
  int64_t state = 0;
  for (const nn::NamedTensor& nt : opt->state())
    if (!nt.tensor.device().is_host())
      state += nn::BufferPlan::rounded(static_cast<int64_t>(nt.tensor.nbytes()));
  const int64_t workspace =
      gpt ? 0 : plan.on_device.workspace - nn::BufferPlan::rounded(16);  // the loss's buffers
  const int64_t activations = allocated() - before - weights - state - workspace;
  std::printf("%s batch %lld%s on virt (%d steps, host waits after each)\n", name.c_str(),
              static_cast<long long>(batch), recompute ? " --recompute blocks" : "", steps);
  line("params+grads", plan.on_device.parameters + plan.on_device.gradients, weights);
  line("optimizer state", plan.on_device.optimizer_state, state);
  line("activations kept", plan.activations_kept, activations);
  line("step peak", plan.activations_step, peak - before - weights - state - workspace);
  return 0;
}
