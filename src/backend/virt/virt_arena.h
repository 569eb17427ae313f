// Internal: the memory of one virt device. Host memory inside, handed out only to the
// device's caching allocator; an optional capacity makes out-of-memory paths testable.
#pragma once

#include <atomic>
#include <mutex>

#include "tandem/allocator.h"

namespace tandem::virt {

class VirtArena final : public Allocator {
 public:
  explicit VirtArena(Device device) : device_(device) {}
  void* allocate(size_t bytes) override;
  void deallocate(void* ptr, size_t bytes) override;
  AllocatorStats stats() const override;
  Device device() const override { return device_; }
  /// Capacity in bytes; 0 = unlimited.
  void set_capacity(size_t bytes) { capacity_.store(bytes); }
  size_t capacity() const { return capacity_.load(); }

 private:
  Device device_;
  std::atomic<size_t> capacity_{0};
  mutable std::mutex mu_;
  AllocatorStats s_;
};

}  // namespace tandem::virt
