#include "virt_arena.h"

#include <cstdlib>

#include "tandem/error.h"

namespace tandem::virt {

namespace {
constexpr size_t kArenaAlign = 256;
}

void* VirtArena::allocate(size_t bytes) {
  if (bytes == 0) return nullptr;
  const size_t rounded = (bytes + kArenaAlign - 1) / kArenaAlign * kArenaAlign;
  std::lock_guard<std::mutex> lock(mu_);  // arena calls are rare: the caching pool sits above
  const size_t cap = capacity_.load();
  if (cap && s_.reserved_bytes + rounded > cap) {
    throw_error(
        ErrorCode::out_of_memory, "alloc",
        fmt::format("{} arena: cannot allocate {} bytes, {} of {} bytes in use (memory_mb option)",
                    device_.str(), bytes, s_.reserved_bytes, cap));
  }
  void* p = std::aligned_alloc(kArenaAlign, rounded);
  if (!p) {
    throw_error(ErrorCode::out_of_memory, "alloc",
                fmt::format("{} arena: the system refused {} bytes", device_.str(), bytes));
  }
  stats_on_allocate(s_, rounded);
  return p;
}

void VirtArena::deallocate(void* ptr, size_t bytes) {
  if (!ptr) return;
  const size_t rounded = (bytes + kArenaAlign - 1) / kArenaAlign * kArenaAlign;
  std::lock_guard<std::mutex> lock(mu_);
  std::free(ptr);
  stats_on_free(s_, rounded);
}

AllocatorStats VirtArena::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return s_;
}

}  // namespace tandem::virt
