// HostUpdatePipeline (tandem/optim/host_update_pipeline.h), the one host-update pipeline of the
// offloaded optimizer and the streamed parameters: the delay rule with its warm-up, where each
// update's upload goes (right after it, or before the unit's next update), the waits for one
// unit and for a step, and both error rules.
#include <gtest/gtest.h>

#include <future>
#include <mutex>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "tandem/error.h"
#include "tandem/optim/host_update_pipeline.h"

namespace tandem::optim {
namespace {

// Units of one scalar parameter each: the update is SGD (master -= lr * grad), the upload
// copies the master value to the "device" value. Every hook call is logged.
struct Units {
  std::vector<double> master, device, grad;
  std::vector<std::string> log;
  std::mutex mu;  // log, device: read by the test while the thread may run
  int throw_unit = -1;
  int64_t throw_step = 0;

  explicit Units(int n) : master(n, 1.0), device(n, 1.0), grad(n, 0.0) {}

  HostUpdateHooks hooks(bool uploads) {
    HostUpdateHooks h;
    h.update = [this](const HostUpdate& u) {
      if (u.unit == throw_unit && u.step == throw_step) throw std::runtime_error("update failed");
      master[static_cast<size_t>(u.unit)] -= u.lr * grad[static_cast<size_t>(u.unit)];
      std::lock_guard<std::mutex> lock(mu);
      log.push_back("update " + std::to_string(u.unit) + "@" + std::to_string(u.step));
    };
    if (uploads)
      h.upload = [this](int unit, const Event&, int64_t step) {
        std::lock_guard<std::mutex> lock(mu);
        device[static_cast<size_t>(unit)] = master[static_cast<size_t>(unit)];
        log.push_back("upload " + std::to_string(unit) + "@" + std::to_string(step));
        return Event();
      };
    return h;
  }
  std::vector<std::string> take_log() {
    std::lock_guard<std::mutex> lock(mu);
    return std::exchange(log, {});
  }
  double device_value(int unit) {
    std::lock_guard<std::mutex> lock(mu);
    return device[static_cast<size_t>(unit)];
  }
};

HostUpdateOptions options(int units, int delay, int64_t warmup, bool keep_errors = true) {
  HostUpdateOptions o;
  o.thread_name = "test";
  o.units = units;
  o.delay = delay;
  o.delay_warmup_steps = warmup;
  o.keep_errors = keep_errors;
  return o;
}

// One step: gradient `g` for every unit, each unit queued (lr 0.5), the step ended. A unit's
// gradient is rewritten once its last update (still running after a delayed step) read it.
void step(HostUpdatePipeline& p, Units& u, int64_t s, double g) {
  for (int k = 0; k < p.units(); ++k) {
    p.wait_unit(k);
    u.grad[static_cast<size_t>(k)] = g;
    p.queue(HostUpdate{k, s, 0.5, 0, Event()});
  }
  p.finish_step(s);
}

TEST(HostUpdatePipeline, DelayRuleAndWarmup) {
  Units u(1);
  HostUpdatePipeline d0(options(1, 0, 0), u.hooks(true));
  HostUpdatePipeline d1(options(1, 1, 0), u.hooks(true));
  HostUpdatePipeline w3(options(1, 1, 3), u.hooks(true));
  for (int64_t s = 1; s <= 5; ++s) {
    EXPECT_EQ(d0.delay_of(s), 0);
    EXPECT_EQ(d1.delay_of(s), 1);
    EXPECT_EQ(w3.delay_of(s), s > 3 ? 1 : 0);
  }
  EXPECT_THROW({ HostUpdatePipeline bad(options(1, 2, 0), u.hooks(true)); }, Error);
  EXPECT_THROW({ HostUpdatePipeline bad(options(1, 1, -1), u.hooks(true)); }, Error);
  EXPECT_THROW({ HostUpdatePipeline bad(options(1, 0, 0), HostUpdateHooks{}); }, Error);
}

TEST(HostUpdatePipeline, WithoutDelayEachUpdateIsUploadedRightAfterIt) {
  Units u(2);
  HostUpdatePipeline p(options(2, 0, 0), u.hooks(true));
  step(p, u, 1, 1.0);  // 1 - 0.5 = 0.5
  EXPECT_EQ(u.take_log(), (std::vector<std::string>{"update 0@1", "upload 0@1", "update 1@1", "upload 1@1"}));
  EXPECT_EQ(u.device_value(0), 0.5);
  EXPECT_EQ(u.device_value(1), 0.5);
  EXPECT_FALSE(p.upload_pending());
  EXPECT_EQ(p.queued_in_step_count(), 0);
  step(p, u, 2, 0.5);  // 0.5 - 0.25 = 0.25
  EXPECT_EQ(u.device_value(0), 0.25);
  EXPECT_EQ(u.device_value(1), 0.25);
}

TEST(HostUpdatePipeline, WithDelayTheUploadWaitsForTheNextStep) {
  Units u(2);
  HostUpdatePipeline p(options(2, 1, 0), u.hooks(true));
  u.grad = {1.0, 1.0};
  p.queue(HostUpdate{0, 1, 0.5, 1, Event()});
  EXPECT_TRUE(p.queued_in_step(0));
  EXPECT_FALSE(p.queued_in_step(1));
  p.queue(HostUpdate{1, 1, 0.5, 1, Event()});
  p.finish_step(1);  // waits for nothing: no upload carries update 0
  EXPECT_TRUE(p.upload_pending());
  EXPECT_EQ(u.device_value(0), 1.0);  // the device computes step 2 at the initial values
  p.wait_idle();
  EXPECT_EQ(u.take_log(), (std::vector<std::string>{"update 0@1", "update 1@1"}));
  EXPECT_EQ(u.master[0], 0.5);

  step(p, u, 2, 1.0);  // each unit's upload of update 1 before its update 2
  EXPECT_EQ(u.device_value(0), 0.5);
  EXPECT_EQ(u.device_value(1), 0.5);
  p.wait_idle();
  EXPECT_EQ(u.take_log(),
            (std::vector<std::string>{"upload 0@1", "update 0@2", "upload 1@1", "update 1@2"}));
  EXPECT_EQ(u.master[0], 0.0);
  EXPECT_TRUE(p.upload_pending());

  p.upload_owed(Event(), 2);  // flush: the pending update goes up
  p.wait_idle();
  EXPECT_FALSE(p.upload_pending());
  EXPECT_EQ(u.take_log(), (std::vector<std::string>{"upload 0@2", "upload 1@2"}));
  EXPECT_EQ(u.device_value(0), 0.0);
  EXPECT_EQ(u.device_value(1), 0.0);
}

TEST(HostUpdatePipeline, WarmupStepsAreNotDelayed) {
  Units u(1);
  HostUpdatePipeline p(options(1, 1, 2), u.hooks(true));
  step(p, u, 1, 1.0);  // 0.5, uploaded
  EXPECT_EQ(u.device_value(0), 0.5);
  step(p, u, 2, 1.0);  // 0.0, uploaded
  EXPECT_EQ(u.device_value(0), 0.0);
  EXPECT_FALSE(p.upload_pending());
  step(p, u, 3, 1.0);  // -0.5, owed
  EXPECT_EQ(u.device_value(0), 0.0);
  EXPECT_TRUE(p.upload_pending());
  step(p, u, 4, 1.0);  // update 3 goes up first
  EXPECT_EQ(u.device_value(0), -0.5);
  p.wait_idle();
  EXPECT_EQ(u.master[0], -1.0);
  EXPECT_EQ(u.take_log(), (std::vector<std::string>{"update 0@1", "upload 0@1", "update 0@2", "upload 0@2",
                                                    "update 0@3", "upload 0@3", "update 0@4"}));
}

TEST(HostUpdatePipeline, ReportsAStoredUploadStateAfterARestore) {
  Units u(1);
  HostUpdatePipeline p(options(1, 1, 0), u.hooks(true));
  u.master[0] = 3.0;  // a restored master copy whose upload is pending (update 5)
  p.reset_uploads(5, true);
  EXPECT_TRUE(p.upload_pending());
  step(p, u, 6, 2.0);  // update 5 goes up first, then update 6 (3 - 1 = 2) is owed
  EXPECT_EQ(u.device_value(0), 3.0);
  p.wait_idle();
  EXPECT_EQ(u.master[0], 2.0);
  EXPECT_EQ(u.take_log(), (std::vector<std::string>{"upload 0@5", "update 0@6"}));
}

TEST(HostUpdatePipeline, KeptErrorSurfacesAtTheWaitAndStays) {
  Units u(2);
  u.throw_unit = 0;
  u.throw_step = 2;
  HostUpdatePipeline p(options(2, 0, 0, true), u.hooks(true));
  step(p, u, 1, 1.0);
  try {
    step(p, u, 2, 1.0);
    FAIL() << "expected the update's error";
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "update failed");
  }
  EXPECT_THROW(p.check(), std::runtime_error);
  EXPECT_THROW(p.wait_idle(), std::runtime_error);
  EXPECT_THROW(p.wait_updates(), std::runtime_error);
  // Unit 1's update 2 came after the error: skipped, its value is update 1's.
  EXPECT_EQ(u.master[0], 0.5);
  EXPECT_EQ(u.master[1], 0.5);
  EXPECT_EQ(u.device_value(1), 0.5);
  EXPECT_FALSE(p.updating(1));
}

TEST(HostUpdatePipeline, TakenErrorSurfacesOnceAndTheNextStepRuns) {
  Units u(2);
  u.throw_unit = 0;
  u.throw_step = 1;
  HostUpdatePipeline p(options(2, 0, 0, false), u.hooks(false));
  EXPECT_THROW(step(p, u, 1, 1.0), std::runtime_error);
  EXPECT_EQ(u.master[0], 1.0);
  EXPECT_EQ(u.master[1], 1.0);  // skipped after the error
  EXPECT_NO_THROW(p.check());   // taken
  step(p, u, 2, 1.0);
  EXPECT_EQ(u.master[0], 0.5);
  EXPECT_EQ(u.master[1], 0.5);
  // Without an upload hook nothing is uploaded nor owed, delayed or not.
  EXPECT_EQ(u.device_value(0), 1.0);
  EXPECT_FALSE(p.upload_pending());
}

TEST(HostUpdatePipeline, WaitForOneUnitWhileTheNextStillRuns) {
  Units u(2);
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  HostUpdateHooks h = u.hooks(false);
  HostUpdateHooks blocking;
  blocking.update = [&, inner = h.update](const HostUpdate& x) {
    if (x.unit == 1) released.wait();
    inner(x);
  };
  HostUpdatePipeline p(options(2, 1, 0, false), blocking);
  u.grad = {1.0, 1.0};
  p.queue(HostUpdate{0, 1, 0.5, 0, Event()});
  p.queue(HostUpdate{1, 1, 0.5, 0, Event()});
  p.wait_unit(0);
  EXPECT_FALSE(p.updating(0));
  EXPECT_EQ(u.master[0], 0.5);
  EXPECT_TRUE(p.updating(1));
  p.finish_step(1);  // delayed, no upload hook: does not wait for unit 1
  EXPECT_TRUE(p.updating(1));
  EXPECT_GE(p.in_flight(), 1u);  // unit 1's task at least
  release.set_value();
  p.wait_unit(1);
  EXPECT_FALSE(p.updating(1));
  EXPECT_EQ(u.master[1], 0.5);
}

TEST(HostUpdatePipeline, RunOrdersWorkAfterTheQueuedUpdatesAndReportsItsError) {
  Units u(1);
  HostUpdatePipeline p(options(1, 0, 0, false), u.hooks(false));
  u.grad[0] = 1.0;
  p.queue(HostUpdate{0, 1, 0.5, 0, Event()});
  double seen = 0;
  p.run([&] { seen = u.master[0]; });
  EXPECT_EQ(seen, 0.5);
  EXPECT_THROW(p.run([] { throw std::runtime_error("collective failed"); }), std::runtime_error);
  EXPECT_NO_THROW(p.check());
  p.run([&] { seen = 7; });
  EXPECT_EQ(seen, 7);
}

}  // namespace
}  // namespace tandem::optim
