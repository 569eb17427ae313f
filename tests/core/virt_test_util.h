// Test helpers for asynchronous work on virt streams: a gate that holds a stream back until
// the test opens it, so "not yet complete" states are reached without relying on timing.
#pragma once

#include <future>

#include "tandem/rng.h"
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

/// A host f32 tensor of `shape` with values uniform in [-1, 1) from Philox(seed, 0).
inline Tensor random_host(const Shape& shape, uint64_t seed) {
  Tensor t = Tensor::empty(shape);
  Philox rng(seed, 0);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = rng.uniform() * 2.0f - 1.0f;
  return t;
}

/// A copy of host tensor `host` on `d` (a clone for the host); the host waits for the copy.
inline Tensor on(Device d, const Tensor& host) {
  if (d.is_host()) return host.clone();
  Tensor t = host.to(d, runtime(d.kind).default_stream(d.index));
  t.storage()->pending_write().synchronize();
  return t;
}

}  // namespace tandem::testing
