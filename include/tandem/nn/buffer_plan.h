// BufferPlan: the activation buffers a model's training step holds, counted from shapes alone
// (Module::plan_buffers), without allocating or running anything. The memory plan of a run
// (tandem/train/memory_plan.h) adds them to the parameters, gradients and optimizer state.
// What counts: every buffer a module allocates in forward() or backward() in training mode and
// keeps (outputs, saved statistics, arg-max indices, input gradients). Modules reuse these
// buffers from step to step (nn/module.h), so in a step that runs without recompute they are
// all alive at once at the end of the forward. A block that recomputes (Module::set_recompute)
// keeps only its output; its internals live while that block runs and are counted once, as
// the largest such set (`transient`).
// Units: bytes as the allocator counts them (rounded(): the caching allocators' size classes on
// virt and cuda, exact sizes on the cpu).
// Thread-safety: a plain value.
#pragma once

#include <algorithm>
#include <cstdint>

#include "tandem/dtype.h"
#include "tandem/tensor.h"

namespace tandem::nn {

struct BufferPlan {
  static constexpr int64_t kRoundBytes = 512;

  /// Plan a training step (forward and backward) or, false, an evaluation forward.
  bool training = true;
  /// Bytes held from the forward through the backward (and kept for the next step).
  int64_t kept = 0;
  /// The part of `kept` that only a training step makes (input gradients, arg-max indices,
  /// dropout masks): buffers an evaluation forward leaves as they were.
  int64_t kept_train_only = 0;
  /// The most bytes held at once by one recomputing block's internals, on top of `kept`.
  int64_t transient = 0;
  /// The layout convolutions write (ops::preferred_memory_format of the run's device:
  /// channels_last on cpu and virt, contiguous on cuda) and the layout of the activation the
  /// next module receives (set by the modules as they go; the batch arrives contiguous).
  MemoryFormat preferred = MemoryFormat::contiguous;
  MemoryFormat current = MemoryFormat::contiguous;
  /// Count as the caching allocators do (virt, cuda) or in exact bytes (the cpu's host allocator).
  bool pooled = true;

  /// The bytes an allocator counts for a request of `bytes`: the caching allocators' (pooled:
  /// 512-byte size classes; a request above 1 MiB takes a segment rounded up to 2 MiB and keeps
  /// it whole unless more than 1 MiB is left over, src/core/caching_allocator.cpp), or the
  /// host allocator's exact size (cpu tensors).
  static int64_t rounded(int64_t bytes, bool pooled = true) {
    if (!pooled || bytes <= 0) return bytes > 0 ? bytes : 0;
    const int64_t s = (bytes + kRoundBytes - 1) / kRoundBytes * kRoundBytes;
    constexpr int64_t kSmall = int64_t{1} << 20, kSegment = int64_t{2} << 20;
    if (s <= kSmall) return s;
    const int64_t segment = (s + kSegment - 1) / kSegment * kSegment;
    return segment - s > kSmall ? s : segment;
  }
  int64_t bytes_of(const Shape& shape, DType dtype) const {
    return rounded(shape_numel(shape) * static_cast<int64_t>(dtype_size(dtype)), pooled);
  }
  /// Counts a buffer that the forward makes (in evaluation too): outputs, saved statistics.
  void add(const Shape& shape, DType dtype) { kept += bytes_of(shape, dtype); }
  /// Counts a buffer only a training step makes; nothing when !training.
  void add_train(const Shape& shape, DType dtype) {
    if (!training) return;
    kept += bytes_of(shape, dtype);
    kept_train_only += bytes_of(shape, dtype);
  }
  /// A plan for the internals of a recomputing block inside this one.
  BufferPlan inner() const {
    BufferPlan p;
    p.training = training;
    p.pooled = pooled;
    p.preferred = preferred;
    p.current = current;
    return p;
  }
  /// Counts a recomputing block whose internals (`in.kept`) live only while it runs.
  void add_transient(const BufferPlan& in) {
    transient = std::max(transient, in.kept + in.transient);
  }
  /// Everything at the peak.
  int64_t total() const { return kept + transient; }
};

}  // namespace tandem::nn
