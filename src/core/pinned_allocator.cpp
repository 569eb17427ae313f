// The pinned host pool: page-aligned host segments (mlock'ed when allowed) under a
// CachingAllocator.
#include "tandem/pinned.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdlib>
#include <mutex>
#include <unordered_map>

#include "backend/cuda/cuda_entry.h"
#include "core/huge_pages.h"
#include "tandem/cpu_binding.h"
#include "tandem/error.h"

namespace tandem {
namespace {

// Page-aligned host memory, locked into RAM when the memlock limit allows.
class PageAllocator final : public Allocator {
 public:
  void* allocate(size_t bytes) override {
    if (bytes == 0) return nullptr;
    const size_t align = alignment(bytes);
    const size_t rounded = (bytes + align - 1) / align * align;
    void* p = std::aligned_alloc(align, rounded);
    if (!p) {
      throw_error(ErrorCode::out_of_memory, "alloc",
                  fmt::format("cannot allocate {} bytes of pinned host memory", bytes));
    }
    if (align == detail::kHugePageBytes) detail::advise_huge_pages(p, rounded);
    place_on_bound_node(p, rounded);             // --bind: the rank's memory node, before the pages exist
    const bool locked = mlock(p, rounded) == 0;  // best effort
    std::lock_guard<std::mutex> lock(mu_);
    if (locked) locked_[p] = rounded;
    stats_on_allocate(s_, rounded);
    return p;
  }
  void deallocate(void* ptr, size_t bytes) override {
    if (!ptr) return;
    const size_t align = alignment(bytes);
    const size_t rounded = (bytes + align - 1) / align * align;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (auto it = locked_.find(ptr); it != locked_.end()) {
        munlock(ptr, it->second);
        locked_.erase(it);
      }
      stats_on_free(s_, rounded);
    }
    std::free(ptr);
  }
  AllocatorStats stats() const override {
    std::lock_guard<std::mutex> lock(mu_);
    return s_;
  }
  Device device() const override { return Device{}; }

 private:
  // Pages; large segments 2 MiB, backed by huge pages (core/huge_pages.h).
  static size_t alignment(size_t bytes) {
    return detail::wants_huge_pages(bytes) ? detail::kHugePageBytes : pinned_page_size();
  }

  mutable std::mutex mu_;
  AllocatorStats s_;
  std::unordered_map<void*, size_t> locked_;
};

}  // namespace

size_t pinned_page_size() {
  static const size_t page = [] {
    long p = sysconf(_SC_PAGESIZE);
    return p > 0 ? static_cast<size_t>(p) : size_t{4096};
  }();
  return page;
}

CachingAllocator& pinned_allocator() {
  // With a CUDA device present, segments come from cudaHostAlloc (page-locked and registered
  // with the driver, so copies from them are truly asynchronous); otherwise mlock'ed pages.
  static Allocator* pages = [] {
    Allocator* cuda = cuda_pinned_backing();
    return cuda ? cuda : new PageAllocator();
  }();
  static CachingAllocator* pool = new CachingAllocator(*pages);
  return *pool;
}

Tensor pinned_empty(const Shape& shape, DType dtype) {
  return Tensor::empty_with(shape, dtype, pinned_allocator());
}

Tensor pinned_copy(const Tensor& host) {
  Tensor t = pinned_empty(host.shape(), host.dtype());
  t.copy_from(host);
  return t;
}

void record_pinned_use(const Tensor& tensor, const Event& event) {
  pinned_allocator().record_use(tensor, event);
}

}  // namespace tandem
