// The distributed run's contracts besides the weights: evaluation counts every test sample once
// for a world size that does not divide the set, different flags on one rank are a clear error
// on every rank, a rank that never comes ends the others naming it, and gradient buckets.
#include <gtest/gtest.h>

#include <chrono>

#include "dist/dist_test_util.h"
#include "tandem/error.h"

namespace tandem::testing {
namespace {

TEST(DistRun, ThreeRanksCountEveryTestSampleOnce) {
  // 100 test samples over 3 ranks: 34 + 33 + 33. The untrained model's figures must be those
  // of one process evaluating all 100.
  train::TrainConfig c = dist_config("adamw");
  train::Trainer single(c, dist_train_set(), dist_test_set(100));
  const train::EvalResult want = single.evaluate();
  ASSERT_EQ(want.samples, 100);
  comm::LocalGroup group(3, 60);
  std::vector<train::EvalResult> got(3);
  on_ranks(3, [&](int r) {
    train::Trainer t(c, dist_train_set(), dist_test_set(100), group.communicator(r));
    got[static_cast<size_t>(r)] = t.evaluate();
  });
  for (const train::EvalResult& e : got) {
    EXPECT_EQ(e.samples, 100);
    EXPECT_EQ(e.correct, want.correct);
    EXPECT_NEAR(e.loss, want.loss, 1e-6 * want.loss);
  }
}

TEST(DistRun, AFlagThatDiffersOnOneRankStopsEveryRankNamingIt) {
  comm::LocalGroup group(2, 60);
  std::vector<std::string> errors(2);
  on_ranks(2, [&](int r) {
    train::TrainConfig c = dist_config("adamw");
    if (r == 1) c.lr = 0.5;
    try {
      train::Trainer t(c, dist_train_set(), dist_test_set(), group.communicator(r));
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::distributed);
      errors[static_cast<size_t>(r)] = e.what();
    }
  });
  EXPECT_NE(errors[1].find("rank 1: the flags or model differ from rank 0's"), std::string::npos) << errors[1];
  EXPECT_NE(errors[1].find("--lr"), std::string::npos) << errors[1];
  EXPECT_NE(errors[0].find("rank(s) 1 run other flags"), std::string::npos) << errors[0];
}

TEST(DistRun, ARankThatNeverComesEndsTheOtherWithinTheTimeout) {
  comm::LocalGroup group(2, 1.0);
  train::TrainConfig c = dist_config("sgd");
  c.dist_timeout = 1.0;
  const auto t0 = std::chrono::steady_clock::now();
  try {
    train::Trainer t(c, dist_train_set(), dist_test_set(), group.communicator(0));
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::distributed);
    EXPECT_NE(std::string(e.what()).find("from rank 1"), std::string::npos) << e.what();
  }
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 30.0);
}

TEST(DistRun, BucketsFollowTheCapAndTheFirstIsOneMiB) {
  // mlp on 1x28x28: fc1 weight 784x256 (784 KiB), bias 1 KiB, fc2 2560 + 10 floats. Reverse
  // order: fc2.bias, fc2.weight, fc1.bias, fc1.weight. As DDP, a bucket closes once it holds
  // the cap: at 0.005 MiB (5243 bytes) fc2's 10 KiB close the first, fc1 makes the second.
  comm::LocalGroup group(2, 60);
  std::vector<std::string> banners(2);
  on_ranks(2, [&](int r) {
    train::TrainConfig c = dist_config("sgd");
    c.bucket_cap_mb = 0.005;
    train::Trainer t(c, std::make_shared<data::SyntheticDataset>(64, 3), dist_test_set(),
                     group.communicator(r));
    banners[static_cast<size_t>(r)] = t.describe();
  });
  EXPECT_NE(banners[0].find("rank 0 of 2 (local)"), std::string::npos) << banners[0];
  EXPECT_NE(banners[0].find("2 buckets (--bucket-cap-mb 0.005"), std::string::npos) << banners[0];
  EXPECT_NE(banners[1].find("32 train / 50 test samples on this rank"), std::string::npos) << banners[1];
}

}  // namespace
}  // namespace tandem::testing
