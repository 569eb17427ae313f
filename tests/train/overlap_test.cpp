// The input pipeline overlaps with compute, and the profiler says which stage limits a run.
// On a virt device throttled with sleeps (dataset sleeps per sample, copies have latency,
// compute runs at a fraction of its speed), so that a loaded 2-core machine changes little:
//  - input-bound (a slow dataset): the summary names the input and the num_workers knob;
//  - compute-bound (virt speed 0.02): the summary names compute, data waits stay small even
//    though the host is held back by the device (waits for copies are not waits for data);
//  - balanced stages: the mean step hides at least half of the non-limiting stages' time,
//    i.e. step <= max + (sum - max) / 2 of the stages' busy times per step (measured from the
//    same spans, so noise that slows one stage moves both sides);
//  - the Chrome trace has one track per thread and per stream, loader spans on worker tracks,
//    copies on the copy stream, device compute spans on the compute stream inside the run's
//    steps, and the host's forward/backward/optimizer spans nested in its step spans.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <map>
#include <set>

#include <nlohmann/json.hpp>

#include "train/pipeline_run.h"

using namespace tandem;
using namespace tandem::testing;
using namespace std::chrono_literals;
using profile::Stage;

TEST(Overlap, InputBoundRunIsAttributedToTheInput) {
  PipelineRun run;
  run.device = "virt:6?speed=1&latency_us=100";
  run.dataset = std::make_shared<TenClassDataset>(1024, 1000us);  // 16 ms per batch per worker
  run.num_workers = 1;
  run.steps = 25;
  const PipelineResult r = run_pipeline(run);
  const profile::Summary& s = r.summary;
  ASSERT_EQ(s.steps, 25);
  EXPECT_EQ(s.limiting_stage, "input") << s.text();
  EXPECT_GT(s.data_wait_share, 0.5) << s.text();
  EXPECT_NE(s.advice.find("input-bound"), std::string::npos) << s.advice;
  EXPECT_NE(s.advice.find("--num-workers (now 1, CPU has 2 cores)"), std::string::npos) << s.advice;
  // Reading the samples is the slow part (the dataset sleeps in get()): packed shards are the remedy.
  EXPECT_NE(s.advice.find("or use a packed dataset (tandem pack)"), std::string::npos) << s.advice;
  EXPECT_GT(s.device_idle_share, 0.5) << s.text();
  // The loader's busy time per step covers the sleeps: 16 samples x 1 ms.
  EXPECT_GE(s.input_seconds, 0.016) << s.text();
  EXPECT_GE(s.load_seconds, 0.016) << s.text();
}

TEST(Overlap, ComputeBoundRunIsAttributedToCompute) {
  PipelineRun run;
  run.device = "virt:6?speed=0.02&latency_us=100";
  run.dataset = std::make_shared<TenClassDataset>(1024, 0us);
  run.num_workers = 1;
  run.steps = 25;
  const PipelineResult r = run_pipeline(run);
  const profile::Summary& s = r.summary;
  ASSERT_EQ(s.steps, 25);
  EXPECT_EQ(s.limiting_stage, "compute") << s.text();
  EXPECT_TRUE(s.has_device);
  EXPECT_LT(s.data_wait_share, 0.10) << s.text();
  EXPECT_LT(s.device_idle_share, 0.30) << s.text();
  EXPECT_NE(s.advice.find("compute-bound"), std::string::npos) << s.advice;
  EXPECT_GT(s.compute_seconds, 5 * s.input_seconds) << s.text();
}

TEST(Overlap, StepTimeIsWellBelowTheSumOfTheStages) {
  // Input ~10 ms per batch (16 x 625 us), two copies of 4 ms each, compute slowed 40x: three
  // stages of similar size. Run one after the other they would take their sum.
  PipelineRun run;
  run.device = "virt:6?speed=0.025&latency_us=4000";
  run.dataset = std::make_shared<TenClassDataset>(1024, 625us);
  run.num_workers = 1;
  run.steps = 30;
  const PipelineResult r = run_pipeline(run);
  const profile::Summary& s = r.summary;
  const double sum = s.input_seconds + s.h2d_seconds + s.compute_seconds;
  const double slowest = std::max({s.input_seconds, s.h2d_seconds, s.compute_seconds});
  EXPECT_GT(s.h2d_seconds, 0.006) << s.text();
  EXPECT_LT(s.step_seconds, slowest + 0.5 * (sum - slowest)) << s.text();
  EXPECT_GT(s.overlap_efficiency, 0.5) << s.text();
}

