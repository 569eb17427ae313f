// Gradient accumulation under data parallel (ranks that are threads of this process):
//  - DDP's no_sync: a held micro-batch's gradients stay on their rank (the reducer takes
//    nothing), the last micro-batch's backward reduces the sums;
//  - 2 ranks of 2 micro-batches of 8 end 20 steps within the fp32 reduction-order tolerance
//    of equivalence_test.cpp of one process of 2 micro-batches of 16 (the ranks' micro-batch k
//    together is the one process's micro-batch k) and, for SGD, of one process of 4
//    micro-batches of 8 (the same 32 samples a step, grouped otherwise), the optimizer beside
//    the parameters or offloaded, on cpu and virt;
//  - ZeRO-1 (resident and offloaded) and --grad-compression topk:1 give the plain
//    accumulated run's weights bit for bit, and one all-reduce of the bucket goes out per
//    optimizer step.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>

#include "dist/dist_test_util.h"
#include "tandem/nn/sequential.h"
#include "tandem/ops.h"
#include "tandem/virt.h"
#include "train/dist/grad_reducer.h"

namespace tandem::testing {
namespace {

// One parameter whose backward adds the forward's input to its gradient (as Linear
// accumulates): a rank's gradient shows which inputs reached it.
class AddsInput final : public nn::Module {
 public:
  AddsInput() {
    p_.value = Tensor::zeros({64});
    p_.grad = Tensor::zeros({64});
  }
  Tensor forward(const Tensor& x) override {
    x_ = x;
    return x;
  }
  Tensor backward(const Tensor& dy) override {
    ops::add_(p_.grad, x_);
    return dy;
  }
  void collect_parameters(const std::string& prefix, std::vector<nn::Parameter*>& out) override {
    p_.name = prefix + "w";
    out.push_back(&p_);
  }
  std::string describe() const override { return "AddsInput"; }

