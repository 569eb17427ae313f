// The trainer's input pipeline with the autotuner and the profiler, on datasets given to the
// Trainer (one that sleeps per sample, so loading is slow whatever the machine):
//  - --num-workers auto --prefetch auto: the tuner adds workers to an input-bound run, the
//    chosen values are reported, and the trained weights are bit-identical to a run with a
//    fixed single worker (batches and augmentation do not depend on the workers);
//  - the summary of a traced trainer run names the input for the slow dataset and compute
//    for a slowed-down virt device;
//  - the pinned pool stops growing after the first epoch with 4 workers and prefetch 8;
//  - in a compute-bound run the training thread waits on the device only for the metrics
//    read-back at K-step boundaries (no prefetcher waits), and the read-back bounds how far
//    it runs ahead.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "data/sanitizer_build.h"
#include "tandem/pinned.h"
#include "tandem/profile/summary.h"
#include "tandem/data/synthetic_dataset.h"
#include "tandem/thread_pool.h"
#include "tandem/train/trainer.h"

using namespace tandem;
using namespace std::chrono_literals;
using tandem::testing::kThreadSanitizer;

namespace {

train::TrainConfig config(const std::string& device) {
  train::TrainConfig c;
  c.model = "mlp";
  c.device = device;
  c.epochs = 1;
  c.batch_size = 16;
  c.eval_batch_size = 128;
  c.seed = 3;
  c.threads = 1;
  c.num_workers = 1;
  c.progress = 0;
  c.schedule = "constant";
  return c;
}

// One profiled trainer run: its result, spans, tracks and summary.
struct Traced {
  train::TrainResult result;
  std::vector<profile::Profiler::Span> spans;
  std::vector<profile::Profiler::Track> tracks;
  profile::Summary summary;
};
Traced traced_run(train::Trainer& t, const train::TrainConfig& c) {
  profile::Profiler& p = profile::Profiler::global();
  p.clear();
  p.name_this_thread("train");
  p.set_enabled(true);
  Traced out;
  out.result = t.fit();
  p.set_enabled(false);
  out.spans = p.spans();
  out.tracks = p.tracks();
  out.summary = profile::summarize(out.spans, out.tracks, train::summary_options(c, out.result));
  p.clear();
  return out;
}
profile::Summary traced_fit(train::Trainer& t, const train::TrainConfig& c) { return traced_run(t, c).summary; }

}  // namespace

TEST(TrainerPipeline, AutotunedWorkersTrainTheSameWeights) {
  auto slow = std::make_shared<data::SyntheticDataset>(2400, 1, 250us);  // 4 ms per batch per worker
  auto test = std::make_shared<data::SyntheticDataset>(128, 2, 0us);
  train::TrainConfig fixed = config("virt:7?speed=1&latency_us=0");
  train::Trainer a(fixed, slow, test);
  const train::TrainResult ra = a.fit();

  train::TrainConfig autocfg = fixed;
  autocfg.num_workers = -1;
  autocfg.prefetch_factor = -1;
  train::Trainer b(autocfg, slow, test);
  EXPECT_NE(b.describe().find("autotuned loader workers"), std::string::npos) << b.describe();
  const train::TrainResult rb = b.fit();
  EXPECT_NE(rb.autotune.find("settled"), std::string::npos) << rb.autotune;
  // Under ThreadSanitizer the instrumented step is slow enough for one worker to keep up.
  EXPECT_TRUE(kThreadSanitizer || available_cores() == 1 || rb.num_workers > 1) << rb.autotune;
  EXPECT_LE(rb.num_workers, available_cores());
  EXPECT_GE(rb.prefetch_depth, 2);
  EXPECT_TRUE(ra.autotune.empty());
  EXPECT_EQ(ra.num_workers, 1);

  EXPECT_EQ(ra.epochs[0].train_loss, rb.epochs[0].train_loss);
  const auto wa = a.model().host_state_dict();
  const auto wb = b.model().host_state_dict();
  ASSERT_EQ(wa.size(), wb.size());
  for (size_t i = 0; i < wa.size(); ++i)
    EXPECT_EQ(std::memcmp(wa[i].tensor.raw_data(), wb[i].tensor.raw_data(), wa[i].tensor.nbytes()), 0) << wa[i].name;
}

TEST(TrainerPipeline, SummaryNamesTheInputForASlowDataset) {
  const train::TrainConfig c = config("virt:7?speed=1&latency_us=0");
  train::Trainer t(c, std::make_shared<data::SyntheticDataset>(480, 1, 1000us), std::make_shared<data::SyntheticDataset>(64, 2, 0us));
  const profile::Summary s = traced_fit(t, c);
  EXPECT_EQ(s.steps, 30);
  EXPECT_EQ(s.limiting_stage, "input") << s.text();
  EXPECT_GT(s.data_wait_share, 0.5) << s.text();
  EXPECT_NE(s.advice.find("--num-workers (now 1"), std::string::npos) << s.advice;
}