TEST(Overlap, TraceHasATrackPerThreadAndStreamAndNestsSpans) {
  const std::string path = ::testing::TempDir() + "overlap_trace.json";
  PipelineRun run;
  run.device = "virt:6?speed=0.2&latency_us=500";
  run.dataset = std::make_shared<TenClassDataset>(1024, 200us);
  run.num_workers = 2;
  run.steps = 12;
  run.trace = path;
  const PipelineResult r = run_pipeline(run);
  std::ifstream in(path);
  const nlohmann::json doc = nlohmann::json::parse(in);
  std::remove(path.c_str());

  std::map<int, std::string> track;  // tid -> name
  std::map<int, int> pid;
  for (const auto& e : doc["traceEvents"]) {
    if (e["ph"] == "M" && e["name"] == "thread_name") {
      track[e["tid"].get<int>()] = e["args"]["name"];
      pid[e["tid"].get<int>()] = e["pid"];
    }
  }
  struct Span {
    double b, e;
    std::string cat, name;
  };
  std::map<std::string, std::vector<Span>> by_track;
  for (const auto& e : doc["traceEvents"]) {
    if (e["ph"] != "X") continue;
    const double b = e["ts"].get<double>();
    by_track[track.at(e["tid"].get<int>())].push_back({b, b + e["dur"].get<double>(), e["cat"], e["name"]});
  }
  // Tracks: train, two loader workers (pid 1), the compute stream and the copy stream (pid 2).
  ASSERT_TRUE(by_track.count("train"));
  ASSERT_TRUE(by_track.count("loader worker 0"));
  ASSERT_TRUE(by_track.count("loader worker 1"));
  const std::string compute = "virt:6 stream 0";
  ASSERT_TRUE(by_track.count(compute));
  std::string copy;
  for (const auto& [name, spans] : by_track)
    if (name.rfind("virt:6 stream ", 0) == 0 && name != compute) copy = name;
  ASSERT_FALSE(copy.empty());
  for (const auto& [tid, name] : track) {
    if (!by_track.count(name)) continue;
    EXPECT_EQ(pid[tid], name.rfind("virt:", 0) == 0 ? 2 : 1) << name;
  }
  // Loader stages only on worker tracks; copies only on the copy stream; device compute only
  // on the compute stream.
  const std::set<std::string> input{"load", "augment", "collate"}, device{"forward", "backward", "optimizer"};
  for (const auto& [name, spans] : by_track) {
    for (const Span& sp : spans) {
      const bool on_stream = name.rfind("virt:", 0) == 0;
      EXPECT_TRUE(!input.count(sp.cat) || name.rfind("loader worker ", 0) == 0) << name << " " << sp.cat;
      EXPECT_TRUE(sp.cat != "h2d" || name == copy) << name;
      EXPECT_TRUE(!device.count(sp.cat) || !on_stream || name == compute) << name << " " << sp.cat;
    }
  }
  for (const char* stage : {"load", "augment", "collate"}) {
    EXPECT_TRUE(std::any_of(by_track["loader worker 0"].begin(), by_track["loader worker 0"].end(),
                            [&](const Span& sp) { return sp.cat == stage; }))
        << stage;
  }
  // Steps on the training thread; its forward/backward/optimizer spans lie inside them.
  std::vector<Span> steps;
  for (const Span& sp : by_track["train"])
    if (sp.cat == "step") steps.push_back(sp);
  ASSERT_EQ(steps.size(), 12u);
  std::sort(steps.begin(), steps.end(), [](const Span& a, const Span& b) { return a.b < b.b; });
  for (const Span& sp : by_track["train"]) {
    if (!device.count(sp.cat)) continue;
    EXPECT_TRUE(std::any_of(steps.begin(), steps.end(), [&](const Span& st) { return st.b <= sp.b && sp.e <= st.e; }))
        << sp.cat << " at " << sp.b;
  }
  // Device compute spans: one or more per stage and step, each starting after the host began
  // the step that enqueued it (so after the first step began), and none before the first step.
  int forward = 0;
  for (const Span& sp : by_track[compute]) {
    if (!device.count(sp.cat)) continue;
    forward += sp.cat == "forward";
    EXPECT_GE(sp.b, steps.front().b) << sp.cat;
  }
  EXPECT_GE(forward, 12);
  // The device trails the host: its last span ends after the last host step began.
  double last_end = 0;
  for (const Span& sp : by_track[compute]) last_end = std::max(last_end, sp.e);
  EXPECT_GE(last_end, steps.back().b);
  EXPECT_EQ(r.summary.steps, 12);
}
