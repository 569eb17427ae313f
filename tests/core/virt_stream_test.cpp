// Virt streams and events: ordering, events, cross-stream waits, error propagation, shutdown.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <thread>
#include <vector>

#include "tandem/error.h"
#include "tandem/stream.h"
#include "virt_test_util.h"

using namespace tandem;
using tandem::testing::Gate;

namespace {
Runtime& virt_rt() {
  return runtime(DeviceKind::virt);
}
}  // namespace

TEST(VirtStream, RunsWorkInOrderOnItsOwnThread) {
  Stream s = virt_rt().new_stream(0);
  EXPECT_EQ(s.device(), Device(DeviceKind::virt, 0));
  std::vector<int> order;
  std::thread::id worker;
  for (int i = 0; i < 1000; ++i) s.enqueue([&order, i] { order.push_back(i); });
  s.enqueue([&worker] { worker = std::this_thread::get_id(); });
  s.synchronize();
  ASSERT_EQ(order.size(), 1000u);
  for (int i = 0; i < 1000; ++i) ASSERT_EQ(order[static_cast<size_t>(i)], i);
  EXPECT_NE(worker, std::this_thread::get_id());
}

TEST(VirtStream, EventCompletesOnlyAfterTheWorkBeforeIt) {
  Stream s = virt_rt().new_stream(0);
  Gate gate;
  std::atomic<int> value{0};
  gate.hold(s);
  s.enqueue([&value] { value = 42; });
  Event e = s.record();
  EXPECT_FALSE(e.query());
  EXPECT_EQ(value.load(), 0);
  gate.open();
  e.synchronize();
  EXPECT_TRUE(e.query());
  EXPECT_EQ(value.load(), 42);
}

TEST(VirtStream, CrossStreamWaitSeesTheOtherStreamsResults) {
  Stream s1 = virt_rt().new_stream(0);
  Stream s2 = virt_rt().new_stream(0);
  Gate gate;
  std::vector<float> buffer(1024, 0.0f);
  std::vector<float> seen;
  gate.hold(s1);
  s1.enqueue([&buffer] {
    for (size_t i = 0; i < buffer.size(); ++i) buffer[i] = static_cast<float>(i) * 0.5f;
  });
  Event produced = s1.record();
  s2.wait(produced);  // returns at once: the host is not blocked
  s2.enqueue([&buffer, &seen] { seen = buffer; });
  Event consumed = s2.record();
  EXPECT_FALSE(consumed.query());  // s2 is held back by s1, which is held by the gate
  gate.open();
  s2.synchronize();
  EXPECT_TRUE(produced.query());
  ASSERT_EQ(seen.size(), buffer.size());
  for (size_t i = 0; i < seen.size(); ++i) ASSERT_EQ(seen[i], static_cast<float>(i) * 0.5f);
}

TEST(VirtStream, ErrorsInWorkItemsSurfaceAtSynchronize) {
  Stream s = virt_rt().new_stream(0);
  std::atomic<bool> later_ran{false};
  s.enqueue([] { throw_error(ErrorCode::numerical, "kernel", "first failure"); });
  s.enqueue([] { throw_error(ErrorCode::internal, "kernel", "second failure"); });
  s.enqueue([&later_ran] { later_ran = true; });
  Event e = s.record();
  e.synchronize();  // events still complete after a failed item
  EXPECT_TRUE(later_ran.load());
  try {
    s.synchronize();
    FAIL() << "synchronize() should rethrow the work item's error";
  } catch (const Error& err) {
    EXPECT_EQ(err.code(), ErrorCode::numerical);
    EXPECT_STREQ(err.what(), "[kernel] first failure");
  }
  EXPECT_NO_THROW(s.synchronize());  // reported once
  s.enqueue([] { throw std::out_of_range("plain exception"); });
  EXPECT_THROW(s.synchronize(), std::out_of_range);
}

TEST(VirtStream, DestroyingAStreamWithQueuedWorkRunsItAndDoesNotHang) {
  std::atomic<int> ran{0};
  {
    Stream s = virt_rt().new_stream(0);
    Gate gate;
    gate.hold(s);
    for (int i = 0; i < 500; ++i) s.enqueue([&ran] { ++ran; });
    // gate opens first (declared last), then the stream drains and joins
  }
  EXPECT_EQ(ran.load(), 500);
}

TEST(VirtStream, StreamDroppedByItsOwnWorkItemShutsDown) {
  std::promise<void> done;
  auto finished = done.get_future();
  {
    Stream s = virt_rt().new_stream(0);
    Gate gate;
    gate.hold(s);
    // the only remaining handle lives in a work item: the stream is destroyed on its worker
    s.enqueue([s, &done] { done.set_value(); });
  }
  // Bounded: a stream that deadlocked on its own worker fails here instead of hanging the suite.
  ASSERT_EQ(finished.wait_for(std::chrono::seconds(30)), std::future_status::ready)
      << "the work item holding the last handle never finished";
  // The worker that destroyed its own stream is still serving: a new stream runs work.
  std::promise<int> again;
  auto value = again.get_future();
  Stream t = virt_rt().new_stream(0);
  t.enqueue([&again] { again.set_value(7); });
  ASSERT_EQ(value.wait_for(std::chrono::seconds(30)), std::future_status::ready);
  EXPECT_EQ(value.get(), 7);
}

TEST(VirtStream, DefaultStreamIsSharedAndWaitsOnHostEvents) {
  Stream a = virt_rt().default_stream(0);
  Stream b = virt_rt().default_stream(0);
  EXPECT_EQ(a.impl(), b.impl());
  // an event of the cpu runtime is complete when recorded; waiting on it is a no-op
  Event cpu_event = runtime(DeviceKind::cpu).default_stream(0).record();
  a.wait(cpu_event);
  int x = 0;
  a.enqueue([&x] { x = 7; });
  a.synchronize();
  EXPECT_EQ(x, 7);
  Event never_recorded;
  EXPECT_TRUE(never_recorded.query());
}