TEST(TrainerPipeline, SummaryNamesComputeForASlowDevice) {
  if (kThreadSanitizer)
    GTEST_SKIP() << "timing: under ThreadSanitizer the instrumented host optimizer, not the slowed device, "
                    "limits the step";
  const train::TrainConfig c = config("virt:7?speed=0.05&latency_us=0");
  train::Trainer t(c, std::make_shared<data::SyntheticDataset>(480, 1, 0us), std::make_shared<data::SyntheticDataset>(64, 2, 0us));
  const profile::Summary s = traced_fit(t, c);
  EXPECT_EQ(s.limiting_stage, "compute") << s.text();
  EXPECT_LT(s.data_wait_share, 0.10) << s.text();
  EXPECT_LT(s.device_idle_share, 0.30) << s.text();
}

TEST(TrainerPipeline, SummaryCountsTheDeviceWorkOfTheRunAhead) {
  if (kThreadSanitizer)
    GTEST_SKIP() << "timing: under ThreadSanitizer the instrumented host optimizer, not the slowed device, "
                    "limits the step";
  // Read-back only at the epoch's end (K = 1000 > 30 steps): the host enqueues every step at
  // once and waits for the device after the last one. The steps must still add up to the
  // epoch and the run must read as compute-bound, not as a host with nothing to do.
  train::TrainConfig c = config("virt:7?speed=0.05&latency_us=0");
  c.log_interval = 1000;
  train::Trainer t(c, std::make_shared<data::SyntheticDataset>(480, 1, 0us), std::make_shared<data::SyntheticDataset>(64, 2, 0us));
  const Traced run = traced_run(t, c);
  const profile::Summary& s = run.summary;
  const train::TrainResult& r = run.result;
  ASSERT_EQ(s.steps, 30);
  EXPECT_EQ(s.limiting_stage, "compute") << s.text();
  EXPECT_GT(s.step_seconds * s.steps, 0.9 * r.epochs[0].seconds) << s.text();
  EXPECT_LT(s.device_idle_share, 0.30) << s.text();
}

TEST(TrainerPipeline, PinnedPoolIsFlatAfterTheFirstEpochWithDeepPrefetch) {
  train::TrainConfig c = config("virt:7?speed=1&latency_us=200");
  c.epochs = 5;
  c.num_workers = 4;
  c.prefetch_factor = 8;
  pinned_allocator().empty_cache();
  std::vector<size_t> reserved;
  train::TrainCallbacks cb;
  cb.on_epoch_end = [&](const train::EpochStats&) { reserved.push_back(pinned_allocator().stats().reserved_bytes); };
  train::Trainer t(c, std::make_shared<data::SyntheticDataset>(320, 1, 0us), std::make_shared<data::SyntheticDataset>(64, 2, 0us));
  t.fit(cb);
  ASSERT_EQ(reserved.size(), 5u);
  EXPECT_GT(reserved[0], 0u);
  for (size_t e = 1; e < reserved.size(); ++e) EXPECT_EQ(reserved[e], reserved[0]) << "after epoch " << e + 1;
}

TEST(TrainerPipeline, ComputeBoundStepLoopWaitsOnTheDeviceOnlyAtTheReadBack) {
  // 60 steps of 16 samples on a slow device with the read-back every 5 steps: the host runs
  // ahead, so it must be throttled somewhere -- and the only place allowed is the read-back.
  train::TrainConfig c = config("virt:7?speed=0.05&latency_us=0");
  c.log_interval = 5;
  train::Trainer t(c, std::make_shared<data::SyntheticDataset>(960, 1, 0us), std::make_shared<data::SyntheticDataset>(64, 2, 0us));
  const Traced run = traced_run(t, c);
  int train_track = -1, compute_tracks = 0, copy_tracks = 0;
  for (const auto& tr : run.tracks) {
    if (tr.name == "train") train_track = tr.id;
    compute_tracks += tr.is_stream && tr.name == "virt:7 stream 0 (compute)";
    copy_tracks += tr.is_stream && tr.name.find(" (loader h2d copies)") != std::string::npos;
  }
  ASSERT_GE(train_track, 0);
  EXPECT_EQ(compute_tracks, 1);  // stream tracks are named by role
  EXPECT_GE(copy_tracks, 1);
  std::vector<profile::Profiler::Span> steps, readbacks;
  for (const auto& sp : run.spans) {
    const std::string name = sp.name;
    EXPECT_NE(name, "wait for compute");  // on any track
    EXPECT_NE(name, "wait for copy");
    if (sp.track != train_track) continue;
    if (sp.stage == profile::Stage::step) steps.push_back(sp);
    if (sp.stage == profile::Stage::wait_device) {
      EXPECT_EQ(name, "metrics read-back");
      readbacks.push_back(sp);
    }
  }
  ASSERT_EQ(steps.size(), 60u);
  std::sort(steps.begin(), steps.end(), [](const auto& a, const auto& b) { return a.begin_ns < b.begin_ns; });
  // The device is the bottleneck (each step about 20x slower than on the cpu), so the host
  // catches up with the read-back at least once; every such wait inside a step is at a
  // K-step boundary (step 5, 10, ...) or is the last step's drain. Waits outside steps: evaluation.
  int inside = 0;
  for (const auto& r : readbacks) {
    for (size_t i = 0; i < steps.size(); ++i) {
      if (r.begin_ns >= steps[i].begin_ns && r.end_ns <= steps[i].end_ns) {
        // The last step ends when the epoch's read-backs are in (it holds the final drain).
        EXPECT_TRUE((i + 1) % 5 == 0 || i + 1 == steps.size()) << "read-back wait inside step " << i + 1;
        ++inside;
      }
    }
  }
  EXPECT_GE(inside, 1);
}
