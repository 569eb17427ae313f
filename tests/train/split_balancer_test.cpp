// The batch split's pieces that need no device: parsing --devices/--split, dividing a batch,
// and the --split auto policy (SplitBalancer) fed with modelled device times, so that its
// convergence is checked without a clock.
#include <gtest/gtest.h>

#include <cmath>
#include <numeric>

#include "tandem/error.h"
#include "train/split/split_balancer.h"
#include "train/split/split_plan.h"

namespace tandem::train {
namespace {

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(SplitPlan, ParsesDevicesAndWeights) {
  const SplitPlan p = parse_split("virt:0?speed=0.5,cpu", "3,1", 16);
  ASSERT_EQ(p.devices.size(), 2u);
  EXPECT_EQ(p.devices[0].device.str(), "virt:0");
  EXPECT_EQ(p.devices[1].device.str(), "cpu");
  EXPECT_FALSE(p.automatic);
  EXPECT_EQ(p.weights, (std::vector<double>{3, 1}));
  EXPECT_TRUE(parse_split("virt:0,virt:1", "auto", 2).automatic);
}

TEST(SplitPlan, RejectsADeviceListedTwice) {
  const std::string e = error_of([] { parse_split("virt:0?speed=0.5,virt:1,virt:0", "auto", 16); });
  EXPECT_NE(e.find("virt:0 is listed twice"), std::string::npos) << e;
  EXPECT_NE(error_of([] { parse_split("cpu,cpu", "auto", 16); }).find("cpu is listed twice"), std::string::npos);
}

TEST(SplitPlan, RejectsASplitThatGivesADeviceNoSample) {
  // 16 * 1 / 101 = 0.16 samples: rounds to none.
  const std::string e = error_of([] { parse_split("virt:0,cpu", "100,1", 16); });
  EXPECT_NE(e.find("give cpu 0 of the 16 samples"), std::string::npos) << e;
  EXPECT_NE(error_of([] { parse_split("virt:0,cpu", "3,0", 16); }).find("positive weight"), std::string::npos);
  EXPECT_NE(error_of([] { parse_split("virt:0,cpu", "3,x", 16); }).find("positive weight"), std::string::npos);
  EXPECT_NE(error_of([] { parse_split("virt:0,cpu", "1,2,3", 16); }).find("expected auto or 2 weights"),
            std::string::npos);
  EXPECT_NE(error_of([] { parse_split("virt:0,virt:1,cpu", "auto", 2); }).find("at least one sample per device"),
            std::string::npos);
}

TEST(SplitPlan, RejectsOneDeviceAndMixedAccelerators) {
  EXPECT_NE(error_of([] { parse_split("virt:0", "auto", 16); }).find("at least two devices"), std::string::npos);
  EXPECT_NE(error_of([] { parse_split("cuda:0,virt:0", "auto", 16); }).find("cannot share a run"),
            std::string::npos);
  EXPECT_NE(error_of([] { parse_split("virt:0,gpu", "auto", 16); }).find("--devices virt:0,gpu"), std::string::npos);
}

TEST(SplitPlan, PartitionIsWholeSamplesInProportion) {
  const std::vector<std::string> names{"a", "b", "c"};
  EXPECT_EQ(partition_batch(128, {3, 1}, names), (std::vector<int64_t>{96, 32}));
  EXPECT_EQ(partition_batch(10, {1, 1, 1}, names), (std::vector<int64_t>{4, 3, 3}));  // remainder to the first
  const std::vector<int64_t> p = partition_batch(127, {0.7, 0.2, 0.1}, names);
  EXPECT_EQ(std::accumulate(p.begin(), p.end(), int64_t{0}), 127);
  EXPECT_EQ(p, (std::vector<int64_t>{89, 25, 13}));  // 88.9, 25.4, 12.7
  // The automatic split never drops a device.
  EXPECT_EQ(partition_at_least_one(8, {1000, 1}), (std::vector<int64_t>{7, 1}));
}

// Two devices whose busy time is a fixed cost plus a time per sample, as on a device that
// launches its ops (the fixed part) and computes them (the per-sample part).
struct ModelDevice {
  double per_sample = 0, fixed = 0;
  double seconds(int64_t n) const { return fixed + per_sample * static_cast<double>(n); }
};

double ratio(const std::vector<int64_t>& p) { return static_cast<double>(p[0]) / static_cast<double>(p[1]); }

// Runs `steps` steps, the balancer seeing each step's times `lag` steps late (the host runs
// ahead of the devices); `devs` may change at step `change_at` to `after`.
std::vector<std::vector<int64_t>> simulate(SplitBalancer& b, std::vector<ModelDevice> devs, int steps, int lag,
                                           int change_at = -1, std::vector<ModelDevice> after = {},
                                           double noise = 0) {
  std::vector<std::vector<int64_t>> history;
  uint64_t state = 12345;
  auto jitter = [&] {  // deterministic +-noise
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    return 1.0 + noise * (static_cast<double>(state >> 11) / 9007199254740992.0 * 2 - 1);
  };
  std::vector<std::vector<double>> times;
  for (int s = 0; s < steps; ++s) {
    if (s == change_at) devs = after;
    history.push_back(b.parts());
    std::vector<double> t;
    for (size_t d = 0; d < devs.size(); ++d) t.push_back(devs[d].seconds(history.back()[d]) * jitter());
    times.push_back(t);
    if (s - lag >= 0) b.observe(history[static_cast<size_t>(s - lag)], times[static_cast<size_t>(s - lag)]);
  }
  return history;
}

TEST(SplitBalancer, SettlesWithinTwentyStepsToTheSpeedRatio) {
  // Device 0 is 3x as fast: the parts settle at 3:1 (96 + 32 of 128).
  SplitBalancer b({64, 64});
  const auto h = simulate(b, {{1e-4, 2e-4}, {3e-4, 2e-4}}, 60, 2);
  for (size_t s = 20; s < h.size(); ++s) EXPECT_NEAR(ratio(h[s]), 3.0, 0.3) << "step " << s;
  EXPECT_LE(b.moves(), 6);
}

TEST(SplitBalancer, FollowsASpeedChangeWithinFiftySteps) {
  SplitBalancer b({64, 64});
  // At step 40 device 0 becomes 4x slower: 3:1 turns into 0.75:1.
  const auto h = simulate(b, {{1e-4, 0}, {3e-4, 0}}, 120, 2, 40, {{4e-4, 0}, {3e-4, 0}});
  EXPECT_NEAR(ratio(h[39]), 3.0, 0.3);
  for (size_t s = 90; s < h.size(); ++s) EXPECT_NEAR(ratio(h[s]), 0.75, 0.075) << "step " << s;
}

TEST(SplitBalancer, NoiseDoesNotMakeItOscillate) {
  SplitBalancer b({50, 50});
  // +-3% noise on each time: after settling, the parts stay put (median of 5, hysteresis 4%).
  const auto h = simulate(b, {{1e-4, 0}, {2e-4, 0}}, 200, 2, -1, {}, 0.03);
  int changes = 0;
  for (size_t s = 31; s < h.size(); ++s) changes += h[s] != h[s - 1];
  EXPECT_LE(changes, 3);
  EXPECT_NEAR(ratio(h.back()), 2.0, 0.2);
}

TEST(SplitBalancer, OneSlowStepDoesNotMoveTheParts) {
  SplitBalancer b({64, 64});
  simulate(b, {{1e-4, 0}, {3e-4, 0}}, 30, 0);
  const std::vector<int64_t> settled = b.parts();
  // One step of device 1 three times as long (the host was descheduled): the median ignores it.
  b.observe(settled, {1e-4 * static_cast<double>(settled[0]), 9e-4 * static_cast<double>(settled[1])});
  EXPECT_EQ(b.parts(), settled);
}

TEST(SplitBalancer, ThreeDevicesFinishTogether) {
  SplitBalancer b({40, 40, 40});
  const std::vector<ModelDevice> devs{{1e-4, 0}, {2e-4, 0}, {4e-4, 0}};
  const auto h = simulate(b, devs, 40, 2);
  const auto& last = h.back();
  EXPECT_EQ(last[0] + last[1] + last[2], 120);
  const double t0 = devs[0].seconds(last[0]), t2 = devs[2].seconds(last[2]);
  EXPECT_NEAR(t0 / t2, 1.0, 0.1);
}

TEST(SplitBalancer, RejectsBadOptions) {
  EXPECT_THROW(SplitBalancer({0, 4}), Error);
  EXPECT_THROW(SplitBalancer({}), Error);
  BalancerOptions o;
  o.window = 0;
  EXPECT_THROW(SplitBalancer({4, 4}, o), Error);
}

}  // namespace
}  // namespace tandem::train
