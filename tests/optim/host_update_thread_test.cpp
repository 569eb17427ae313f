// HostUpdateThread (tandem/optim/host_update_thread.h), the thread of both host-update
// pipelines: tasks run in order; the first error is kept, the tasks after it skip their work
// until it is taken; waiters wake at locked() and at an error; stopping runs what is queued
// once (with skip set) and nothing after.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <stdexcept>
#include <thread>
#include <vector>

#include "tandem/optim/host_update_thread.h"

namespace tandem::optim {
namespace {

TEST(HostUpdateThread, TasksRunInOrderAndWaitIdleSeesThemAll) {
  HostUpdateThread t("test", 1);
  std::vector<int> order;
  for (int i = 0; i < 50; ++i)
    t.push([&order, i](bool skip) {
      if (!skip) order.push_back(i);
    });
  t.wait_idle();
  ASSERT_EQ(order.size(), 50u);
  for (int i = 0; i < 50; ++i) EXPECT_EQ(order[static_cast<size_t>(i)], i);
  EXPECT_EQ(t.pushed(), 50u);
  EXPECT_EQ(t.done(), 50u);
}

TEST(HostUpdateThread, AnErrorIsKeptAndLaterTasksSkipUntilItIsTaken) {
  HostUpdateThread t("test");
  std::vector<int> ran, skipped;
  t.push([](bool) { throw std::runtime_error("injected"); });
  t.push([&](bool skip) { (skip ? skipped : ran).push_back(1); });
  t.wait_idle();
  EXPECT_EQ(ran, std::vector<int>{});
  EXPECT_EQ(skipped, std::vector<int>{1});
  std::exception_ptr e = t.error();
  ASSERT_TRUE(e);
  EXPECT_THROW(std::rethrow_exception(e), std::runtime_error);
  EXPECT_TRUE(t.take_error());
  EXPECT_FALSE(t.error());
  t.push([&](bool skip) { (skip ? skipped : ran).push_back(2); });
  t.wait_idle();
  EXPECT_EQ(ran, std::vector<int>{2});
}

TEST(HostUpdateThread, WaitWakesAtLockedAndAtAnError) {
  HostUpdateThread t("test");
  bool ready = false;  // under the thread's mutex
  t.push([&](bool) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    t.locked([&] { ready = true; });
  });
  EXPECT_FALSE(t.wait([&] { return ready; }));
  EXPECT_TRUE(ready);
  // An error ends a wait that stops at errors; one that does not waits for its condition.
  bool never = false;
  t.push([](bool) { throw std::runtime_error("injected"); });
  EXPECT_TRUE(t.wait([&] { return never; }));
  t.push([&](bool skip) { t.locked([&] { never = skip; }); });
  EXPECT_TRUE(t.wait([&] { return never; }, false));  // the skipped task set it
  EXPECT_TRUE(never);
}

TEST(HostUpdateThread, StoppingRunsEveryQueuedTaskOnceAndNoneAfter) {
  std::atomic<int> skipped{0}, ran{0};
  {
    HostUpdateThread t("test");
    t.push([](bool) { std::this_thread::sleep_for(std::chrono::milliseconds(20)); });
    for (int i = 0; i < 5; ++i) t.push([&](bool skip) { ++(skip ? skipped : ran); });
    t.stop();  // the five run (with skip set unless they started before it) before it returns
    EXPECT_EQ(skipped.load() + ran.load(), 5);
    EXPECT_EQ(t.done(), 6u);
    t.push([&](bool) { ++ran; });  // after stop(): never run
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    EXPECT_EQ(t.done(), 6u);
  }
  EXPECT_EQ(skipped.load() + ran.load(), 5);
}

}  // namespace
}  // namespace tandem::optim
