// The utilisation sampler: /proc parsing on fixed text, thread CPU counted by name, figures in
// range, and the sampling thread stopped on every way out of its scope (normal end, an
// exception, a stop right after the start).
#include <gtest/gtest.h>
#include <pthread.h>

#include <atomic>
#include <chrono>
#include <stdexcept>
#include <thread>

#include "metrics/proc_stat.h"
#include "tandem/metrics/utilization.h"

namespace tandem::metrics {
namespace {

using namespace std::chrono_literals;

TEST(ProcStat, CpuLinesGiveBusyAndTotalTicks) {
  const std::string text =
      "cpu  100 5 50 800 20 3 2 1 0 0\n"
      "cpu0 60 5 30 400 10 2 1 1 0 0\n"
      "cpu1 40 0 20 400 10 1 1 0 0 0\n"
      "intr 12345 0 0\nctxt 999\n";
  const auto t = detail::parse_cpu_ticks(text);
  ASSERT_EQ(t.size(), 3u);
  EXPECT_EQ(t[0].busy, 100u + 5 + 50 + 3 + 2 + 1);  // user nice system irq softirq steal
  EXPECT_EQ(t[0].total, t[0].busy + 800 + 20);     // + idle iowait
  EXPECT_EQ(t[1].busy, 99u);
  EXPECT_EQ(t[2].total, 40u + 20 + 1 + 1 + 400 + 10);
}

TEST(ProcStat, TaskTicksAreCountedAfterTheCommandName) {
  // A command name with spaces and a ")" of its own; utime 1234 and stime 56 are fields 14, 15.
  const std::string line = "4242 (odd ) name) S 1 2 3 4 5 6 7 8 9 10 1234 56 0 0 20 0 1 0 100";
  EXPECT_EQ(detail::parse_task_ticks(line), 1290u);
  EXPECT_EQ(detail::parse_task_ticks("garbage"), 0u);
}

TEST(ProcStat, ThreadsAreFoundByName) {
  std::atomic<bool> stop{false};
  std::thread spin([&] {
    ::pthread_setname_np(::pthread_self(), "tandem spin t");
    volatile uint64_t x = 0;
    while (!stop.load()) x = x + 1;
  });
  // Waits until the thread has used some CPU (ticks are 1/100 s); not a timing assertion: the
  // loop ends as soon as the count moves, or fails after a minute.
  const auto deadline = std::chrono::steady_clock::now() + 60s;
  uint64_t ticks = 0;
  while ((ticks = detail::read_thread_ticks("tandem spin t")) < 3 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(10ms);
  const uint64_t process = detail::read_process_ticks();
  stop = true;
  spin.join();
  EXPECT_GE(ticks, 3u);
  EXPECT_EQ(detail::read_thread_ticks("no such thread"), 0u);
  // The kernel rounds the process's sum apart from each thread's: allow one tick.
  EXPECT_GE(process + 1, ticks);
}

TEST(UtilizationSampler, FiguresAreSharesAndDeviceMemoryComesFromTheCallback) {
  UtilizationSampler::Options o;
  o.interval = 5ms;
  o.device_memory = [] { return 1234.0; };
  UtilizationSampler s(o);
  EXPECT_FALSE(s.has_nvml());  // no GPU index given
  std::this_thread::sleep_for(30ms);
  const UtilizationSample u = s.take_mean();
  ASSERT_GE(u.samples, 1);
  EXPECT_GE(u.cpu_busy, 0.0);
  EXPECT_LE(u.cpu_busy, 1.0);
  EXPECT_EQ(u.per_core.size(), detail::read_cpu_ticks().size() - 1);
  for (double c : u.per_core) EXPECT_TRUE(c >= 0 && c <= 1) << c;
  EXPECT_GE(u.process_busy, 0.0);
  EXPECT_LE(u.process_busy, 1.0);
  EXPECT_DOUBLE_EQ(u.device_memory, 1234.0);
  EXPECT_EQ(u.gpu_busy, -1.0);
  EXPECT_NE(format_utilization(u).find("device memory 0.0 MiB"), std::string::npos) << format_utilization(u);
}

TEST(UtilizationSampler, NvmlMissingOrWithoutGpuLeavesGpuFiguresOut) {
  UtilizationSampler::Options o;
  o.gpu_index = 0;  // on a machine without the driver, dlopen fails and the figures stay -1
  UtilizationSampler s(o);
  const UtilizationSample u = s.take_mean();  // one sample taken now
  EXPECT_EQ(u.samples, 1);
  if (!s.has_nvml()) EXPECT_EQ(u.gpu_busy, -1.0);
  else EXPECT_TRUE(u.gpu_busy >= 0 && u.gpu_busy <= 1);
}

TEST(UtilizationSampler, StopsOnEveryWayOutOfItsScope) {
  const int before = UtilizationSampler::running();
  {
    UtilizationSampler s({});
    EXPECT_EQ(UtilizationSampler::running(), before + 1);
  }  // destroyed at once, long before its first 500 ms interval: the stop wakes it
  EXPECT_EQ(UtilizationSampler::running(), before);
  try {
    UtilizationSampler::Options o;
    o.interval = 1ms;
    UtilizationSampler s(o);
    std::this_thread::sleep_for(5ms);
    throw std::runtime_error("step failed");
  } catch (const std::runtime_error&) {
  }
  EXPECT_EQ(UtilizationSampler::running(), before);
  UtilizationSampler::Options slow;
  slow.interval = std::chrono::hours(1);
  const auto t0 = std::chrono::steady_clock::now();
  { UtilizationSampler s(slow); }
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::minutes(30));  // never waits out the interval
  EXPECT_EQ(UtilizationSampler::running(), before);
}

}  // namespace
}  // namespace tandem::metrics
