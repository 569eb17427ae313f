// Autotuner driven by a synthetic pipeline whose stage times follow from the knobs: it finds
// the worker count that makes an input-bound run compute-bound (and no more), stays within
// the CPU budget, gives back workers a compute-bound run does not need, reverts a change that
// does not help, deepens the copy queue for a copy-bound run, settles within 200 steps, and
// rejects bad settings. PipelineTuner on a real loader with a slow dataset adds workers and
// leaves the batches unchanged.
#include "tandem/data/autotune.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>

#include "data/synthetic_datasets.h"
#include "tandem/error.h"
#include "tandem/rng.h"

using namespace tandem;
using namespace tandem::data;
using namespace std::chrono_literals;

namespace {

// Per-batch stage times of a synthetic pipeline, in seconds. One batch per step.
struct Pipeline {
  double load = 0.010;     // one worker making one batch
  double compute = 0.010;  // the step's compute
  double copy_latency = 0;  // copies finish this long after issue; depth batches ahead hide it
  double cpu_slowdown = 0;  // compute grows by this factor per worker beyond the spare cores
  int spare_cores = 64;
  bool serial_storage = false;  // loading does not scale with workers (one disk)
  double noise = 0.01;          // relative, uniform in [-noise, noise]

  StageWindow window(const PipelineKnobs& k, int steps, Philox& rng) const {
    const int nw = std::max(1, k.num_workers);
    const double comp = compute * (1 + cpu_slowdown * std::max(0, nw - spare_cores));
    const double input = serial_storage ? load : load / nw;  // time between batches
    const double copy_wait = std::max(0.0, copy_latency - std::max(1, k.prefetch_depth) * comp);
    double step = std::max(comp, input) + copy_wait;
    step *= 1 + noise * (2 * rng.uniform() - 1);
    StageWindow w;
    w.steps = steps;
    w.seconds = step * steps;
    w.data_wait_seconds = std::max(0.0, input - comp) * steps;
    w.copy_wait_seconds = copy_wait * steps;
    w.loader_busy_seconds = std::min(load * steps, w.seconds * nw);
    return w;
  }
};

// Runs the tuner for `max_steps` steps; returns the final knobs.
PipelineKnobs run(Autotuner& t, const Pipeline& p, int64_t max_steps = 400) {
  Philox rng(7, 0, 0, 0);
  while (t.steps_seen() < max_steps) {
    const StageWindow w = p.window(t.knobs(), t.options().window_steps, rng);
    t.update(w);
  }
  return t.knobs();
}

AutotuneOptions opts(int budget) {
  AutotuneOptions o;
  o.cpu_budget = budget;
  return o;
}

}  // namespace

TEST(Autotuner, InputBoundRunGetsJustEnoughWorkers) {
  Pipeline p;
  p.load = 0.040;
  p.compute = 0.010;  // four workers make a batch every 10 ms
  Autotuner t({1, 2, 2}, opts(16));
  const PipelineKnobs k = run(t, p);
  EXPECT_EQ(k.num_workers, 4) << t.reason();
  EXPECT_TRUE(t.settled());
  EXPECT_NEAR(t.step_seconds(), 0.010, 0.0005);
}

TEST(Autotuner, SettlesWithinTheFirst200Steps) {
  Pipeline p;
  p.load = 0.030;
  p.compute = 0.010;
  AutotuneOptions o = opts(16);
  Autotuner t({1, 2, 2}, o);
  Philox rng(1, 0, 0, 0);
  while (!t.settled()) {
    t.update(p.window(t.knobs(), o.window_steps, rng));
    ASSERT_LE(t.steps_seen(), o.settle_steps);
  }
  EXPECT_EQ(t.knobs().num_workers, 3);
}

TEST(Autotuner, StaysWithinTheCpuBudget) {
  Pipeline p;
  p.load = 0.100;
  p.compute = 0.010;
  Autotuner t({1, 2, 2}, opts(2));
  EXPECT_EQ(run(t, p).num_workers, 2);
  // A start above the budget is capped.
  Autotuner capped({6, 2, 2}, opts(3));
  EXPECT_EQ(capped.knobs().num_workers, 3);
}

TEST(Autotuner, ComputeBoundRunGivesBackWorkers) {
  Pipeline p;
  p.load = 0.010;
  p.compute = 0.040;  // one worker is busy a quarter of the time
  Autotuner t({6, 2, 2}, opts(8));
  EXPECT_EQ(run(t, p).num_workers, 1) << t.reason();
}

