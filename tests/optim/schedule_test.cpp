// LR schedules: closed forms at chosen steps and argument errors (PyTorch's values are in
// golden_test.cpp).
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <numbers>
#include <string>

#include "tandem/error.h"
#include "tandem/optim/schedule.h"

namespace tandem::optim {
namespace {

TEST(Schedule, ConstantAndStep) {
  ConstantSchedule c(0.3);
  EXPECT_DOUBLE_EQ(c.lr(0), 0.3);
  EXPECT_DOUBLE_EQ(c.lr(int64_t{1} << 40), 0.3);
  StepSchedule s(1.0, 10, 0.1);
  EXPECT_DOUBLE_EQ(s.lr(0), 1.0);
  EXPECT_DOUBLE_EQ(s.lr(9), 1.0);
  EXPECT_NEAR(s.lr(10), 0.1, 1e-15);
  EXPECT_NEAR(s.lr(25), 0.01, 1e-15);
}

TEST(Schedule, CosineWarmupAndAnnealing) {
  const double base = 0.2, min_lr = 0.02;
  CosineSchedule s(base, 5, 105, min_lr);
  EXPECT_DOUBLE_EQ(s.lr(0), base / 5);
  EXPECT_DOUBLE_EQ(s.lr(4), base);
  EXPECT_DOUBLE_EQ(s.lr(5), base);
  EXPECT_NEAR(s.lr(55), (base + min_lr) / 2, 1e-15);  // halfway through annealing
  EXPECT_NEAR(s.lr(30), min_lr + (base - min_lr) * (1 + std::cos(std::numbers::pi / 4)) / 2, 1e-15);
  EXPECT_DOUBLE_EQ(s.lr(105), min_lr);
  EXPECT_DOUBLE_EQ(s.lr(1000), min_lr);  // held, not rising again
  CosineSchedule no_warmup(1.0, 0, 4);
  EXPECT_DOUBLE_EQ(no_warmup.lr(0), 1.0);
  EXPECT_NEAR(no_warmup.lr(2), 0.5, 1e-15);
}

TEST(Schedule, FactoryAndErrors) {
  ScheduleOptions o;
  o.lr = 0.1;
  o.step_size = 2;
  o.gamma = 0.5;
  o.warmup_steps = 1;
  o.total_steps = 3;
  EXPECT_STREQ(make_schedule("constant", o)->name(), "constant");
  EXPECT_DOUBLE_EQ(make_schedule("step", o)->lr(2), 0.05);
  EXPECT_DOUBLE_EQ(make_schedule("cosine", o)->lr(0), 0.1);
  try {
    make_schedule("linear", o);
    ADD_FAILURE() << "no throw";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::invalid_argument);
    EXPECT_STREQ(e.what(), "[schedule] unknown schedule 'linear' (expected constant, step, cosine or one-cycle)");
  }
  EXPECT_THROW(CosineSchedule(0.1, 10, 10), Error);
  EXPECT_THROW(CosineSchedule(0.1, 0, 10, 0.2), Error);
  EXPECT_THROW(StepSchedule(0.1, 0, 0.5), Error);
  EXPECT_THROW(ConstantSchedule(0.1).lr(-1), Error);
}

// One-cycle against torch.optim.lr_scheduler.OneCycleLR (tests/golden/one_cycle.txt, made by
// scripts/golden_one_cycle.py): every step of two runs.
TEST(Schedule, OneCycleMatchesTorch) {
  std::ifstream in(TANDEM_SOURCE_DIR "/tests/golden/one_cycle.txt");
  ASSERT_TRUE(in.good());
  int runs = 0;
  double max_lr = 0, pct = 0;
  int64_t total = 0;
  while (in >> max_lr >> total >> pct) {
    OneCycleSchedule s(max_lr, total, pct);
    for (int64_t step = 0; step < total; ++step) {
      double want = 0;
      ASSERT_TRUE(in >> want);
      EXPECT_NEAR(s.lr(step), want, 1e-12 * max_lr) << "step " << step << " of " << total;
    }
    ++runs;
  }
  EXPECT_EQ(runs, 2);
  EXPECT_THROW(OneCycleSchedule(0.1, 1, 0.3), Error);
  EXPECT_THROW(OneCycleSchedule(0.1, 10, 1.0), Error);
}

}  // namespace
}  // namespace tandem::optim
