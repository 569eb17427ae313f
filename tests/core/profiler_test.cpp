// Profiler recording and virt device spans: ScopedSpan records host spans and tags the device
// work enqueued inside it; a virt stream records consecutive items of one tag as one span on
// its own track, splits at a change of tag and at idle time, tags copies h2d / d2h by
// direction, includes the throttle's slowdown in a span, records nothing while disabled; the
// Chrome trace puts host threads and device streams in separate processes with one track each.
#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tandem/profile/profiler.h"
#include "tandem/tensor.h"
#include "tandem/virt.h"
#include "virt_test_util.h"

using namespace tandem;
using namespace tandem::profile;
using tandem::testing::Gate;

namespace {

// Enables the profiler for one test, starting from no spans; disables it afterwards.
class ProfilerOn {
 public:
  ProfilerOn() {
    Profiler::global().clear();
    Profiler::global().set_enabled(true);
  }
  ~ProfilerOn() {
    Profiler::global().set_enabled(false);
    Profiler::global().clear();
  }
};

std::string track_name(int id) {
  for (const auto& t : Profiler::global().tracks())
    if (t.id == id) return t.name;
  return "?";
}

// Spans on tracks whose name is `name`.
std::vector<Profiler::Span> spans_on(const std::string& name) {
  std::vector<Profiler::Span> out;
  for (const auto& s : Profiler::global().spans())
    if (track_name(s.track) == name) out.push_back(s);
  return out;
}

// A stream of virt device 4, which no other test uses; each test records on one of them.
Stream new_stream() {
  configure_virt(DeviceSpec::parse("virt:4"));  // makes the device exist
  return runtime(DeviceKind::virt).new_stream(4);
}

// Spans on the stream tracks of virt:4, all on one track.
std::vector<Profiler::Span> device_spans() {
  std::vector<Profiler::Span> out;
  for (const auto& s : Profiler::global().spans()) {
    if (track_name(s.track).rfind("virt:4 stream ", 0) != 0) continue;
    EXPECT_TRUE(out.empty() || out.front().track == s.track);
    out.push_back(s);
  }
  return out;
}

}  // namespace

TEST(Profiler, ScopedSpanRecordsAndTagsOnlyWhileEnabled) {
  Profiler::global().clear();
  {
    ScopedSpan off(Stage::forward, "forward");
    EXPECT_EQ(current_tag().name, nullptr);  // disabled: no tag, no span
  }
  EXPECT_TRUE(Profiler::global().spans().empty());
  ProfilerOn on;
  Profiler::global().name_this_thread("profiler test");
  {
    ScopedSpan outer(Stage::forward, "forward");
    EXPECT_EQ(current_tag().stage, Stage::forward);
    {
      TagScope tag(Stage::d2h, "read back");
      EXPECT_EQ(current_tag().stage, Stage::d2h);
      EXPECT_STREQ(current_tag().name, "read back");
    }
    ScopedSpan inner(Stage::backward, "backward");
    EXPECT_STREQ(current_tag().name, "backward");
  }
  EXPECT_EQ(current_tag().name, nullptr);
  const auto spans = spans_on("profiler test");
  ASSERT_EQ(spans.size(), 2u);  // inner, then outer (a TagScope records nothing)
  EXPECT_EQ(spans[0].stage, Stage::backward);
  EXPECT_EQ(spans[1].stage, Stage::forward);
  EXPECT_LE(spans[1].begin_ns, spans[0].begin_ns);
  EXPECT_GE(spans[1].end_ns, spans[0].end_ns);
}

TEST(Profiler, VirtStreamMergesConsecutiveItemsOfOneTag) {
  Stream s = new_stream();
  ProfilerOn on;
  Gate gate;
  {
    // The gate is enqueued before the profiler tag: it holds the stream so that every item
    // below is queued when the one before it finishes.
    TagScope tag(Stage::other, "gate");
    gate.hold(s);
  }
  int64_t host_after_enqueue;
  {
    ScopedSpan f(Stage::forward, "forward");
    for (int i = 0; i < 5; ++i) s.enqueue([] {});
  }
  {
    ScopedSpan b(Stage::backward, "backward");
    for (int i = 0; i < 3; ++i) s.enqueue([] {});
    host_after_enqueue = now_ns();
  }
  gate.open();
  s.synchronize();
  const auto spans = device_spans();
  ASSERT_EQ(spans.size(), 3u);  // gate, forward x5 merged, backward x3 merged
  EXPECT_STREQ(spans[0].name, "gate");
  EXPECT_EQ(spans[1].stage, Stage::forward);
  EXPECT_STREQ(spans[1].name, "forward");
  EXPECT_EQ(spans[2].stage, Stage::backward);
  EXPECT_LE(spans[0].end_ns, spans[1].begin_ns);
  EXPECT_LE(spans[1].end_ns, spans[2].begin_ns);
  EXPECT_GE(spans[1].begin_ns, host_after_enqueue);  // they ran after the gate opened
  for (const auto& t : Profiler::global().tracks()) {
    if (t.id == spans[0].track) {
      EXPECT_TRUE(t.is_stream);
    }
  }
}

