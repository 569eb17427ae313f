// The memory plan (tandem/train/memory_plan.h) against what a run allocates.
//  - On virt, whose caching allocator counts every byte handed out in 512-byte blocks: a GPT
//    (AdamW) and resnet18-cifar (SGD with momentum, the cross-entropy loss) trained by hand for
//    three steps, the host waiting after each (virt's queued work keeps the storages it uses
//    alive, so a host running ahead would hold more); parameters + gradients and optimizer
//    state as allocated in the steady state are the plan's within 5%, activations within 10%
//    (the pool's block reuse, below).
//  - The shape-only model (nn::make_model_shapes) has the real model's names and shapes and
//    no memory; gpt2-xl is planned without allocating its 6 GiB.
//  - Refusals: one line naming the numbers, the limit's source and a knob.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "memory/memory_test_util.h"
#include "tandem/allocator.h"
#include "tandem/nn/cross_entropy_loss.h"
#include "tandem/nn/gpt.h"
#include "tandem/nn/models.h"
#include "tandem/train/memory_plan.h"
#include "tandem/virt.h"

namespace tandem {
namespace {

using memory_test::images_of;
using memory_test::sync;
using memory_test::tokens_of;

constexpr Device kVirt{DeviceKind::virt, 0};

// The pool counts a request above 1 MiB as its whole block when less than 1 MiB would be left
// over, and which free block a request reuses depends on the order of earlier frees; the plan
// counts each request on a fresh segment (nn::BufferPlan::rounded). Tolerances, measured here:
// parameters + gradients and state within 5% (2.4% for the GPT), activations within 10% (6% for
// the GPT, 1.1% for resnet18-cifar).
constexpr double kWeights = 0.05, kActivations = 0.10;

int64_t allocated() {
  return static_cast<int64_t>(virt_allocator(0).stats().allocated_bytes);
}

int64_t state_bytes(const optim::Optimizer& opt) {
  int64_t b = 0;
  for (const nn::NamedTensor& t : opt.state())
    if (!t.tensor.device().is_host())
      b += nn::BufferPlan::rounded(static_cast<int64_t>(t.tensor.nbytes()));
  return b;
}

// |planned - measured| <= tolerance x measured.
bool near(int64_t measured, int64_t planned, double tolerance) {
  const double d = static_cast<double>(planned - measured);
  return (d < 0 ? -d : d) <= tolerance * static_cast<double>(measured);
}

struct Measured {
  int64_t weights = 0;  // parameters and gradients
  int64_t state = 0;    // optimizer state
  int64_t activations = 0;
};

// `step` runs one training step's forward and backward on virt (its batch and metrics
// allocated before: not counted).
template <typename Step>
Measured measure(nn::Module& m, optim::Optimizer& opt, Step step) {
  Measured out;
  const int64_t before_model = allocated();
  m.to(kVirt);
  out.weights = allocated() - before_model;
  for (int s = 0; s < 3; ++s) {
    opt.zero_grad();
    step();
    opt.step();
    sync(kVirt);
  }
  out.state = state_bytes(opt);
  out.activations = allocated() - before_model - out.weights - out.state;
  return out;
}

TEST(MemoryPlan, GptOnVirtMatchesAllocations) {
  nn::GptConfig c = nn::gpt_config("gpt-mini", 256);
  c.n_layer = 3;
  c.block_size = 64;
  nn::Gpt m(c);
  m.train();
  train::PlanInputs in;
  in.device = kVirt;
  in.batch_size = 4;
  in.input_sample = {64};
  in.fused_loss = true;
  in.train_samples = in.test_samples = 0;
  const train::MemoryPlan plan = train::plan_memory(m, in);
  const Stream s = virt_current_stream(0);
  const Tensor tokens = tokens_of({4, 64}, 256, 1).to(kVirt, s),
               targets = tokens_of({4, 64}, 256, 2).to(kVirt, s);
  const Tensor metrics = Tensor::empty({4}, DType::f32, kVirt);
  ops::zero_(metrics);
  auto opt = optim::make_optimizer("adamw", m.parameters(), {});
  const Measured got = measure(m, *opt, [&] {
    m.forward_loss(tokens, targets, metrics);
    m.backward_loss();
  });
  // The batch and the metrics were allocated before the model: not in the deltas.
  EXPECT_TRUE(near(got.weights, plan.on_device.parameters + plan.on_device.gradients, kWeights))
      << got.weights << " vs plan " << plan.on_device.parameters + plan.on_device.gradients;
  EXPECT_TRUE(near(got.state, plan.on_device.optimizer_state, kWeights))
      << got.state << " vs plan " << plan.on_device.optimizer_state;
  EXPECT_TRUE(near(got.activations, plan.activations_step, kActivations))
      << "measured " << got.activations << " planned " << plan.activations_step;
  EXPECT_EQ(plan.activations_step, plan.on_device.activations);
}

TEST(MemoryPlan, Resnet18OnVirtMatchesAllocations) {
  nn::ModelSpec spec{3, 32, 32, 10};
  nn::ModulePtr m = nn::make_model("resnet18-cifar", spec, 0);
  m->train();
  train::PlanInputs in;
  in.device = kVirt;
  in.batch_size = 4;
  in.input_sample = {3, 32, 32};
  in.num_classes = 10;
  in.optimizer = "sgd";
  in.momentum = 0.9;
  in.train_samples = in.test_samples = 0;
  const train::MemoryPlan plan = train::plan_memory(*m, in);
  const Stream s = virt_current_stream(0);
  const Tensor images = images_of({4, 3, 32, 32}, 1).to(kVirt, s);
  Tensor labels = Tensor::empty({4}, DType::i64);
  for (int64_t i = 0; i < 4; ++i) labels.data<int64_t>()[i] = (3 * i) % 10;
  labels = labels.to(kVirt, s);
  const Tensor metrics = Tensor::empty({4}, DType::f32, kVirt);
  ops::zero_(metrics);
  optim::OptimizerOptions oo;
  oo.momentum = 0.9;
  auto opt = optim::make_optimizer("sgd", m->parameters(), oo);
  nn::CrossEntropyLoss loss;
  const Measured got = measure(*m, *opt, [&] {
    loss.forward_accumulate(m->forward(images), labels, metrics);
    m->backward(loss.backward());
  });
  EXPECT_TRUE(near(got.weights, plan.on_device.parameters + plan.on_device.gradients, kWeights))
      << got.weights << " vs plan " << plan.on_device.parameters + plan.on_device.gradients;
  EXPECT_TRUE(near(got.state, plan.on_device.optimizer_state, kWeights))
      << got.state << " vs plan " << plan.on_device.optimizer_state;
  // The loss's probabilities and gradient are the plan's workspace (with the metrics, allocated
  // before the model here).
  const int64_t loss_bytes = 2 * nn::BufferPlan::rounded(4 * 10 * 4);
  EXPECT_EQ(plan.on_device.workspace, loss_bytes + nn::BufferPlan::rounded(16));
  EXPECT_TRUE(near(got.activations - loss_bytes, plan.activations_step, kActivations))
      << "measured " << got.activations - loss_bytes << " planned " << plan.activations_step;
}

TEST(MemoryPlan, ShapeOnlyModelHasTheShapesAndNoMemory) {
  for (const char* name : {"resnet18", "gpt-mini"}) {
    nn::ModelSpec spec{3, 64, 64, 10};
    if (std::string(name) == "gpt-mini") spec = nn::ModelSpec{0, 0, 0, 100, false, 32};
    nn::ModulePtr real = nn::make_model(name, spec, 0), shapes = nn::make_model_shapes(name, spec);
    const std::vector<nn::NamedTensor> a = real->state_dict(), b = shapes->state_dict();
    ASSERT_EQ(a.size(), b.size()) << name;
    for (size_t i = 0; i < a.size(); ++i) {
      EXPECT_EQ(a[i].name, b[i].name);
      EXPECT_EQ(a[i].tensor.shape(), b[i].tensor.shape()) << a[i].name;
      EXPECT_EQ(b[i].tensor.raw_data(), nullptr) << a[i].name;
    }
  }
  const int64_t before = static_cast<int64_t>(host_allocator().stats().allocated_bytes);
  nn::ModulePtr xl = nn::make_model_shapes("gpt2-xl", nn::ModelSpec{0, 0, 0, 50257, false, 1024});
  EXPECT_LT(static_cast<int64_t>(host_allocator().stats().allocated_bytes) - before,
            int64_t{1} << 20);
  train::PlanInputs in;
  in.device = kVirt;
  in.batch_size = 1;
  in.input_sample = {1024};
  in.fused_loss = true;
  const train::MemoryPlan plan = train::plan_memory(*xl, in);
  EXPECT_EQ(plan.num_parameters, 1557611200);  // GPT-2 XL with the tied head
  EXPECT_GE(plan.on_device.parameters, 4 * plan.num_parameters);
  EXPECT_EQ(plan.on_device.optimizer_state, 2 * plan.on_device.gradients);
}

train::MemoryPlan gpt2_plan(train::PlanInputs& in) {
  nn::ModulePtr m = nn::make_model_shapes("gpt2", nn::ModelSpec{0, 0, 0, 50257, false, 1024});
  in.batch_size = 8;
  in.input_sample = {1024};
  in.fused_loss = true;
  in.train_samples = 1000;
  in.test_samples = 100;
  in.field_bytes = {4 * 1024, 8 * 1024};
  train::MemoryPlan p = train::plan_memory(*m, in);
  train::apply_limits(p, in);
  return p;
}

std::string refusal(const train::MemoryPlan& p) {
  try {
    train::check_memory_plan(p);
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::out_of_memory);
    return e.what();
  }
  return "";
}

TEST(MemoryPlan, RefusesWithTheNumbersAndAKnob) {
  train::PlanInputs in;
  in.device = Device{DeviceKind::virt, 0};
  in.device_memory_budget = int64_t{4} << 30;
  const train::MemoryPlan p = gpt2_plan(in);
  const std::string what = refusal(p);
  EXPECT_NE(what.find("[train] needs "), std::string::npos) << what;
  EXPECT_NE(
      what.find(" GiB of device memory, 4.0 GiB available (--device-memory-budget); try a smaller "
                "--batch-size or --recompute blocks or --optimizer-device cpu"),
      std::string::npos)
      << what;
  EXPECT_EQ(what.find('\n'), std::string::npos);
  // With recompute the same budget fits the activations (the rest of the plan is unchanged).
  in.recompute = true;
  const train::MemoryPlan r = gpt2_plan(in);
  EXPECT_EQ(r.recompute_blocks, 12);
  EXPECT_LT(r.activations_step * 3, p.activations_step);
  EXPECT_EQ(r.on_device.parameters, p.on_device.parameters);
}

TEST(MemoryPlan, RefusesOverTheVirtCapAndThePinnedCap) {
  configure_virt(DeviceSpec::parse("virt:3?memory_mb=256"));
  train::PlanInputs in;
  in.device = Device{DeviceKind::virt, 3};
  const std::string what = refusal(gpt2_plan(in));
  EXPECT_NE(what.find("of device memory, 256.0 MiB available (memory_mb of virt:3)"),
            std::string::npos)
      << what;
  train::PlanInputs off;
  off.device = Device{DeviceKind::virt, 0};
  off.optimizer_offloaded = true;
  off.max_pinned_bytes = int64_t{1} << 30;
  const train::MemoryPlan p = gpt2_plan(off);
  EXPECT_GT(p.on_host.optimizer_state, 0);
  EXPECT_EQ(p.on_device.optimizer_state, 0);
  const std::string pinned = refusal(p);
  EXPECT_NE(pinned.find("GiB of pinned host memory, 1.0 GiB allowed (--max-pinned-gb); try a "
                        "smaller --batch-size, "
                        "--num-workers or --prefetch-factor, or --optimizer-device device"),
            std::string::npos)
      << pinned;
}

// A virt device that computes keeps its memory in host RAM: without memory_mb its bytes count
// against MemAvailable, and the refusal names them; with compute=none its pages are never
// touched (planning), so they do not.
TEST(MemoryPlan, VirtMemoryCountsAgainstTheHostWhenItComputes) {
  train::PlanInputs in;
  in.device = Device{DeviceKind::virt, 0};
  train::MemoryPlan p = gpt2_plan(in);
  ASSERT_TRUE(p.device_in_host_ram);
  p.host_available = p.on_device.total() / 2;  // well below the device's figure alone
  const std::string what = refusal(p);
  EXPECT_NE(what.find(" of host memory ("), std::string::npos) << what;
  EXPECT_NE(what.find(" of it virt:0's), "), std::string::npos) << what;
  EXPECT_NE(what.find("available (MemAvailable); try a smaller --batch-size or --recompute blocks"), std::string::npos)
      << what;
  configure_virt(DeviceSpec::parse("virt:6?compute=none"));
  train::PlanInputs planning;
  planning.device = Device{DeviceKind::virt, 6};
  train::MemoryPlan q = gpt2_plan(planning);
  EXPECT_FALSE(q.device_in_host_ram);
  q.host_available = p.host_available;
  EXPECT_EQ(refusal(q), "");
}

TEST(MemoryPlan, ParsesByteSizes) {
  EXPECT_EQ(train::parse_byte_size("1024", "--x"), 1024);
  EXPECT_EQ(train::parse_byte_size("8GiB", "--x"), int64_t{8} << 30);
  // Decimal only: std::stod would read 0x10GiB as 16 GiB, and inf or nan.
  for (const char* bad : {"0x10GiB", "0X1", "inf", "nan", "-1GiB", " 8GiB"})
    EXPECT_THROW(train::parse_byte_size(bad, "--x"), Error) << bad;
  EXPECT_EQ(train::parse_byte_size("1.5 MiB", "--x"), 3 << 19);
  EXPECT_EQ(train::parse_byte_size("2GB", "--x"), 2000000000);
  for (const char* bad : {"", "GiB", "-1GiB", "3 parsecs", "0"}) {
    try {
      train::parse_byte_size(bad, "--device-memory-budget");
      ADD_FAILURE() << bad;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("--device-memory-budget"), std::string::npos)
          << e.what();
    }
  }
}

}  // namespace
}  // namespace tandem