 private:
  nn::Parameter p_;
  Tensor x_;
};

TEST(NoSync, HeldMicroBatchesStayOnTheRankAndTheLastIsReduced) {
  comm::LocalGroup group(2, 60);
  std::vector<std::vector<float>> held(2), reduced(2);
  std::vector<int64_t> steps(2);
  on_ranks(2, [&](int r) {
    auto model = std::make_shared<nn::Sequential>(std::vector<nn::ModulePtr>{std::make_shared<AddsInput>()});
    const std::vector<nn::Parameter*> ps = model->parameters();
    train::GradReducer reducer(group.communicator(r), *model, ps, Device{}, 25.0);
    const Tensor x = Tensor::full({64}, static_cast<float>(r + 1));  // rank 0 adds 1s, rank 1 2s
    reducer.set_hold(true);
    model->backward(model->forward(x));
    reducer.finish();
    held[static_cast<size_t>(r)] = ps[0]->grad.to_vector();
    reducer.set_hold(false);
    model->backward(model->forward(x));
    reducer.finish();
    reduced[static_cast<size_t>(r)] = ps[0]->grad.to_vector();
    steps[static_cast<size_t>(r)] = reducer.figures().steps;
  });
  EXPECT_EQ(held[0], std::vector<float>(64, 1.0f));  // its own micro-batch only
  EXPECT_EQ(held[1], std::vector<float>(64, 2.0f));
  EXPECT_EQ(reduced[0], std::vector<float>(64, 3.0f));  // the mean of the sums 2 and 4
  EXPECT_EQ(reduced[1], reduced[0]);
  EXPECT_EQ(steps[0], 1);
}

std::shared_ptr<const data::Dataset> train_set() { return std::make_shared<data::SyntheticDataset>(640, 11); }

struct RankRun {
  std::vector<std::vector<float>> weights;
  train::TrainResult result;
};

// 2 ranks of `cfg` (on virt:0 and virt:1 when cfg.device is "virt"); rank 0's weights and
// figures, after checking that every rank holds the same bits.
RankRun two_ranks(const train::TrainConfig& cfg) {
  comm::LocalGroup group(2, 60);
  std::vector<RankRun> runs(2);
  if (cfg.device == "virt") set_virt_device_count(2);
  on_ranks(2, [&](int r) {
    train::TrainConfig mine = cfg;
    if (cfg.device == "virt") mine.device = "virt:" + std::to_string(r);
    train::Trainer t(mine, train_set(), dist_test_set(), group.communicator(r));
    runs[static_cast<size_t>(r)].result = t.fit();
    runs[static_cast<size_t>(r)].weights = trained_weights(t);
  });
  EXPECT_EQ(runs[0].weights, runs[1].weights) << "the ranks' weights differ";
  return runs[0];
}

std::vector<std::vector<float>> one_process(train::TrainConfig c, int64_t batch, int64_t accum) {
  c.batch_size = batch;
  c.grad_accum_steps = accum;
  train::Trainer t(c, train_set(), dist_test_set());
  t.fit();
  return trained_weights(t);
}

// The bounds of equivalence_test.cpp: SGD within 1e-5 of the largest weight; Adam's sqrt(v)
// magnifies the last bits of near-zero gradients, so single weights may move a fraction of lr.
void expect_close(const std::vector<std::vector<float>>& reference, const std::vector<std::vector<float>>& got,
                  const train::TrainConfig& c, const std::string& what) {
  ASSERT_EQ(reference.size(), got.size());
  double largest = 0, worst = 0, sum = 0;
  int64_t count = 0;
  for (size_t k = 0; k < reference.size(); ++k) {
    ASSERT_EQ(reference[k].size(), got[k].size());
    for (size_t i = 0; i < reference[k].size(); ++i) {
      largest = std::max(largest, std::abs(static_cast<double>(reference[k][i])));
      const double d = std::abs(static_cast<double>(got[k][i]) - reference[k][i]);
      worst = std::max(worst, d);
      sum += d;
      ++count;
    }
  }
  const double mean = sum / static_cast<double>(count);
  std::printf("%s: largest weight %.4g, largest difference %.3g, mean difference %.3g\n", what.c_str(), largest,
              worst, mean);
  if (c.optimizer == "sgd") {
    EXPECT_LE(worst, 1e-5 * largest) << what;
  } else {
    EXPECT_LE(worst, 0.02 * c.lr) << what;
    EXPECT_LE(mean, 1e-4 * c.lr) << what;
  }
}

// SGD and AdamW, the optimizer beside the parameters and offloaded, on cpu and virt.
TEST(AccumulatedDist, TwoRanksOfTwoMicroBatchesTrainLikeOneProcess) {
  const std::vector<std::array<const char*, 3>> cases{
      {"sgd", "device", "cpu"}, {"adamw", "device", "cpu"}, {"adamw", "cpu", "cpu"},
      {"sgd", "cpu", "virt"}, {"adamw", "device", "virt"}};
  for (const auto& [optimizer, optimizer_device, device] : cases) {
    const std::string name = std::string(optimizer) + " --optimizer-device " + optimizer_device + " on " + device;
    SCOPED_TRACE(name);
    train::TrainConfig c = dist_config(optimizer);
    c.optimizer_device = optimizer_device;
    c.device = device;
    c.batch_size = 8;
    c.grad_accum_steps = 2;
    const RankRun ranks = two_ranks(c);
    train::TrainConfig single = c;
    if (single.device == "virt") single.device = "virt:0";
    expect_close(one_process(single, 16, 2), ranks.weights, c, name + ", against batch 16 x 2");
    if (c.optimizer == "sgd") expect_close(one_process(single, 8, 4), ranks.weights, c, name + ", against batch 8 x 4");
    // It trained: the weights moved well beyond the tolerance.
    train::Trainer still(single, train_set(), dist_test_set());
    const auto init = trained_weights(still);
    double moved = 0;
    for (size_t k = 0; k < init.size(); ++k)
      for (size_t i = 0; i < init[k].size(); ++i)
        moved = std::max(moved, std::abs(static_cast<double>(init[k][i]) - ranks.weights[k][i]));
    EXPECT_GT(moved, 1e-3);
  }
}

// ZeRO-1 keeps each element's update, the offloaded one too; topk:1 sends everything; one
// all-reduce of the whole bucket (203530 floats) per optimizer step, not per micro-batch.
TEST(AccumulatedDist, ZeroAndCompressionGiveThePlainWeightsBitForBit) {
  train::TrainConfig c = dist_config("adamw");
  c.batch_size = 8;
  c.grad_accum_steps = 2;
  c.momentum = 0.9;
  const RankRun plain = two_ranks(c);
  EXPECT_EQ(plain.result.wire_bytes_per_step, 203530.0 * 4);
  train::TrainConfig zero = c;
  zero.zero = 1;
  EXPECT_EQ(two_ranks(zero).weights, plain.weights) << "--zero 1";
  train::TrainConfig topk = c;
  topk.grad_compression = "topk:1";
  EXPECT_EQ(two_ranks(topk).weights, plain.weights) << "topk:1";
  for (const char* optimizer : {"sgd", "adamw"}) {
    train::TrainConfig off = c;
    off.optimizer = optimizer;
    off.lr = dist_config(optimizer).lr;
    off.optimizer_device = "cpu";
    off.bucket_cap_mb = 0.5;  // two buckets
    const RankRun offloaded = two_ranks(off);
    off.zero = 1;
    EXPECT_EQ(two_ranks(off).weights, offloaded.weights) << "--zero 1 --optimizer-device cpu, " << optimizer;
  }
}

}  // namespace
}  // namespace tandem::testing
