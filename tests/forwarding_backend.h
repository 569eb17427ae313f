// A test backend that wraps another: it answers the dtype query from its own table (a copy
// of the inner one that a test edits with OpSupport::with/without), records every op called
// through it and forwards each to the inner backend. Generated from tandem/op_list.h, so it
// covers every op. BackendSwap installs one for a device kind for a test's scope.
// Thread-safety: one thread calls the ops (the record is not locked).
#pragma once

#include <algorithm>
#include <memory>
#include <vector>

#include "tandem/backend.h"
#include "tandem/op_list.h"
#include "tandem/stream.h"

namespace tandem::testing {

class ForwardingBackend final : public ops::Backend {
 public:
  explicit ForwardingBackend(ops::Backend& inner) : support(inner.op_support()), inner_(inner) {}

  ops::OpSupport support;  // the answers; starts as the inner backend's

  const char* name() const override { return inner_.name(); }
  const ops::OpSupport& op_support() const override { return support; }
  std::string compute_note(DType dtype) const override { return inner_.compute_note(dtype); }
  bool supports_channels_last() const override { return inner_.supports_channels_last(); }
  MemoryFormat preferred_memory_format(DType dtype) const override { return inner_.preferred_memory_format(dtype); }
  void convert_memory_format(const Tensor& src, const Tensor& dst) override { inner_.convert_memory_format(src, dst); }

#define TANDEM_TEST_FORWARD_(name, ret)        \
  ret name(TANDEM_OP_PARAMS(name)) override {  \
    record(ops::Op::name);                     \
    return inner_.name(TANDEM_OP_ARGS(name));  \
  }
  TANDEM_OPS(TANDEM_TEST_FORWARD_)
#undef TANDEM_TEST_FORWARD_

  /// Whether `op` was called through this backend.
  bool called(ops::Op op) const { return std::find(calls_.begin(), calls_.end(), op) != calls_.end(); }
  /// The ops called, each once, in first-call order.
  const std::vector<ops::Op>& calls() const { return calls_; }

 private:
  void record(ops::Op op) {
    if (!called(op)) calls_.push_back(op);
  }
  ops::Backend& inner_;
  std::vector<ops::Op> calls_;
};

/// Registers a ForwardingBackend over the backend of `device`'s kind (its runtime created
/// first) and restores the original on scope exit, after the device ran its queued work.
class BackendSwap {
 public:
  explicit BackendSwap(Device device) : device_(device) {
    (void)runtime_for(device);  // registers the kind's backend
    original_ = ops::find_backend(device.kind);
    backend_ = std::make_unique<ForwardingBackend>(*original_);
    ops::register_backend(device.kind, backend_.get());
  }
  ~BackendSwap() {
    runtime_for(device_).default_stream(device_.index).synchronize();
    ops::register_backend(device_.kind, original_);
  }
  BackendSwap(const BackendSwap&) = delete;
  BackendSwap& operator=(const BackendSwap&) = delete;
  ForwardingBackend& operator*() { return *backend_; }
  ForwardingBackend* operator->() { return backend_.get(); }

 private:
  Device device_;
  ops::Backend* original_ = nullptr;
  std::unique_ptr<ForwardingBackend> backend_;
};

}  // namespace tandem::testing
