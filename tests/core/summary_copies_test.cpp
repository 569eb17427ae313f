// profile::summarize on hand-made spans: the copies' per-step times in each direction, the
// share of their time hidden behind the busiest stream's compute, the host optimizer's time,
// and the advice of a run whose parameters are streamed (--param-device cpu): transfer-bound
// when the link is the busiest resource, optimizer-bound when the host update dominates.
#include <gtest/gtest.h>

#include <vector>

#include "tandem/profile/summary.h"

namespace tandem::profile {
namespace {

constexpr int64_t kMs = 1000000;
using Span = Profiler::Span;

// Tracks: 0 the training thread, 1 the compute stream, 2 uploads, 3 downloads.
std::vector<Profiler::Track> tracks() {
  return {{0, "train", false}, {1, "compute", true}, {2, "uploads", true}, {3, "downloads", true}};
}

// Two 10 ms steps. Per step: compute 2..6 ms; an upload 0..4 ms (half of it under compute) and
// a download 5..7 ms (half under compute); `opt_ms` of host optimizer at the step's end.
std::vector<Span> two_steps(int64_t opt_ms, int64_t up_ms = 4) {
  std::vector<Span> s;
  for (int64_t k = 0; k < 2; ++k) {
    const int64_t t = k * 10 * kMs;
    s.push_back({0, Stage::step, "step", t, t + 10 * kMs});
    s.push_back({1, Stage::forward, "compute", t + 2 * kMs, t + 6 * kMs});
    s.push_back({2, Stage::h2d, "up", t, t + up_ms * kMs});
    s.push_back({3, Stage::d2h, "down", t + 5 * kMs, t + 7 * kMs});
    if (opt_ms > 0) {  // a wait nested in it counts once
      s.push_back({0, Stage::optimizer, "optimizer", t + (10 - opt_ms) * kMs, t + 10 * kMs});
      s.push_back({0, Stage::optimizer, "wait", t + (10 - opt_ms) * kMs, t + 10 * kMs - kMs / 2});
    }
  }
  return s;
}

TEST(SummaryCopies, HiddenShareAndPerDirectionTimes) {
  const Summary s = summarize(two_steps(1), tracks(), SummaryOptions{});
  ASSERT_EQ(s.steps, 2);
  EXPECT_NEAR(s.h2d_seconds, 4e-3, 1e-9);
  EXPECT_NEAR(s.d2h_seconds, 2e-3, 1e-9);
  EXPECT_NEAR(s.transfer_seconds, 4e-3, 1e-9);
  EXPECT_NEAR(s.compute_seconds, 4e-3, 1e-9);
  // Hidden: 2 ms of the upload and 1 ms of the download, of 6 ms of copies.
  EXPECT_NEAR(s.hidden_share, 0.5, 1e-9);
  EXPECT_NEAR(s.host_optimizer_seconds, 1e-3, 1e-9);
  EXPECT_EQ(s.host_optimizer_track, "train");
  EXPECT_NE(s.text().find("copies per step: h2d 4.00 ms, d2h 2.00 ms, 50% of their time hidden behind compute"),
            std::string::npos)
      << s.text();
}

TEST(SummaryCopies, StreamedParametersNameTheLinkOrTheHostOptimizer) {
  SummaryOptions o;
  o.params_streamed = true;
  const Summary link = summarize(two_steps(1, 7), tracks(), o);  // uploads 7 ms of 10: the busiest
  EXPECT_EQ(link.limiting_stage, "transfer") << link.text();
  EXPECT_NE(link.advice.find("streaming the parameters (--param-device cpu)"), std::string::npos) << link.advice;
  EXPECT_NE(link.advice.find("--precision bf16"), std::string::npos) << link.advice;
  const Summary opt = summarize(two_steps(3), tracks(), o);  // host optimizer 3 ms of 10
  EXPECT_EQ(opt.limiting_stage, "optimizer") << opt.text();
  EXPECT_NE(opt.advice.find("the host optimizer"), std::string::npos) << opt.advice;
  EXPECT_NE(opt.advice.find("--offload-delay 1 would overlap them"), std::string::npos) << opt.advice;
  o.update_delayed = true;  // the update already overlaps the next step: the advice says so
  const Summary delayed = summarize(two_steps(3), tracks(), o);
  EXPECT_EQ(delayed.limiting_stage, "optimizer") << delayed.text();
  EXPECT_NE(delayed.advice.find("overlaps the next step (--offload-delay 1)"), std::string::npos) << delayed.advice;
  o.update_delayed = false;
  // Without streaming the same spans give the batch-copy advice, which names no parameters.
  const Summary plain = summarize(two_steps(1, 7), tracks(), SummaryOptions{});
  EXPECT_EQ(plain.limiting_stage, "transfer") << plain.text();
  EXPECT_EQ(plain.advice.find("--param-device"), std::string::npos) << plain.advice;
}

// The training thread waiting inside its optimizer span (for the host update thread, for the
// device's backward) is no optimizer work: only the update thread's own spans count.
TEST(SummaryCopies, AWaitInsideTheOptimizerSpanIsNotTheOptimizer) {
  std::vector<Span> spans = two_steps(0);
  std::vector<Profiler::Track> t = tracks();
  t.push_back({4, "host update", false});
  for (int64_t k = 0; k < 2; ++k) {
    const int64_t base = k * 10 * kMs;
    spans.push_back({0, Stage::optimizer, "optimizer", base + 7 * kMs, base + 10 * kMs});
    spans.push_back({0, Stage::wait_device, "host update: wait", base + 7 * kMs, base + 9 * kMs + kMs / 2});
    spans.push_back({4, Stage::optimizer, "host update: block", base + 8 * kMs, base + 9 * kMs});
  }
  SummaryOptions o;
  o.params_streamed = true;
  const Summary s = summarize(spans, t, o);
  EXPECT_NEAR(s.host_optimizer_seconds, 1e-3, 1e-9) << s.text();  // the update thread's 1 ms
  EXPECT_EQ(s.host_optimizer_track, "host update");
  EXPECT_NE(s.limiting_stage, "optimizer") << s.text();
}

}  // namespace
}  // namespace tandem::profile
