// Allocators: where tensor memory comes from. Each allocator serves one device and keeps
// usage statistics (bytes, counts, high-water marks) so pools can be shown to level off.
// Thread-safety: allocate(), deallocate() and stats() may be called from any thread.
#pragma once

#include <cstddef>
#include <cstdint>

#include "tandem/device.h"

namespace tandem {

/// Usage statistics, all in bytes except the counts.
struct AllocatorStats {
  size_t allocated_bytes = 0;       // handed out to tensors now
  size_t reserved_bytes = 0;        // held from the system now (>= allocated for caching pools)
  size_t peak_allocated_bytes = 0;  // high-water mark of allocated_bytes
  size_t peak_reserved_bytes = 0;   // high-water mark of reserved_bytes
  uint64_t num_allocs = 0;          // allocate() calls served
  uint64_t num_frees = 0;           // deallocate() calls
};

class Allocator {
 public:
  virtual ~Allocator() = default;
  /// Returns `bytes` bytes aligned to at least 64 bytes (nullptr for 0 bytes).
  /// Throws Error(out_of_memory, "[alloc] ...") naming the size and device when it cannot.
  virtual void* allocate(size_t bytes) = 0;
  /// Returns memory obtained from allocate() with the same size.
  virtual void deallocate(void* ptr, size_t bytes) = 0;
  virtual AllocatorStats stats() const = 0;
  virtual Device device() const = 0;
};

/// Bookkeeping helpers for allocators that hand out exactly what they reserve: count an
/// allocation or a free of `bytes` in `s` (allocated, reserved, their peaks, the counts).
/// Not thread-safe: callers hold their own lock.
inline void stats_on_allocate(AllocatorStats& s, size_t bytes) {
  s.allocated_bytes += bytes;
  s.reserved_bytes += bytes;
  if (s.allocated_bytes > s.peak_allocated_bytes) s.peak_allocated_bytes = s.allocated_bytes;
  if (s.reserved_bytes > s.peak_reserved_bytes) s.peak_reserved_bytes = s.reserved_bytes;
  ++s.num_allocs;
}
inline void stats_on_free(AllocatorStats& s, size_t bytes) {
  s.allocated_bytes -= bytes;
  s.reserved_bytes -= bytes;
  ++s.num_frees;
}

/// The process-wide pageable host allocator (64-byte aligned, no caching).
Allocator& host_allocator();

}  // namespace tandem
