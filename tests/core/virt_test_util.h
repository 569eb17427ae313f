// Test helpers for asynchronous work on virt streams: a gate that holds a stream back until
// the test opens it, so "not yet complete" states are reached without relying on timing.
#pragma once

#include <future>

#include "tandem/stream.h"
#include "tandem/tensor.h"

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

/// A host copy of `t` (t itself when on the host), read on the device's default stream after
/// t's pending write; the host waits for it.
inline Tensor to_host(const Tensor& t) {
  if (t.device().is_host()) return t;
  Tensor h = t.to(Device{}, runtime(t.device().kind).default_stream(t.device().index));
  h.storage()->pending_write().synchronize();
  return h;
}

}  // namespace tandem::testing
