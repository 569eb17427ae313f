// The release thread of finished CUDA host work (src/backend/cuda/deferred_release.h): what a
// host function hands over is destroyed on another thread, flush() waits for it, and a
// destructor may hand over more. Plain C++: runs in every build.
#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <thread>

#include "backend/cuda/deferred_release.h"

namespace tandem::cuda_detail {
namespace {

struct Probe {
  std::atomic<int>* destroyed;
  std::thread::id* where;
  ~Probe() {
    *where = std::this_thread::get_id();
    destroyed->fetch_add(1);
  }
};

TEST(DeferredRelease, DestroysOnItsOwnThreadAndFlushWaits) {
  DeferredRelease r;
  std::atomic<int> destroyed{0};
  std::thread::id where;
  r.hand_over(std::make_unique<Probe>(&destroyed, &where));
  r.flush();
  EXPECT_EQ(destroyed.load(), 1);
  EXPECT_NE(where, std::this_thread::get_id());
  EXPECT_NE(where, std::thread::id());
}

TEST(DeferredRelease, HandOverNeverWaitsForARelease) {
  DeferredRelease r;
  std::promise<void> go;
  std::shared_future<void> gate = go.get_future().share();
  struct Blocker {
    std::shared_future<void> gate;
    ~Blocker() { gate.wait(); }
  };
  std::atomic<int> destroyed{0};
  std::thread::id where;
  r.hand_over(std::make_unique<Blocker>(gate));  // the release thread blocks on it
  for (int i = 0; i < 100; ++i) r.hand_over(std::make_unique<Probe>(&destroyed, &where));
  EXPECT_EQ(destroyed.load(), 0);  // all queued behind the blocker; the caller was not held
  go.set_value();
  r.flush();
  EXPECT_EQ(destroyed.load(), 100);
}

TEST(DeferredRelease, ADestructorMayHandOverAndFlush) {
  auto r = std::make_unique<DeferredRelease>();
  std::atomic<int> destroyed{0};
  std::thread::id where;
  struct Chain {
    DeferredRelease* r;
    std::atomic<int>* destroyed;
    std::thread::id* where;
    ~Chain() {
      r->flush();  // on the release thread: returns at once
      r->hand_over(std::make_unique<Probe>(destroyed, where));
    }
  };
  r->hand_over(std::make_unique<Chain>(r.get(), &destroyed, &where));
  r->flush();
  r->flush();  // the item the destructor handed over came later; a second flush covers it
  EXPECT_EQ(destroyed.load(), 1);
  r->hand_over(std::make_unique<Probe>(&destroyed, &where));
  r.reset();  // drains before joining
  EXPECT_EQ(destroyed.load(), 2);
}

}  // namespace
}  // namespace tandem::cuda_detail