TEST(Autotuner, GivesBackWorkersThatSlowComputeOnSharedCores) {
  // Each worker beyond the 2 spare cores slows compute by 30%; 2 workers still keep up.
  Pipeline p;
  p.load = 0.012;
  p.compute = 0.010;
  p.cpu_slowdown = 0.3;
  p.spare_cores = 2;
  Autotuner t({4, 2, 2}, opts(4));
  EXPECT_EQ(run(t, p).num_workers, 2) << t.reason();
}

TEST(Autotuner, RevertsAWorkerThatDoesNotHelp) {
  // Storage serialises loading: more workers do not make batches faster.
  Pipeline p;
  p.load = 0.030;
  p.compute = 0.010;
  p.serial_storage = true;
  AutotuneOptions o = opts(8);
  o.tune_prefetch = false;
  Autotuner t({2, 2, 2}, o);
  EXPECT_EQ(run(t, p).num_workers, 2) << t.reason();
  EXPECT_TRUE(t.settled());
}

TEST(Autotuner, CopyBoundRunCopiesFurtherAhead) {
  // A copy lands 45 ms after issue; with depth d it is issued d steps of 10 ms ahead.
  Pipeline p;
  p.load = 0.005;
  p.compute = 0.010;
  p.copy_latency = 0.045;
  AutotuneOptions o = opts(4);
  o.tune_workers = false;
  Autotuner t({1, 2, 2}, o);
  const PipelineKnobs k = run(t, p);
  EXPECT_EQ(k.prefetch_depth, 5) << t.reason();
  EXPECT_EQ(k.num_workers, 1);
}

TEST(Autotuner, FixedKnobsStayFixed) {
  Pipeline p;
  p.load = 0.040;
  AutotuneOptions o = opts(8);
  o.tune_workers = false;
  o.tune_prefetch = false;
  Autotuner t({1, 2, 2}, o);
  EXPECT_EQ(run(t, p), (PipelineKnobs{1, 2, 2}));
  EXPECT_TRUE(t.settled());
}

TEST(Autotuner, RejectsBadSettings) {
  EXPECT_THROW(Autotuner({0, 2, 2}, opts(2)), Error);
  EXPECT_THROW(Autotuner({1, 0, 2}, opts(2)), Error);
  EXPECT_THROW(Autotuner({1, 2, -1}, opts(2)), Error);
  EXPECT_THROW(Autotuner({1, 2, 2}, opts(0)), Error);
  AutotuneOptions o = opts(2);
  o.window_steps = 0;
  try {
    Autotuner({1, 2, 2}, o);
    FAIL() << "expected an Error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::invalid_argument);
    EXPECT_NE(std::string(e.what()).find("[autotune] expected window_steps >= 1, found 0"), std::string::npos)
        << e.what();
  }
}

TEST(PipelineTuner, AddsWorkersForASlowDatasetAndKeepsTheBatches) {
  // Sleeping samples are slow whatever the number of cores, and the consumer does no work:
  // the run is input-bound until the budget of 3 workers is reached. Samples of 2 ms make a
  // worker's gain (8 ms -> 4 ms per batch) stand far above a loaded machine's wake-up jitter.
  auto slow = std::make_shared<tandem::testing::SleepyDataset>(240, ImageDims{1, 4, 4}, 2ms);
  LoaderOptions lo;
  lo.batch_size = 4;
  lo.num_workers = 1;
  lo.shuffle = true;
  lo.seed = 3;
  std::vector<int64_t> ref;
  {
    LoaderOptions o0 = lo;
    o0.num_workers = 0;
    Loader l0(slow, nullptr, o0);
    l0.begin_epoch(0);
    Batch b;
    while (l0.next(b)) ref.insert(ref.end(), b.target().data<int64_t>(), b.target().data<int64_t>() + b.size());
  }
  Loader loader(slow, nullptr, lo);
  AutotuneOptions o;
  o.cpu_budget = 3;
  o.window_steps = 6;
  o.settle_steps = 60;
  PipelineTuner tuner(loader, nullptr, o);
  loader.begin_epoch(0);
  tuner.begin_epoch();
  std::vector<int64_t> got;
  Batch b;
  while (loader.next(b)) {
    got.insert(got.end(), b.target().data<int64_t>(), b.target().data<int64_t>() + b.size());
    tuner.step_done();
  }
  EXPECT_EQ(got, ref);
  EXPECT_TRUE(tuner.settled()) << tuner.describe();
  EXPECT_GE(loader.num_workers(), 2) << tuner.describe();
  EXPECT_LE(loader.num_workers(), 3);
  EXPECT_NE(tuner.describe().find("autotune: num_workers"), std::string::npos);
}