TEST(Profiler, IdleTimeSplitsSpansAndUntaggedWorkIsDeviceWork) {
  Stream s = new_stream();
  ProfilerOn on;
  {
    ScopedSpan f(Stage::forward, "forward");
    s.enqueue([] {});
    s.synchronize();  // the stream goes idle
    s.enqueue([] {});
    s.synchronize();
  }
  s.enqueue([] {});
  s.synchronize();
  const auto spans = device_spans();
  ASSERT_EQ(spans.size(), 3u);
  EXPECT_EQ(spans[0].stage, Stage::forward);
  EXPECT_EQ(spans[1].stage, Stage::forward);
  EXPECT_LE(spans[0].end_ns, spans[1].begin_ns);
  EXPECT_EQ(spans[2].stage, Stage::other);
  EXPECT_STREQ(spans[2].name, "device work");
}

TEST(Profiler, CopiesAreTaggedByDirection) {
  Stream s = new_stream();
  Runtime& rt = runtime(DeviceKind::virt);
  const Device dev{DeviceKind::virt, 4};
  Tensor host = Tensor::zeros({256}, DType::f32, Device{});
  Tensor d = Tensor::empty({256}, DType::f32, dev);
  ProfilerOn on;
  rt.copy_async(d.raw_data(), dev, host.raw_data(), Device{}, host.nbytes(), s);
  s.synchronize();
  rt.copy_async(host.raw_data(), Device{}, d.raw_data(), dev, host.nbytes(), s);
  s.synchronize();
  const auto spans = device_spans();
  ASSERT_EQ(spans.size(), 2u);
  EXPECT_EQ(spans[0].stage, Stage::h2d);
  EXPECT_STREQ(spans[0].name, "h2d copy");
  EXPECT_EQ(spans[1].stage, Stage::d2h);
}

TEST(Profiler, ThrottledItemSpanIncludesTheSlowdown) {
  // speed 0.25: after an item that ran r seconds the worker sleeps 3r, so its span lasts >= 4r.
  configure_virt(DeviceSpec::parse("virt:4?speed=0.25"));
  Stream s = new_stream();
  ProfilerOn on;
  int64_t ran_ns = 0;
  {
    ScopedSpan f(Stage::forward, "forward");
    s.enqueue([&ran_ns] {
      const int64_t t0 = now_ns();
      volatile double x = 0;
      for (int i = 0; i < 200000; ++i) x = x + 1e-9 * i;
      ran_ns = now_ns() - t0;
    });
  }
  s.synchronize();
  configure_virt(DeviceSpec::parse("virt:4?speed=1"));
  const auto spans = device_spans();
  ASSERT_EQ(spans.size(), 1u);
  EXPECT_GE(spans[0].end_ns - spans[0].begin_ns, 4 * ran_ns);
}

TEST(Profiler, NothingIsRecordedWhileDisabled) {
  Stream s = new_stream();
  Profiler::global().clear();
  {
    ScopedSpan f(Stage::forward, "forward");
    s.enqueue([] {});
  }
  s.synchronize();
  EXPECT_TRUE(device_spans().empty());
  EXPECT_TRUE(Profiler::global().spans().empty());
}

TEST(Profiler, ChromeTraceHasOneTrackPerThreadAndStream) {
  Stream s = new_stream();
  ProfilerOn on;
  Profiler::global().name_this_thread("trace test");
  {
    ScopedSpan f(Stage::forward, "forward");
    s.enqueue([] {});
  }
  s.synchronize();
  const std::string path = ::testing::TempDir() + "profiler_test_trace.json";
  Profiler::global().write_chrome_trace(path);
  std::ifstream in(path);
  const nlohmann::json doc = nlohmann::json::parse(in);
  int host_tid = -1, stream_tid = -1;
  for (const auto& e : doc["traceEvents"]) {
    if (e["ph"] != "M" || e["name"] != "thread_name") continue;
    if (e["args"]["name"] == "trace test") {
      EXPECT_EQ(e["pid"], 1);
      host_tid = e["tid"];
    }
    if (e["args"]["name"].get<std::string>().rfind("virt:4 stream ", 0) == 0 && e["tid"] == device_spans()[0].track) {
      EXPECT_EQ(e["pid"], 2);
      stream_tid = e["tid"];
    }
  }
  ASSERT_GE(host_tid, 0);
  ASSERT_GE(stream_tid, 0);
  double host_begin = -1, host_end = -1, dev_begin = -1;
  for (const auto& e : doc["traceEvents"]) {
    if (e["ph"] != "X") continue;
    if (e["tid"] == host_tid && e["name"] == "forward") {
      host_begin = e["ts"];
      host_end = host_begin + e["dur"].get<double>();
    }
    if (e["tid"] == stream_tid) {
      EXPECT_EQ(e["cat"], "forward");
      dev_begin = e["ts"];
    }
  }
  ASSERT_GE(host_begin, 0);
  ASSERT_GE(dev_begin, 0);
  EXPECT_GE(dev_begin, host_begin);  // the device ran the work after the host enqueued it
  EXPECT_GT(host_end, host_begin);
  std::remove(path.c_str());
}
