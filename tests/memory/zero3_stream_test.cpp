// --zero 3 --param-device cpu at the streamer (train/place/shard_homes.h): ranks are threads of
// a comm::LocalGroup, each with its own virt device, streamer and host AdamW over its pieces.
//  - One rank: the sharded path (cut, gather, reduce-scatter of one, update of the pieces) gives
//    the unsharded streamer's bits (f32 and bf16).
//  - Two and three ranks (the parts' sizes are no multiples of 3: the pads take part), each on
//    its rows of the batch: the same losses and weights as one streamer on the whole batch,
//    within the reduction order of the gradient average (the bounds of mpirun_test.cpp), and
//    each rank holds 1/N of the elements.
//  - Evaluation passes between steps see the same weights on every rank; a rank's idle pass
//    matches a pass of the others.
//  - Gradient accumulation (two micro-batches a step): each rank sums its micro-batches in a
//    whole accumulation home and reduce-scatters the mean once per step; one rank gives the
//    unsharded streamer's bits, two ranks one streamer's weights within the same bounds.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "memory/memory_test_util.h"
#include "on_ranks.h"
#include "tandem/comm/local.h"
#include "tandem/nn/gpt.h"
#include "tandem/virt.h"
#include "train/place/param_stream.h"

namespace tandem {
namespace {

using memory_test::same_bits;
using memory_test::sync;
using memory_test::tokens_of;

constexpr int64_t kRows = 6;  // the whole batch: 6 x 32 tokens, split into equal rows per rank

struct Result {
  std::vector<float> losses, eval_losses;  // per step: the loss sum over this rank's tokens
  std::vector<Tensor> values;
  int64_t shard_elements = 0, total_elements = 0;
  int64_t accum_bytes = 0;  // the streamer's accumulation homes
};

// Three AdamW steps of a 4-layer GPT streamed on virt:`device`, over rows [first, first + rows)
// of each step's batch (`micro` micro-batches a step, each its own batch); `comm` null: not
// sharded.
Result run(comm::CommunicatorPtr comm, int device, int64_t first, int64_t rows, DType dtype,
           const char* optimizer = "adamw", int64_t micro = 1) {
  const Device dev{DeviceKind::virt, device};
  nn::Gpt m(nn::GptConfig{61, 32, 4, 2, 64, 1e-5f});
  m.init_parameters(3);
  if (dtype != DType::f32) m.set_compute_dtype(dtype);
  train::ParamStreamer stream(m, dev, 1, 0, comm);
  optim::OptimizerOptions o;
  o.lr = 1e-2;
  o.weight_decay = 0.1;
  o.momentum = 0.9;
  auto opt = optim::make_optimizer(optimizer, stream.optimizer_params(m.parameters()), o);
  stream.set_host_update(opt.get());
  const Stream s = runtime_for(dev).current_stream(device);
  const Tensor metrics = Tensor::empty({4}, DType::f32, dev);
  Result r;
  for (int step = 0; step < 3; ++step) {
    Tensor tokens, targets;
    ops::zero_(metrics);
    for (int64_t k = 0; k < micro; ++k) {
      const int64_t seed = k == 0 ? step : 100 + 10 * step + k;
      tokens = tokens_of({kRows, 32}, 61, 10 + seed).narrow(0, first, rows).clone().to(dev, s);
      targets = tokens_of({kRows, 32}, 61, 20 + seed).narrow(0, first, rows).clone().to(dev, s);
      stream.set_micro_batch(k, micro);
      m.train();
      m.forward_loss(tokens, targets, metrics);
      m.backward_loss();
    }
    stream.finish_updates();
    r.losses.push_back(memory_test::host_copy(metrics).data<float>()[0]);
    m.eval();
    ops::zero_(metrics);
    m.forward_loss(tokens, targets, metrics);
    r.eval_losses.push_back(memory_test::host_copy(metrics).data<float>()[0]);
    if (comm && comm->rank() == 0) stream.idle_pass();  // rank 0 "has one more test batch"
    if (comm && comm->rank() != 0) {
      m.eval();  // the others' extra pass: the same collectives with compute
      ops::zero_(metrics);
      m.forward_loss(tokens, targets, metrics);
    }
  }
  stream.gather_weights();
  sync(dev);
  for (nn::Parameter* p : m.parameters()) {
    r.values.push_back(memory_test::host_copy(p->value));
    r.total_elements += p->value.numel();
  }
  r.shard_elements = stream.shards() ? stream.shards()->shard_elements() : r.total_elements;
  r.accum_bytes = stream.accum_bytes();
  return r;
}

std::vector<Result> on_group(int world, DType dtype, const char* optimizer = "adamw", int64_t micro = 1) {
  set_virt_device_count(std::max(2, world));
  comm::LocalGroup group(world, 60);
  std::vector<Result> out(static_cast<size_t>(world));
  const int64_t rows = kRows / world;
  testing::on_ranks(world, [&](int rank) {
    out[static_cast<size_t>(rank)] = run(group.communicator(rank), rank, rank * rows, rows, dtype, optimizer, micro);
  });
  return out;
}

TEST(Zero3Stream, OneRankGivesTheUnshardedBits) {
  for (DType dtype : {DType::f32, DType::bf16}) {
    SCOPED_TRACE(dtype_name(dtype));
    const Result plain = run(nullptr, 0, 0, kRows, dtype);
    const Result one = on_group(1, dtype)[0];
    EXPECT_EQ(one.losses, plain.losses);
    EXPECT_EQ(one.eval_losses, plain.eval_losses);
    ASSERT_EQ(one.values.size(), plain.values.size());
    for (size_t i = 0; i < plain.values.size(); ++i) EXPECT_TRUE(same_bits(one.values[i], plain.values[i])) << i;
    EXPECT_EQ(one.shard_elements, one.total_elements);
  }
}

TEST(Zero3Stream, RanksOfTheRowsTrainLikeOneStreamerOnTheBatch) {
  for (const char* optimizer : {"sgd", "adamw"}) {
    const Result whole = run(nullptr, 0, 0, kRows, DType::f32, optimizer);
    for (int world : {2, 3}) {
      SCOPED_TRACE(std::string(optimizer) + ", " + std::to_string(world) + " ranks");
      const std::vector<Result> ranks = on_group(world, DType::f32, optimizer);
      for (size_t step = 0; step < whole.losses.size(); ++step) {
        double sum = 0, eval = 0;
        for (const Result& r : ranks) sum += r.losses[step], eval += r.eval_losses[step];
        EXPECT_NEAR(sum, whole.losses[step], 1e-4 * std::abs(whole.losses[step])) << "step " << step;
        EXPECT_NEAR(eval, whole.eval_losses[step], 1e-4 * std::abs(whole.eval_losses[step])) << "step " << step;
      }
      double worst = 0, mean = 0, largest = 0;
      int64_t n = 0;
      for (const Result& r : ranks) {
        ASSERT_EQ(r.values.size(), whole.values.size());
        for (size_t i = 0; i < r.values.size(); ++i) {
          EXPECT_TRUE(same_bits(r.values[i], ranks[0].values[i])) << "rank weights differ, tensor " << i;
          const float* a = r.values[i].data<float>();
          const float* b = whole.values[i].data<float>();
          for (int64_t k = 0; k < r.values[i].numel(); ++k, ++n) {
            const double d = std::abs(static_cast<double>(a[k]) - b[k]);
            worst = std::max(worst, d);
            largest = std::max(largest, std::abs(static_cast<double>(b[k])));
            mean += d;
          }
        }
        // 1/N of the elements, each of the 5 parts' two sections padded by fewer than N.
        const int64_t pad = 2 * 5 * (world - 1);
        EXPECT_LE(r.shard_elements * world, r.total_elements + pad);
        EXPECT_GE(r.shard_elements * world, r.total_elements);
      }
      mean /= static_cast<double>(n);
      std::printf("zero 3, %s, %d ranks: largest weight %.3g, largest difference %.3g, mean %.3g (lr 1e-2)\n",
                  optimizer, world, largest, worst, mean);
      EXPECT_GT(worst, 0.0) << "the average over ranks rounds differently from one batch; identical bits suggest "
                               "the ranks did not each train on their own rows";
      if (std::string(optimizer) == "sgd") {
        EXPECT_LE(worst, 1e-5 * largest);
      } else {  // Adam's m / sqrt(v) magnifies the rounding of gradients near 0 (at most ~lr per step)
        EXPECT_LE(worst, 0.05 * 1e-2);
        EXPECT_LE(mean, 1e-4 * 1e-2);
      }
    }
  }
}

TEST(Zero3Stream, AccumulationReduceScattersTheMeanOncePerStep) {
  const Result plain = run(nullptr, 0, 0, kRows, DType::f32, "adamw", 2);
  EXPECT_EQ(plain.accum_bytes, 0);  // unsharded: the gradient homes hold the sums
  const Result one = on_group(1, DType::f32, "adamw", 2)[0];
  EXPECT_EQ(one.accum_bytes, 4 * one.total_elements);
  EXPECT_EQ(one.losses, plain.losses);
  ASSERT_EQ(one.values.size(), plain.values.size());
  for (size_t i = 0; i < plain.values.size(); ++i) EXPECT_TRUE(same_bits(one.values[i], plain.values[i])) << i;
  // Not the single micro-batch's weights: the second micro-batch counted.
  const Result single = run(nullptr, 0, 0, kRows, DType::f32);
  EXPECT_FALSE(same_bits(single.values[0], plain.values[0]));
  const std::vector<Result> ranks = on_group(2, DType::f32, "adamw", 2);
  double worst = 0;
  for (const Result& r : ranks)
    for (size_t i = 0; i < r.values.size(); ++i) {
      EXPECT_TRUE(same_bits(r.values[i], ranks[0].values[i])) << "rank weights differ, tensor " << i;
      const float* a = r.values[i].data<float>();
      const float* b = plain.values[i].data<float>();
      for (int64_t k = 0; k < r.values[i].numel(); ++k) worst = std::max(worst, std::abs(static_cast<double>(a[k]) - b[k]));
    }
  EXPECT_LE(worst, 0.05 * 1e-2);  // the bound of the single micro-batch's AdamW above
}

TEST(Zero3Stream, RefusesTheSplitAndAnotherOptimizer) {
  comm::LocalGroup group(1, 10);
  nn::Gpt m(nn::GptConfig{61, 32, 2, 2, 64, 1e-5f});
  m.init_parameters(3);
  EXPECT_THROW(train::ParamStreamer(m, Device{DeviceKind::virt, 0}, 1, 1, group.communicator(0)), Error);
  train::ParamStreamer stream(m, Device{DeviceKind::virt, 0}, 1, 0, group.communicator(0));
  optim::OptimizerOptions o;
  auto opt = optim::make_optimizer("adamw", stream.optimizer_params(m.parameters()), o);
  // The model's own parameters are not what a sharded streamer's optimizer holds.
  auto wrong = optim::make_optimizer("adamw", m.parameters(), o);
  EXPECT_THROW(stream.set_host_update(wrong.get()), Error);
}

}  // namespace
}  // namespace tandem
