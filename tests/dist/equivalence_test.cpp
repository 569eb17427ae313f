// Data parallel = one big batch: 2 ranks with batch B/2 each end with the weights of 1 rank
// with batch B after 20 steps (the DistributedSampler gives the two ranks together exactly the
// samples of each big batch, and gradients are averaged). The only difference is the order of
// fp32 sums (two half-batch means averaged vs one mean; the all-reduce), so the weights agree
// within a relative 1e-4 of the largest weight after 20 steps (measured: about 1e-6), and
// every rank holds the same bits.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "dist/dist_test_util.h"
#include <cstdio>

#include "tandem/error.h"
#include "tandem/virt.h"

namespace tandem::testing {
namespace {

struct Case {
  std::string optimizer, optimizer_device, device;
};

std::string case_name(const ::testing::TestParamInfo<Case>& info) {
  return info.param.optimizer + "_" + (info.param.optimizer_device == "cpu" ? "offloaded" : "beside") + "_" +
         info.param.device;
}

class Equivalence : public ::testing::TestWithParam<Case> {};

TEST_P(Equivalence, TwoRanksOfHalfTheBatchTrainLikeOneRank) {
  const Case& p = GetParam();
  train::TrainConfig one = dist_config(p.optimizer);
  one.optimizer_device = p.optimizer_device;
  one.device = p.device;
  train::Trainer single(one, dist_train_set(), dist_test_set());
  const train::TrainResult r1 = single.fit();
  ASSERT_EQ(r1.epochs.size(), 1u);
  const auto reference = trained_weights(single);

  train::TrainConfig half = one;
  half.batch_size = one.batch_size / 2;
  comm::LocalGroup group(2, 60);
  std::vector<std::vector<std::vector<float>>> ranks(2);
  std::vector<train::TrainResult> results(2);
  if (p.device == "virt") set_virt_device_count(2);  // replicas in one process: a device each
  on_ranks(2, [&](int r) {
    train::TrainConfig mine = half;
    if (p.device == "virt") mine.device = "virt:" + std::to_string(r);
    train::Trainer t(mine, dist_train_set(), dist_test_set(), group.communicator(r));
    results[static_cast<size_t>(r)] = t.fit();
    ranks[static_cast<size_t>(r)] = trained_weights(t);
  });
  EXPECT_EQ(results[0].world_size, 2);
  EXPECT_GT(results[0].wire_bytes_per_step, 0);
  ASSERT_EQ(ranks[0].size(), reference.size());
  double largest = 0, worst = 0, sum = 0;
  int64_t count = 0;
  for (size_t k = 0; k < reference.size(); ++k) {
    ASSERT_EQ(ranks[0][k].size(), reference[k].size());
    EXPECT_EQ(ranks[0][k], ranks[1][k]) << "tensor " << k << ": the ranks' weights differ";
    for (size_t i = 0; i < reference[k].size(); ++i) {
      largest = std::max(largest, std::abs(static_cast<double>(reference[k][i])));
      const double d = std::abs(static_cast<double>(ranks[0][k][i]) - reference[k][i]);
      worst = std::max(worst, d);
      sum += d;
      ++count;
    }
  }
  const double mean = sum / static_cast<double>(count);
  std::printf("%s: largest weight %.4g, largest difference %.3g, mean difference %.3g\n", case_name({p, 0}).c_str(),
              largest, worst, mean);
  if (p.optimizer == "sgd") {
    EXPECT_LE(worst, 1e-5 * largest);
  } else {
    // Adam divides by sqrt(v): where a gradient is near 0 the last bits of the sum decide the
    // step's size, so single weights may move up to a fraction of lr apart.
    EXPECT_LE(worst, 0.02 * one.lr);
    EXPECT_LE(mean, 1e-4 * one.lr);
  }
  // The weights moved: the comparison is not between two untrained models.
  train::Trainer still(one, dist_train_set(), dist_test_set());  // not trained
  const auto init = trained_weights(still);
  double moved = 0;
  for (size_t k = 0; k < init.size(); ++k)
    for (size_t i = 0; i < init[k].size(); ++i)
      moved = std::max(moved, std::abs(static_cast<double>(init[k][i]) - reference[k][i]));
  EXPECT_GT(moved, 100 * worst + 1e-6);
  // Both halves were evaluated: every rank reports the whole test set.
  EXPECT_DOUBLE_EQ(results[0].epochs[0].test_accuracy, results[1].epochs[0].test_accuracy);
}

INSTANTIATE_TEST_SUITE_P(Dist, Equivalence,
                         ::testing::Values(Case{"sgd", "device", "cpu"}, Case{"adamw", "device", "cpu"},
                                           Case{"sgd", "cpu", "cpu"}, Case{"adamw", "cpu", "cpu"},
                                           Case{"adamw", "device", "virt"}, Case{"sgd", "cpu", "virt"}),
                         case_name);

}  // namespace
}  // namespace tandem::testing
