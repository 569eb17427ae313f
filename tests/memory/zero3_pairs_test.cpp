// --zero 3 beside clipping, bf16 moments and half-precision reduce-scatters, at the streamer
// (train/place/shard_homes.h): ranks are threads of a comm::LocalGroup, each with its own virt
// device, streamer and host AdamW over its pieces, each on its rows of every step's batch.
//  - clipping (set_hold_updates, finish_reductions, clip_shards) with a max norm that bites on
//    every step: one rank gives the unsharded clipped streamer's norms and weights bit for bit;
//    2 and 3 ranks get the same norm's bits on every rank and stay within the reduction order
//    of one streamer on the whole batch (the bounds of zero3_stream_test.cpp);
//  - bf16 moments: one rank gives the unsharded bits (each piece draws its parameter's noise
//    stream, ShardedHomes::rounding_streams); 2 ranks stay within the largest difference's
//    bound, the mean within 2e-3 lr (a piece cut inside a parameter draws other noise);
//  - the delayed update (--offload-delay 1, the shards' two upload copies): one rank gives the
//    unsharded delayed streamer's bits; 2 ranks stay within the same bounds;
//  - accumulation (two micro-batches a step) with clipping or the delay: one rank gives the
//    unsharded accumulated streamer's bits; 2 ranks stay within the same bounds;
//  - bf16 reduce-scatters (--grad-compression bf16) halve the bytes of f32's and stay close to
//    them;
//  - fp16 with dynamic loss scaling from a scale whose first steps overflow (held updates,
//    check_shards: each rank unscales and checks its shard, the flags summed over the ranks):
//    one rank gives the unsharded checked streamer's scales, skipped steps and weights bit for
//    bit, also clipped and accumulated; 2 ranks skip the steps one streamer of the whole batch
//    skips from twice the scale (each rank's loss is the mean over its own rows, so its scaled
//    gradients are those of the whole batch at world_size times the scale, as under DDP), end
//    at half its scale and stay within the bounds above.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "memory/memory_test_util.h"
#include "on_ranks.h"
#include "tandem/amp_ops.h"
#include "tandem/comm/local.h"
#include "tandem/nn/gpt.h"
#include "tandem/optim/adam.h"
#include "tandem/virt.h"
#include "train/place/param_stream.h"

