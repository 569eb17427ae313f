// CachingAllocator: a pool on top of another allocator (the "backing" one: a device arena,
// page-aligned host memory, later cudaMalloc / cudaHostAlloc). Freed blocks are kept and
// reused instead of being returned, so that steady-state training allocates nothing from the
// system and the pool's high-water marks level off after warm-up.
//
// Layout (the scheme of PyTorch's CUDACachingAllocator, reduced):
//  - request sizes are rounded up to `round_bytes` (512 B);
//  - requests up to `small_size` (1 MiB) are carved out of `small_segment` (2 MiB) segments,
//    larger ones get a segment rounded up to `large_round` (2 MiB); a cached block larger than
//    the request is split and the remainder stays cached; neighbours freed in one segment merge;
//  - pools are per stream: a block freed by work ordered on stream S is reused only for
//    allocations on S (work on S runs in order, so no wait is needed). Use on any other stream
//    must be declared with record_use();
//  - event-aware free: record_use(ptr, event) marks a block as read or written by asynchronous
//    work that completes with `event`. A block freed while any of its events is pending is
//    held back and becomes reusable once ALL its events completed. This is judged per block on
//    every allocation, never in queue order: one slow event holds back only its own block.
//
// Statistics (allocator.h): allocated_bytes counts rounded block sizes handed out,
// reserved_bytes the segments held from the backing allocator; both with high-water marks.
//
// Errors: allocate() throws Error(out_of_memory, "[alloc] ...") naming the size, the device
// and the pool's usage when the backing allocator fails even after empty_cache();
// deallocate()/record_use() of a pointer this pool did not hand out throw
// Error(invalid_argument, "[alloc] ...").
// Thread-safety: every method may be called from any thread (one mutex per pool).
#pragma once

#include <cstddef>
#include <memory>
#include <mutex>
#include <string>

#include "tandem/allocator.h"
#include "tandem/stream.h"
#include "tandem/tensor.h"

namespace tandem {

struct CachingAllocatorOptions {
  size_t round_bytes = 512;        // size-class granularity, bytes (a power of two >= 64)
  size_t small_size = 1 << 20;     // requests up to this many bytes share segments
  size_t small_segment = 2 << 20;  // segment size for small requests, bytes
  size_t large_round = 2 << 20;    // large segments are rounded up to this, bytes
};

class CachingAllocator final : public Allocator {
 public:
  /// `backing` must outlive this pool; every segment comes from it and goes back to it.
  explicit CachingAllocator(Allocator& backing, CachingAllocatorOptions options = {});
  /// Returns cached segments to the backing allocator. Blocks still handed out stay with
  /// their owners (their memory is then never returned).
  ~CachingAllocator() override;
  CachingAllocator(const CachingAllocator&) = delete;
  CachingAllocator& operator=(const CachingAllocator&) = delete;

  /// Allocates from the pool of no particular stream (host pools, the default stream).
  void* allocate(size_t bytes) override;
  /// Allocates from the pool of `stream` (its blocks are reused only by work on `stream`).
  void* allocate(size_t bytes, const Stream& stream);
  /// Returns a block; with pending events recorded on it, it is reused only after they completed.
  void deallocate(void* ptr, size_t bytes) override;

  /// Declares that asynchronous work completing with `event` uses the block holding `ptr` (the
  /// pointer allocate() returned). Ignores events already complete and a null ptr.
  void record_use(void* ptr, const Event& event);
  /// Same for the storage of a tensor allocated from this pool.
  void record_use(const Tensor& tensor, const Event& event);

  /// Whether `ptr` is a block this pool handed out (allocate()'s pointer) and still holds as
  /// allocated, e.g. to tell pinned batch slots from pageable ones before record_use().
  bool owns(const void* ptr) const;

  /// Returns every cached segment that holds no allocated or pending block to the backing
  /// allocator. Blocks whose events are still pending stay.
  void empty_cache();

  AllocatorStats stats() const override;
  Device device() const override;
  /// Bytes in freed blocks still waiting for their events (not yet reusable).
  size_t pending_bytes() const;
  /// Bytes in free blocks ready for reuse.
  size_t cached_bytes() const;
  /// Sets the high-water marks to the current values (to measure one phase).
  void reset_peak_stats();
  /// Caps the bytes reserved from the backing allocator (0: no cap, the default). A request
  /// that needs a new segment past the cap first returns the cached free segments, then throws
  /// Error(out_of_memory, "[alloc] the pool is capped at X MiB by NAME: ...") naming
  /// `name` (the setting the user knows, e.g. "--max-pinned-gb 0.5"). Segments held already
  /// stay; a cap below the reserved bytes only stops growth.
  void set_reserve_limit(size_t bytes, std::string name);
  /// The cap set_reserve_limit gave (0: none).
  size_t reserve_limit() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tandem
