// The overlap figures of the gradient all-reduces on constructed timelines, and DDP's bucket
// assignment.
#include <gtest/gtest.h>

#include "tandem/error.h"
#include "train/dist/comm_timeline.h"
#include "train/dist/grad_reducer.h"

namespace tandem::testing {
namespace {

constexpr int64_t kMs = 1000000;

TEST(CommTimeline, HiddenShareCountsWorkBeforeBackwardEndedAndLeavesTheWaitOut) {
  // Backward ends at 100 ms. Bucket 0: copy 10..20, waits for the other rank 20..50 (skew),
  // all-reduce and copy back 50..70: 30 ms of communication, all hidden. Bucket 1: copy
  // 90..95, no wait, 95..115: 25 ms, 15 of them after backward ended.
  const std::vector<train::BucketStamps> step = {
      {10 * kMs, 20 * kMs, 50 * kMs, 70 * kMs},
      {90 * kMs, 95 * kMs, 95 * kMs, 115 * kMs},
  };
  const train::StepOverlap o = train::step_overlap(step, 100 * kMs);
  EXPECT_NEAR(o.comm_seconds, 0.055, 1e-12);
  EXPECT_NEAR(o.hidden_seconds, 0.040, 1e-12);
  EXPECT_NEAR(o.skew_seconds, 0.030, 1e-12);
  // A wait that straddles backward's end moves nothing into or out of the hidden part.
  const std::vector<train::BucketStamps> late = {{90 * kMs, 95 * kMs, 130 * kMs, 140 * kMs}};
  const train::StepOverlap l = train::step_overlap(late, 100 * kMs);
  EXPECT_NEAR(l.comm_seconds, 0.015, 1e-12);
  EXPECT_NEAR(l.hidden_seconds, 0.005, 1e-12);
  EXPECT_NEAR(l.skew_seconds, 0.035, 1e-12);
  // Everything after backward: nothing hidden.
  EXPECT_EQ(train::step_overlap(late, 80 * kMs).hidden_seconds, 0.0);
  EXPECT_EQ(train::step_overlap({}, 0).comm_seconds, 0.0);
}

TEST(CommTimeline, StampsOutOfOrderAreRefused) {
  EXPECT_THROW(train::step_overlap({{10, 5, 20, 30}}, 0), Error);
  EXPECT_THROW(train::step_overlap({{10, 20, 30, 25}}, 0), Error);
}

TEST(DdpBuckets, ABucketClosesOnceItHoldsTheCap) {
  // fmnist-cnn's parameters in registration order: conv1 w/b, bn1 w/b, conv2 w/b, bn2 w/b,
  // fc1 w/b, fc2 w/b.
  const std::vector<int64_t> cnn = {288, 32, 32, 32, 18432, 64, 64, 64, 401408, 128, 1280, 10};
  const size_t mib = 1 << 20;
  // DDP's defaults (first bucket 1 MiB, then 25 MiB): fc2 and fc1 (1.6 MiB) close the first,
  // the rest (the convolutions and norms, 76 KB) is the last.
  auto b = train::plan_ddp_buckets(cnn, 25 * mib, mib);
  ASSERT_EQ(b.size(), 2u);
  EXPECT_EQ(b[0].params, (std::vector<size_t>{11, 10, 9, 8}));
  EXPECT_EQ(b[1].params, (std::vector<size_t>{7, 6, 5, 4, 3, 2, 1, 0}));
  EXPECT_EQ(b[0].begin, 0);
  EXPECT_EQ(b[0].end, 10 + 1280 + 128 + 401408);
  EXPECT_EQ(b[1].begin, b[0].end);
  EXPECT_EQ(b[1].end, 421834);
  // A 64 KiB cap: conv2.weight (72 KiB) closes a bucket on its own with bn2 before it.
  b = train::plan_ddp_buckets(cnn, 64 * 1024, 64 * 1024);
  ASSERT_EQ(b.size(), 3u);
  EXPECT_EQ(b[1].params, (std::vector<size_t>{7, 6, 5, 4}));
  EXPECT_EQ(b[2].params, (std::vector<size_t>{3, 2, 1, 0}));
  EXPECT_THROW(train::plan_ddp_buckets(cnn, 0, mib), Error);
}

}  // namespace
}  // namespace tandem::testing
