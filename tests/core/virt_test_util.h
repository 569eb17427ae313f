// Test helpers for asynchronous work on virt streams: a gate that holds a stream back until
// the test opens it, so "not yet complete" states are reached without relying on timing.
#pragma once

#include <future>

#include "tandem/stream.h"

namespace tandem::testing {

class Gate {
 public:
  /// Enqueues an item on `s` that waits until open() is called.
  void hold(const Stream& s) {
    auto f = future_;
    s.enqueue([f] { f.wait(); });
  }
  void open() {
    if (!opened_) {
      opened_ = true;
      promise_.set_value();
    }
  }
  ~Gate() { open(); }  // a failed assertion must not leave a stream blocked forever

 private:
  std::promise<void> promise_;
  std::shared_future<void> future_ = promise_.get_future().share();
  bool opened_ = false;
};

}  // namespace tandem::testing
