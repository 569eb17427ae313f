#include <atomic>
#include <cstdlib>
#include <mutex>

#include "core/huge_pages.h"
#include "tandem/allocator.h"
#include "tandem/error.h"
#include "tandem/host_allocator_stats.h"

namespace tandem {
namespace {

class HostAllocator final : public Allocator {
 public:
  void* allocate(size_t bytes) override {
    if (bytes == 0) return nullptr;
    // Large buffers: 2 MiB aligned and backed by huge pages (core/huge_pages.h).
    const bool huge = detail::wants_huge_pages(bytes);
    const size_t align = huge ? detail::kHugePageBytes : 64;
    const size_t rounded = (bytes + align - 1) / align * align;
    void* p = std::aligned_alloc(align, rounded);
    if (p && huge) detail::advise_huge_pages(p, rounded);
    if (!p) {
      throw_error(ErrorCode::out_of_memory, "alloc",
                  fmt::format("cannot allocate {} bytes of host memory", bytes));
    }
    std::lock_guard<std::mutex> lock(mu_);
    s_.allocated_bytes += bytes;
    s_.reserved_bytes += bytes;
    if (s_.allocated_bytes > s_.peak_allocated_bytes) s_.peak_allocated_bytes = s_.allocated_bytes;
    if (s_.reserved_bytes > s_.peak_reserved_bytes) s_.peak_reserved_bytes = s_.reserved_bytes;
    ++s_.num_allocs;
    return p;
  }
  void deallocate(void* ptr, size_t bytes) override {
    if (!ptr) return;
    std::free(ptr);
    std::lock_guard<std::mutex> lock(mu_);
    s_.allocated_bytes -= bytes;
    s_.reserved_bytes -= bytes;
    ++s_.num_frees;
  }
  AllocatorStats stats() const override {
    std::lock_guard<std::mutex> lock(mu_);
    return s_;
  }
  Device device() const override { return Device{}; }
  void reset_peak() {
    std::lock_guard<std::mutex> lock(mu_);
    s_.peak_allocated_bytes = s_.allocated_bytes;
    s_.peak_reserved_bytes = s_.reserved_bytes;
  }

 private:
  mutable std::mutex mu_;
  AllocatorStats s_;
};

}  // namespace

static HostAllocator& the_host_allocator() {
  static HostAllocator* a = new HostAllocator();  // never destroyed: tensors may outlive main
  return *a;
}

Allocator& host_allocator() {
  return the_host_allocator();
}

void reset_host_peak_stats() {
  the_host_allocator().reset_peak();
}

}  // namespace tandem
