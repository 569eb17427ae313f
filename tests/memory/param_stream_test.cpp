// --param-device cpu (train/place/param_stream.h with Gpt::set_param_stream): a GPT's
// parameters, gradients and AdamW state stay on the host, the blocks are streamed through three
// device slots, and the weights are those of the same model trained with everything on virt.
//  - Bit-identical: three AdamW steps of a 6-layer GPT (f32; with --recompute blocks and the
//    kept inputs on the host; bf16) give the same loss sums, gradients and weights as the
//    resident model, and an evaluation between steps changes nothing.
//  - Traffic, counted by the streamer: each step uploads the outer part once and 2 L - 3 blocks
//    (the last three of the forward are still in their slots when the backward needs them) and
//    downloads every gradient once.
//  - Memory: the device holds the outer part and three slots, nothing that grows with L.
//  - Prefetch depth: deeper rings give the same bits with fewer fetches.
//  - Optimizer split: parts kept and updated on the device give the same bits.
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "memory/memory_test_util.h"
#include "tandem/nn/gpt.h"
#include "tandem/virt.h"
#include "train/place/activation_offload.h"
#include "train/place/param_stream.h"

namespace tandem {
namespace {

using memory_test::same_bits;
using memory_test::sync;
using memory_test::tokens_of;

constexpr Device kVirt{DeviceKind::virt, 0};
constexpr int64_t kLayers = 6;
constexpr int64_t kFetches = 3 * (2 * kLayers - 3) + kLayers;
// One block: ln_1 (2 x 64), c_attn (64 x 192 + 192), c_proj (64 x 64 + 64), ln_2 (2 x 64),
// c_fc (64 x 256 + 256), mlp c_proj (256 x 64 + 64); the outer part: wte, wpe, ln_f.
constexpr int64_t kWeights = 64 * 192 + 64 * 64 + 64 * 256 + 256 * 64;  // the Conv1D weights
constexpr int64_t kBlock = kWeights + 2 * 64 + 192 + 64 + 2 * 64 + 256 + 64;
constexpr int64_t kEmbeddings = 61 * 64 + 32 * 64;
constexpr int64_t kOuter = kEmbeddings + 2 * 64;

struct Mode {
  bool recompute = false, offload_activations = false;
  bool host_update = false;  // each part updated on the streamer's thread during backward
  DType dtype = DType::f32;
  int depth = 1;  // --param-prefetch: depth + 2 slots
  int device_parts = 0;  // --optimizer-split: the outer part, then blocks 0, 1, ... on the device
  bool transient = false;  // with host_update: the blocks' gradients in the streamer's slabs
};

struct StreamRun {
  std::vector<float> losses, eval_losses;
  std::vector<Tensor> grads, values;
  int64_t up = 0, down = 0, fetches = 0, outer = 0, slot = 0;
  int64_t steps = 0;  // the optimizer's step_count() at the end
  int64_t device_after_build = 0;  // virt bytes allocated once the model (or the streamer) is there
  train::ParamStreamer::HostBytes host;  // the streamer's pinned homes at the end
};

StreamRun run(bool streamed, const Mode& mode) {
  nn::Gpt m(nn::GptConfig{61, 32, kLayers, 2, 64, 1e-5f});
  m.set_recompute(mode.recompute);
  m.init_parameters(3);
  if (mode.dtype != DType::f32) m.set_compute_dtype(mode.dtype);
  sync(kVirt);
  const int64_t before = static_cast<int64_t>(virt_allocator(0).stats().allocated_bytes);
  std::unique_ptr<train::ParamStreamer> stream;
  if (streamed) {
    stream = std::make_unique<train::ParamStreamer>(m, kVirt, mode.depth, mode.device_parts);
  } else {
    m.to(kVirt);
  }
  StreamRun r;
  r.device_after_build = static_cast<int64_t>(virt_allocator(0).stats().allocated_bytes) - before;
  std::shared_ptr<train::ActivationOffloader> off;
  if (mode.offload_activations) {
    off = std::make_shared<train::ActivationOffloader>(kVirt);
    m.set_activation_offload([off](const Tensor& x) { return off->to_host(x); },
                             [off](const Tensor& x) { return off->to_device(x); });
  }
  optim::OptimizerOptions o;
  o.lr = 1e-2;
  auto opt = optim::make_optimizer("adamw", m.parameters(), o);
  if (stream && mode.host_update) stream->set_host_update(opt.get(), 0, 0, mode.transient);
  const Stream s = virt_current_stream(0);
  const Tensor metrics = Tensor::empty({4}, DType::f32, kVirt);
  for (int step = 0; step < 3; ++step) {
    const Tensor tokens = tokens_of({4, 32}, 61, 10 + step).to(kVirt, s);
    const Tensor targets = tokens_of({4, 32}, 61, 20 + step).to(kVirt, s);
    m.train();
    ops::zero_(metrics);
    opt->zero_grad();
    m.forward_loss(tokens, targets, metrics);
    m.backward_loss();
    if (stream && mode.host_update) {
      stream->finish_updates();
    } else {
      opt->step();
    }
    r.losses.push_back(memory_test::host_copy(metrics).data<float>()[0]);
    if (step == 1) {  // an evaluation between steps
      m.eval();
      ops::zero_(metrics);
      m.forward_loss(tokens, targets, metrics);
      r.eval_losses.push_back(memory_test::host_copy(metrics).data<float>()[0]);
    }
  }
  sync(kVirt);
  r.steps = opt->step_count();
  for (nn::Parameter* p : m.parameters()) {
    r.grads.push_back(memory_test::host_copy(p->grad));
    r.values.push_back(memory_test::host_copy(p->value));
  }
  if (stream) {
    r.up = stream->bytes_to_device();
    r.down = stream->bytes_to_host();
    r.fetches = stream->block_fetches();
    r.outer = stream->outer_device_bytes();
    r.slot = stream->slot_device_bytes();
    r.host = stream->host_bytes();
  }
  return r;
}

void expect_same(const StreamRun& a, const StreamRun& b) {
  EXPECT_EQ(a.steps, 3);
  EXPECT_EQ(b.steps, 3);
  EXPECT_EQ(a.losses, b.losses);
  EXPECT_EQ(a.eval_losses, b.eval_losses);
  ASSERT_EQ(a.values.size(), b.values.size());
  for (size_t i = 0; i < a.values.size(); ++i) {
    EXPECT_TRUE(same_bits(a.grads[i], b.grads[i])) << "gradient " << i;
    EXPECT_TRUE(same_bits(a.values[i], b.values[i])) << "weight " << i;
  }
}

TEST(ParamStream, BitIdenticalToTheResidentModel) {
  const Mode f32;
  const StreamRun resident = run(false, f32), streamed = run(true, f32);
  expect_same(resident, streamed);
  // f32 values up, f32 gradients down.
  // Three steps of 2 L - 3 block uploads, and the evaluation's L (its forward starts afresh).
  EXPECT_EQ(streamed.fetches, kFetches);
  EXPECT_EQ(streamed.up, 4 * (4 * kOuter + kFetches * kBlock));
  EXPECT_EQ(streamed.down, 3 * 4 * (kOuter + kLayers * kBlock));
  // The device holds the outer part and three slots (values and gradients), not the model.
  EXPECT_EQ(streamed.slot, 2 * 4 * kBlock);
  EXPECT_EQ(streamed.outer, 2 * 4 * kOuter);
  EXPECT_LE(streamed.device_after_build, streamed.outer + 3 * streamed.slot + 64 * 512);  // pool rounding
  EXPECT_GE(resident.device_after_build, 2 * 4 * (kOuter + kLayers * kBlock));
}

TEST(ParamStream, BitIdenticalWithRecomputeAndActivationsOnTheHost) {
  Mode m;
  m.recompute = true;
  m.offload_activations = true;
  expect_same(run(false, m), run(true, m));
}

TEST(ParamStream, BitIdenticalInBf16) {
  Mode m;
  m.dtype = DType::bf16;
  const StreamRun resident = run(false, m), streamed = run(true, m);
  expect_same(resident, streamed);
  // The Conv1D and embedding weights go up as their bf16 copies, the rest in f32.
  EXPECT_EQ(streamed.up, 4 * (2 * kEmbeddings + 4 * (kOuter - kEmbeddings)) +
                             kFetches * (2 * kWeights + 4 * (kBlock - kWeights)));
}

// ZeRO-Offload's overlap: each block is updated on the host once its gradients are home, while
// the backward of the blocks before it runs; the step count advances once per step.
TEST(ParamStream, BitIdenticalWithUpdatesDuringBackward) {
  for (const DType dtype : {DType::f32, DType::bf16}) {
    Mode m;
    m.dtype = dtype;
    m.host_update = true;
    const StreamRun resident = run(false, m), streamed = run(true, m);
    expect_same(resident, streamed);
    EXPECT_EQ(streamed.fetches, kFetches);
  }
  Mode rc;
  rc.recompute = rc.offload_activations = rc.host_update = true;
  expect_same(run(false, rc), run(true, rc));
}

// MegaTrain's homes (a training run's): f32 values only (each compute copy rounded into a pinned
// staging buffer as it goes up, as the update would round it) and the blocks' gradients in
// three slabs their updates consume: the resident losses and weights bit for bit (the slabs'
// gradients are gone after the step), in f32 and bf16, in far fewer pinned bytes than the
// gradient homes of every block.
TEST(ParamStream, TransientGradientSlabsGiveTheResidentWeights) {
  constexpr int64_t kAll = kOuter + kLayers * kBlock;
  for (const DType dtype : {DType::f32, DType::bf16}) {
    SCOPED_TRACE(dtype_name(dtype));
    Mode m;
    m.dtype = dtype;
    m.host_update = m.transient = true;
    const StreamRun resident = run(false, m), streamed = run(true, m);
    EXPECT_EQ(streamed.steps, 3);
    EXPECT_EQ(streamed.losses, resident.losses);
    EXPECT_EQ(streamed.eval_losses, resident.eval_losses);
    ASSERT_EQ(streamed.values.size(), resident.values.size());
    for (size_t i = 0; i < resident.values.size(); ++i)
      EXPECT_TRUE(same_bits(streamed.values[i], resident.values[i])) << "weight " << i;
    EXPECT_EQ(streamed.host.values, 4 * kAll);  // no compute copy at home
    EXPECT_GE(streamed.host.gradients, 4 * (kOuter + 3 * kBlock));
    EXPECT_LT(streamed.host.gradients, 4 * (kOuter + 3 * kBlock) + 3 * 256 * 12);  // 12 tensors a block
    EXPECT_EQ(streamed.host.staging > 0, dtype != DType::f32);
    m.transient = false;  // every block's own gradient homes
    EXPECT_EQ(run(true, m).host.gradients, 4 * kAll);
  }
}

// --param-prefetch 3: five slots, blocks uploaded three ahead; the last five of a forward are
// still there for the backward, and no block the backward needs is pushed out before its turn.
TEST(ParamStream, BitIdenticalAtAnyPrefetchDepth) {
  for (const bool host_update : {false, true}) {
    Mode m;
    m.host_update = host_update;
    const StreamRun resident = run(false, m);
    for (const int depth : {2, 3}) {
      m.depth = depth;
      const StreamRun streamed = run(true, m);
      expect_same(resident, streamed);
      const int64_t slots = depth + 2;
      EXPECT_EQ(streamed.fetches, 3 * (2 * kLayers - slots) + kLayers) << "depth " << depth;
      EXPECT_LE(streamed.device_after_build, streamed.outer + slots * streamed.slot + 64 * 512);
      EXPECT_GT(streamed.device_after_build, streamed.outer + (slots - 1) * streamed.slot);
    }
  }
  nn::Gpt g(nn::GptConfig{61, 32, 2, 2, 64, 1e-5f});
  EXPECT_THROW(train::ParamStreamer(g, kVirt, 0), Error);
  EXPECT_THROW(train::ParamStreamer(g, kVirt, train::ParamStreamer::kMaxPrefetchDepth + 1), Error);
}

// --optimizer-split: the outer part and block 0 stay on the device and are updated there at the
// step's end, the other five blocks are streamed and updated on the host; the same bits, and
// only the streamed parts cross the link.
TEST(ParamStream, BitIdenticalWithTheOptimizerSplit) {
  Mode m;
  m.host_update = true;
  const StreamRun resident = run(false, m);
  m.device_parts = 2;
  const StreamRun split = run(true, m);
  expect_same(resident, split);
  constexpr int64_t streamed = kLayers - 1;
  constexpr int64_t fetches = 3 * (2 * streamed - 3) + streamed;
  EXPECT_EQ(split.fetches, fetches);
  EXPECT_EQ(split.up, 4 * fetches * kBlock);  // f32 values of the streamed blocks only
  EXPECT_EQ(split.down, 3 * 4 * streamed * kBlock);
  EXPECT_EQ(split.outer, 0);
  // The device parts' values and gradients (2 x 4 bytes each) besides the three slots.
  EXPECT_GE(split.device_after_build, 2 * 4 * (kOuter + kBlock) + 3 * split.slot);
  EXPECT_LE(split.device_after_build, 2 * 4 * (kOuter + kBlock) + 3 * split.slot + 64 * 512);
  // A delayed update would run the host's parts a step behind the device's.
  nn::Gpt g(nn::GptConfig{61, 32, 2, 2, 64, 1e-5f});
  g.init_parameters(1);
  train::ParamStreamer s(g, kVirt, 1, 1);
  auto opt = optim::make_optimizer("adamw", g.parameters(), {});
  EXPECT_THROW(s.set_host_update(opt.get(), 1), Error);
  EXPECT_THROW(train::ParamStreamer(g, kVirt, 1, 3), Error);  // one block at least is streamed
}

TEST(ParamStream, SplitTakesThePartsWhoseGradientsAreFinalLast) {
  // The outer part holds 30% here, each of the four blocks 17.5%.
  const std::vector<int64_t> parts{30, 17, 18, 17, 18};
  EXPECT_EQ(train::device_parts_for_split(parts, 1.0), 0);
  EXPECT_EQ(train::device_parts_for_split(parts, 0.7), 1);  // 70% left on the host
  EXPECT_EQ(train::device_parts_for_split(parts, 0.5), 2);  // 53%
  EXPECT_EQ(train::device_parts_for_split(parts, 0.01), 4);  // one block stays streamed
  EXPECT_THROW(train::device_parts_for_split(parts, 0.8), Error);  // the outer part alone is 30%
  EXPECT_THROW(train::device_parts_for_split(parts, 0.0), Error);
  EXPECT_THROW(train::device_parts_for_split(parts, 1.5), Error);
}

TEST(ParamStream, HostUpdateNeedsTheModelsParameters) {
  nn::Gpt m(nn::GptConfig{61, 32, 2, 2, 64, 1e-5f});
  m.init_parameters(1);
  train::ParamStreamer stream(m, kVirt);
  std::vector<nn::Parameter*> some = m.parameters();
  some.pop_back();
  auto opt = optim::make_optimizer("adamw", some, {});
  EXPECT_THROW(stream.set_host_update(opt.get()), Error);
  EXPECT_FALSE(stream.updates_in_backward());
}

TEST(ParamStream, RefusedOnTheHostDevice) {
  nn::Gpt m(nn::GptConfig{61, 32, 2, 2, 64, 1e-5f});
  EXPECT_THROW(train::ParamStreamer(m, Device{}), Error);
}

}  // namespace
}  // namespace tandem
