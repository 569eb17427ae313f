// Per-thread grow-only scratch slots (cpu_scratch.h).
#include "backend/cpu/cpu_scratch.h"

#include <cstdlib>
#include <memory>

namespace tandem::ops::cpu {
namespace {

struct FreeDeleter {
  void operator()(void* p) const { std::free(p); }
};

struct Slot {
  std::unique_ptr<void, FreeDeleter> data;
  size_t bytes = 0;
};

}  // namespace

void* thread_scratch(int slot, size_t bytes) noexcept {
  if (slot < 0 || slot >= kScratchSlots) return nullptr;
  thread_local Slot slots[kScratchSlots];
  Slot& s = slots[slot];
  if (s.bytes < bytes) {
    const size_t rounded = (bytes + 63) / 64 * 64;
    void* p = std::aligned_alloc(64, rounded);
    if (p == nullptr) return nullptr;
    s.data.reset(p);
    s.bytes = rounded;
  }
  return s.data.get();
}

}  // namespace tandem::ops::cpu
