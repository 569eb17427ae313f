// --activations-device cpu (train/place/activation_offload.h with Module::set_activation_offload):
// with --recompute blocks on virt, the kept block inputs wait in host memory between forward
// and backward and come back one block ahead of their backward.
//  - Bit-identical: three AdamW steps of a 6-layer GPT give the loss sums, every gradient and
//    every weight of the same model keeping them on the device.
//  - Memory, measured with virt's caching allocator after each forward (the host waits for
//    the device and for the offloader's copies first, so no queued work holds a storage): the device holds exactly
//    L - 1 = 5 fewer block outputs of [4, 32, 64] f32 (each 32 KiB, a multiple of 512 bytes),
//    and every input went to the host and came back (bytes counted by the offloader).
#include <gtest/gtest.h>

#include <vector>

#include "memory/memory_test_util.h"
#include "tandem/nn/gpt.h"
#include "tandem/virt.h"
#include "train/place/activation_offload.h"

namespace tandem {
namespace {

using memory_test::same_bits;
using memory_test::sync;
using memory_test::tokens_of;

constexpr Device kVirt{DeviceKind::virt, 0};

struct OffloadRun {
  std::vector<float> losses;
  std::vector<int64_t> held;  // device bytes allocated after each step's forward
  std::vector<Tensor> grads, values;
  int64_t to_host = 0, to_device = 0;
};

OffloadRun run(bool offload) {
  nn::Gpt m(nn::GptConfig{61, 32, 6, 2, 64, 1e-5f});
  m.set_recompute(true);
  m.init_parameters(3);
  m.to(kVirt);
  m.train();
  std::shared_ptr<train::ActivationOffloader> off;
  if (offload) {
    off = std::make_shared<train::ActivationOffloader>(kVirt);
    m.set_activation_offload([off](const Tensor& x) { return off->to_host(x); },
                             [off](const Tensor& x) { return off->to_device(x); });
  }
  optim::OptimizerOptions o;
  o.lr = 1e-2;
  auto opt = optim::make_optimizer("adamw", m.parameters(), o);
  const Stream s = virt_current_stream(0);
  const Tensor metrics = Tensor::empty({4}, DType::f32, kVirt);
  OffloadRun r;
  for (int step = 0; step < 3; ++step) {
    const Tensor tokens = tokens_of({4, 32}, 61, 10 + step).to(kVirt, s);
    const Tensor targets = tokens_of({4, 32}, 61, 20 + step).to(kVirt, s);
    ops::zero_(metrics);
    opt->zero_grad();
    m.forward_loss(tokens, targets, metrics);
    sync(kVirt);
    if (off) off->synchronize();  // a copy still queued keeps its device source alive
    r.held.push_back(static_cast<int64_t>(virt_allocator(0).stats().allocated_bytes));
    m.backward_loss();
    opt->step();
    const Tensor h = memory_test::host_copy(metrics);
    r.losses.push_back(h.data<float>()[0]);
  }
  for (nn::Parameter* p : m.parameters()) {
    r.grads.push_back(memory_test::host_copy(p->grad));
    r.values.push_back(memory_test::host_copy(p->value));
  }
  if (off) r.to_host = off->bytes_to_host(), r.to_device = off->bytes_to_device();
  return r;
}

TEST(ActivationOffload, BitIdenticalWithFewerDeviceBytes) {
  const OffloadRun kept = run(false), moved = run(true);
  EXPECT_EQ(kept.losses, moved.losses);
  ASSERT_EQ(kept.grads.size(), moved.grads.size());
  for (size_t i = 0; i < kept.grads.size(); ++i) {
    EXPECT_TRUE(same_bits(kept.grads[i], moved.grads[i])) << "gradient " << i;
    EXPECT_TRUE(same_bits(kept.values[i], moved.values[i])) << "weight " << i;
  }
  constexpr int64_t kOutput = 4 * 32 * 64 * 4;  // one block's [B, T, C] f32
  for (size_t step = 0; step < 3; ++step)
    EXPECT_EQ(kept.held[step] - moved.held[step], 5 * kOutput) << "step " << step;
  EXPECT_EQ(moved.to_host, 3 * 6 * kOutput);  // every block's input, every step
  EXPECT_EQ(moved.to_device, moved.to_host);
}

TEST(ActivationOffload, RefusedWithoutRecomputeOrOnTheCpu) {
  nn::Gpt m(nn::GptConfig{61, 32, 2, 2, 64, 1e-5f});
  const auto same = [](const Tensor& x) { return x; };
  EXPECT_THROW(m.set_activation_offload(same, same), Error);  // no recompute
  m.set_recompute(true);
  EXPECT_THROW(m.set_activation_offload(same, nullptr), Error);
  EXPECT_THROW(train::ActivationOffloader(Device{}), Error);
}

}  // namespace
}  // namespace tandem