namespace tandem {
namespace {

using memory_test::same_bits;

constexpr int64_t kRows = 6;  // the whole batch: 6 x 32 tokens, split into equal rows per rank
constexpr double kLr = 1e-2;

struct Pairing {
  double clip = 0;  // --clip-grad-norm (0: off)
  DType moments = DType::f32;
  DType wire = DType::f32;  // the reduce-scatters' dtype
  int delay = 0;            // --offload-delay
  int64_t micro = 1;        // --grad-accum-steps: micro-batches a step, each its own batch
  double init_scale = 0;    // fp16 with dynamic loss scaling from this scale (0: fp32, no scaler)
  int steps = 3;
};

struct Trained {
  std::vector<float> norms;  // per step, clipping: the global norm before clipping (not with a scaler)
  std::vector<float> scales;  // per step, loss scaling: the scale after the step's update()
  int64_t skipped = 0;        // loss scaling: the steps skipped
  std::vector<Tensor> values;
  double reduce_bytes = 0;
};

// AdamW steps (three unless `s` says) of a 3-layer GPT streamed on virt:`device` over rows
// [first, first + rows) of each batch; `comm` null: not sharded. The training loop's order:
// backward, then (clipping) the norm over every gradient and the optimizer's step. With a
// scaler (fp16) as the streamed home runs it: unsharded, the streamer's checks (set_checks);
// sharded, the held updates, check_shards, then (the step not skipped) clip_shards and step.
Trained fit(comm::CommunicatorPtr comm, int device, int64_t first, int64_t rows, const Pairing& s) {
  const Device dev{DeviceKind::virt, device};
  nn::Gpt m(nn::GptConfig{61, 32, 3, 2, 64, 1e-5f});
  m.init_parameters(7);
  const bool scaled = s.init_scale > 0;
  if (scaled) m.set_compute_dtype(DType::f16);  // on the host, before the streamer takes the homes
  train::ParamStreamer stream(m, dev, 1, 0, comm);
  const std::vector<nn::Parameter*> params = m.parameters();
  optim::OptimizerOptions o;
  o.lr = kLr;
  o.weight_decay = 0.1;
  o.moments_dtype = s.moments;
  auto opt = optim::make_optimizer("adamw", stream.optimizer_params(params), o);
  if (comm) {  // as make_home does
    dynamic_cast<optim::Adam&>(*opt).set_rounding_streams(stream.shards()->rounding_streams(params));
    stream.set_grad_compression(s.wire);
  }
  const bool clip = s.clip > 0;
  optim::LossScalerOptions so;
  so.init_scale = scaled ? s.init_scale : 1.0;
  optim::LossScaler scaler(dev, so);
  if (!clip || comm || scaled) stream.set_host_update(opt.get(), s.delay);
  if ((clip || scaled) && comm) stream.set_hold_updates(true);
  if (scaled && !comm) stream.set_checks(s.clip, &scaler);
  const Stream st = runtime_for(dev).current_stream(device);
  const Tensor metrics = Tensor::empty({4}, DType::f32, dev);
  const Tensor norm = Tensor::empty({1});
  Trained out;
  for (int step = 0; step < s.steps; ++step) {
    m.train();
    ops::zero_(metrics);
    for (int64_t k = 0; k < s.micro; ++k) {
      const int64_t seed = k == 0 ? step : 100 + 10 * step + k;
      const Tensor tokens = memory_test::tokens_of({kRows, 32}, 61, 30 + seed).narrow(0, first, rows).clone().to(dev, st);
      const Tensor targets = memory_test::tokens_of({kRows, 32}, 61, 40 + seed).narrow(0, first, rows).clone().to(dev, st);
      stream.set_micro_batch(k, s.micro);
      m.forward_loss(tokens, targets, metrics, 1.0f, -1, scaled ? scaler.state() : Tensor());
      m.backward_loss();
    }
    if (scaled) {
      bool skip = false;
      if (comm) {
        stream.finish_reductions();
        skip = stream.check_shards(scaler.host_scale());
        if (!skip && clip) stream.clip_shards(s.clip, params, norm);
        if (!skip) opt->step();
      } else {
        stream.finish_updates();
        skip = stream.last_step_skipped();
      }
      scaler.set_found_inf(skip);
      scaler.update();
      out.scales.push_back(scaler.read().scale);
      out.skipped += skip ? 1 : 0;
      continue;
    }
    if (!clip) {
      stream.finish_updates();
      continue;
    }
    if (comm) {
      stream.finish_reductions();
      stream.clip_shards(s.clip, params, norm);
    } else {
      std::vector<Tensor> grads;
      for (nn::Parameter* p : params) grads.push_back(p->grad);
      ops::clip_grad_norm_(grads, s.clip, norm);
    }
    out.norms.push_back(norm.data<float>()[0]);
    opt->step();
  }
  stream.flush();  // a pending delayed update applied
  stream.gather_weights();
  memory_test::sync(dev);
  for (nn::Parameter* p : params) out.values.push_back(memory_test::host_copy(p->value));
  if (comm)
    for (int p = 0; p < stream.shards()->parts(); ++p) out.reduce_bytes += static_cast<double>(stream.shards()->reduce_bytes(p));
  return out;
}

std::vector<Trained> on_group(int world, const Pairing& s) {
  set_virt_device_count(std::max(2, world));
  comm::LocalGroup group(world, 60);
  std::vector<Trained> out(static_cast<size_t>(world));
  const int64_t rows = kRows / world;
  testing::on_ranks(world, [&](int rank) {
    out[static_cast<size_t>(rank)] = fit(group.communicator(rank), rank, rank * rows, rows, s);
  });
  return out;
}

void expect_same_bits(const Trained& a, const Trained& b) {
  EXPECT_EQ(a.norms, b.norms);
  EXPECT_EQ(a.scales, b.scales);
  EXPECT_EQ(a.skipped, b.skipped);
  ASSERT_EQ(a.values.size(), b.values.size());
  for (size_t i = 0; i < a.values.size(); ++i) EXPECT_TRUE(same_bits(a.values[i], b.values[i])) << "tensor " << i;
}

struct Diff {
  double worst = 0, mean = 0;
};
Diff diff(const Trained& a, const Trained& b) {
  Diff d;
  int64_t n = 0;
  for (size_t i = 0; i < a.values.size(); ++i)
    for (int64_t k = 0; k < a.values[i].numel(); ++k, ++n) {
      const double e = std::abs(static_cast<double>(a.values[i].data<float>()[k]) - b.values[i].data<float>()[k]);
      d.worst = std::max(d.worst, e);
      d.mean += e;
    }
  d.mean /= static_cast<double>(std::max<int64_t>(1, n));
  return d;
}

// The bounds of one streamer on the whole batch against ranks on its rows (zero3_stream_test.cpp;
// `mean_bound` and `worst_bound` in lr).
void expect_within_reduction_order(const std::vector<Trained>& ranks, const Trained& whole, const char* what,
                                   double mean_bound = 1e-4, double worst_bound = 0.05) {
  for (const Trained& r : ranks) expect_same_bits(r, ranks[0]);
  const Diff d = diff(ranks[0], whole);
  std::printf("zero 3, %s, %zu ranks: largest difference %.3g, mean %.3g (lr %.0e)\n", what, ranks.size(), d.worst,
              d.mean, kLr);
  EXPECT_LE(d.worst, worst_bound * kLr);
  EXPECT_LE(d.mean, mean_bound * kLr);
}

TEST(Zero3Pairs, ClippingOnOneRankGivesTheUnshardedBits) {
  Pairing s;
  s.clip = 0.05;
  const Trained plain = fit(nullptr, 0, 0, kRows, s);
  ASSERT_EQ(plain.norms.size(), 3u);
  for (float n : plain.norms) EXPECT_GT(n, s.clip) << "the max norm should bite on every step";
  expect_same_bits(on_group(1, s)[0], plain);
}

TEST(Zero3Pairs, RanksClipByTheGlobalNormOfTheWholeBatch) {
  Pairing s;
  s.clip = 0.05;
  const Trained whole = fit(nullptr, 0, 0, kRows, s);
  for (int world : {2, 3}) {
    SCOPED_TRACE(std::to_string(world) + " ranks");
    const std::vector<Trained> ranks = on_group(world, s);
    ASSERT_EQ(ranks[0].norms.size(), whole.norms.size());
    for (size_t k = 0; k < whole.norms.size(); ++k)
      EXPECT_NEAR(ranks[0].norms[k], whole.norms[k], 1e-5 * whole.norms[k]) << "step " << k;
    expect_within_reduction_order(ranks, whole, "clipped");
  }
}

TEST(Zero3Pairs, Bf16MomentsOnOneRankGiveTheUnshardedBits) {
  Pairing s;
  s.moments = DType::bf16;
  const Trained plain = fit(nullptr, 0, 0, kRows, s);
  expect_same_bits(on_group(1, s)[0], plain);
  s.clip = 0.05;  // and clipped, the pieces updated by the optimizer's step()
  expect_same_bits(on_group(1, s)[0], fit(nullptr, 0, 0, kRows, s));
}

TEST(Zero3Pairs, Bf16MomentsOnTwoRanksTrainLikeOneStreamer) {
  Pairing s;
  s.moments = DType::bf16;
  // The pieces cut inside a parameter round with other noise than one streamer's: moments a
  // bf16 step apart there (measured: largest 0.019 lr, mean 5e-4 lr over 3 steps).
  expect_within_reduction_order(on_group(2, s), fit(nullptr, 0, 0, kRows, s), "bf16 moments", 2e-3);
}

TEST(Zero3Pairs, DelayedUpdateOnOneRankGivesTheUnshardedBits) {
  Pairing s;
  s.delay = 1;
  const Trained plain = fit(nullptr, 0, 0, kRows, s);
  expect_same_bits(on_group(1, s)[0], plain);
  Pairing now;  // and the delay changed the weights
  EXPECT_FALSE(same_bits(plain.values[0], fit(nullptr, 0, 0, kRows, now).values[0]));
}

TEST(Zero3Pairs, DelayedUpdateOnRanksTrainsLikeOneDelayedStreamer) {
  Pairing s;
  s.delay = 1;
  const Trained whole = fit(nullptr, 0, 0, kRows, s);
  for (int world : {2, 3}) {
    SCOPED_TRACE(std::to_string(world) + " ranks");
    expect_within_reduction_order(on_group(world, s), whole, "delayed");
  }
}

// Accumulation (one reduce-scatter of the micro-batches' mean per step) beside clipping (held
// updates) and the delay (the shards' upload copies): one rank gives the unsharded accumulated
// streamer's bits, 2 ranks stay within the bounds above.
TEST(Zero3Pairs, AccumulationWithClippingOrTheDelayTrainsLikeOneStreamer) {
  for (const bool clip : {true, false}) {
    SCOPED_TRACE(clip ? "clipped" : "delayed");
    Pairing s;
    s.micro = 2;
    if (clip) {
      s.clip = 0.05;
    } else {
      s.delay = 1;
    }
    const Trained plain = fit(nullptr, 0, 0, kRows, s);
    expect_same_bits(on_group(1, s)[0], plain);
    Pairing single = s;  // and the second micro-batch counted
    single.micro = 1;
    EXPECT_FALSE(same_bits(plain.values[0], fit(nullptr, 0, 0, kRows, single).values[0]));
    expect_within_reduction_order(on_group(2, s), plain, clip ? "accumulated, clipped" : "accumulated, delayed");
  }
}

TEST(Zero3Pairs, Bf16ReduceScattersHalveTheBytes) {
  const std::vector<Trained> f32 = on_group(2, Pairing{});
  Pairing s;
  s.wire = DType::bf16;
  const std::vector<Trained> bf16 = on_group(2, s);
  expect_same_bits(bf16[1], bf16[0]);
  EXPECT_EQ(2 * bf16[0].reduce_bytes, f32[0].reduce_bytes);
  const Diff d = diff(bf16[0], f32[0]);
  std::printf("zero 3, bf16 reduce-scatters against f32: largest difference %.3g, mean %.3g (lr %.0e)\n", d.worst,
              d.mean, kLr);
  EXPECT_GT(d.worst, 0.0) << "the gradients should have travelled rounded";
  EXPECT_LE(d.mean, 0.05 * kLr);
}

// fp16 with dynamic loss scaling from 2^24: the scaled f16 gradients overflow on the first steps,
// which every rank skips (the flags of the ranks' shards summed) while the scale backs off;
// then the steps run. Plain, clipped (a max norm that bites) and accumulated. 2 ranks against
// one streamer from 2^25 (the ranks' losses are means over half the rows), within fp16's
// reduction order: the kernels' sums over half the rows round to f16 otherwise than over all
// of them (an f16 ulp where fp32's is 2^-23), and AdamW's first steps turn a near-zero
// gradient's sign into a whole lr (measured: largest 2.1 lr, mean 1e-3 lr over 8 steps).
TEST(Zero3Pairs, Fp16LossScalingSkipsTheOverflowingStepsOnEveryRank) {
  for (const std::string variant : {"plain", "clipped", "accumulated"}) {
    SCOPED_TRACE(variant);
    Pairing s;
    s.init_scale = std::ldexp(1.0, 24);
    s.steps = 8;
    if (variant == "clipped") s.clip = 0.05;
    if (variant == "accumulated") s.micro = 2;
    const Trained plain = fit(nullptr, 0, 0, kRows, s);
    std::printf("zero 3, fp16 %s: %lld of %d steps skipped, scale %g at the end\n", variant.c_str(),
                static_cast<long long>(plain.skipped), s.steps, plain.scales.back());
    EXPECT_GE(plain.skipped, 2) << "the first steps should overflow";
    EXPECT_LE(plain.skipped, s.steps - 2) << "the scale should back off until steps run";
    expect_same_bits(on_group(1, s)[0], plain);
    Pairing doubled = s;
    doubled.init_scale = 2 * s.init_scale;
    const Trained whole = fit(nullptr, 0, 0, kRows, doubled);
    const std::vector<Trained> two = on_group(2, s);
    EXPECT_EQ(two[0].skipped, whole.skipped);
    ASSERT_EQ(two[0].scales.size(), whole.scales.size());
    for (size_t k = 0; k < whole.scales.size(); ++k) EXPECT_EQ(2 * two[0].scales[k], whole.scales[k]) << "step " << k;
    expect_within_reduction_order(two, whole, ("fp16, " + variant).c_str(), 3e-3, 3.0);
  }
}

}  // namespace
}  // namespace tandem
