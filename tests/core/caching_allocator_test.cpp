// CachingAllocator over the host allocator: size classes, splitting and merging, reuse,
// per-stream pools, empty_cache and statistics.
#include <gtest/gtest.h>

#include "tandem/caching_allocator.h"
#include "tandem/error.h"

using namespace tandem;

namespace {
constexpr size_t kMiB = size_t{1} << 20;
}

TEST(CachingAllocator, RoundsToSizeClassesAndCountsStats) {
  CachingAllocator pool(host_allocator());
  EXPECT_EQ(pool.allocate(0), nullptr);
  void* a = pool.allocate(1);
  void* b = pool.allocate(513);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(a) % 64, 0u);  // the backing allocator's alignment
  AllocatorStats s = pool.stats();
  EXPECT_EQ(s.allocated_bytes, 512u + 1024u);
  EXPECT_EQ(s.reserved_bytes, 2 * kMiB);  // both from one small segment
  EXPECT_EQ(s.num_allocs, 2u);
  EXPECT_EQ(static_cast<char*>(b) - static_cast<char*>(a), 512);  // split, adjacent
  pool.deallocate(a, 1);
  pool.deallocate(b, 513);
  s = pool.stats();
  EXPECT_EQ(s.allocated_bytes, 0u);
  EXPECT_EQ(s.peak_allocated_bytes, 1536u);
  EXPECT_EQ(s.num_frees, 2u);
  EXPECT_EQ(pool.cached_bytes(), 2 * kMiB);  // neighbours merged back into one block
  pool.empty_cache();
  EXPECT_EQ(pool.stats().reserved_bytes, 0u);
  EXPECT_EQ(pool.stats().peak_reserved_bytes, 2 * kMiB);
}

TEST(CachingAllocator, ReusesFreedBlocksWithoutAskingTheBackingAllocator) {
  CachingAllocator pool(host_allocator());
  const uint64_t backing_allocs = host_allocator().stats().num_allocs;
  void* a = pool.allocate(3000);
  pool.deallocate(a, 3000);
  for (int i = 0; i < 100; ++i) {
    void* b = pool.allocate(3000);
    EXPECT_EQ(b, a);
    pool.deallocate(b, 3000);
  }
  EXPECT_EQ(host_allocator().stats().num_allocs - backing_allocs, 1u);
}

TEST(CachingAllocator, LargeBlocksGetRoundedSegmentsAndAreSplit) {
  CachingAllocator pool(host_allocator());
  void* a = pool.allocate(3 * kMiB);
  EXPECT_EQ(pool.stats().reserved_bytes, 4 * kMiB);
  pool.deallocate(a, 3 * kMiB);
  void* b = pool.allocate(kMiB + 512);  // large; reuses the 4 MiB segment, the rest stays cached
  EXPECT_EQ(b, a);
  EXPECT_EQ(pool.stats().reserved_bytes, 4 * kMiB);
  EXPECT_EQ(pool.cached_bytes(), 4 * kMiB - (kMiB + 512));
  void* c = pool.allocate(2 * kMiB);  // fits into the remainder
  EXPECT_EQ(static_cast<char*>(c), static_cast<char*>(a) + kMiB + 512);
  EXPECT_EQ(pool.stats().reserved_bytes, 4 * kMiB);
  // small requests never take large blocks
  void* d = pool.allocate(100);
  EXPECT_EQ(pool.stats().reserved_bytes, 6 * kMiB);
  pool.empty_cache();  // nothing fully free except... nothing: all segments hold live blocks
  EXPECT_EQ(pool.stats().reserved_bytes, 6 * kMiB);
  pool.deallocate(b, kMiB + 512);
  pool.deallocate(c, 2 * kMiB);
  pool.empty_cache();
  EXPECT_EQ(pool.stats().reserved_bytes, 2 * kMiB);
  pool.deallocate(d, 100);
  pool.empty_cache();
  EXPECT_EQ(pool.stats().reserved_bytes, 0u);
}

TEST(CachingAllocator, PoolsArePerStream) {
  CachingAllocator pool(host_allocator());
  Stream s1 = runtime(DeviceKind::virt).new_stream(0);
  Stream s2 = runtime(DeviceKind::virt).new_stream(0);
  void* a = pool.allocate(4096, s1);
  pool.deallocate(a, 4096);
  void* b = pool.allocate(4096, s2);
  EXPECT_NE(b, a) << "a block of stream 1's pool must not go to stream 2 without a recorded use";
  void* c = pool.allocate(4096, s1);
  EXPECT_EQ(c, a);
  EXPECT_EQ(pool.stats().reserved_bytes, 4 * kMiB);
  pool.deallocate(b, 4096);
  pool.deallocate(c, 4096);
}

TEST(CachingAllocator, RejectsForeignAndDoubleFrees) {
  CachingAllocator pool(host_allocator());
  int x = 0;
  EXPECT_THROW(pool.deallocate(&x, 4), Error);
  void* a = pool.allocate(64);
  pool.deallocate(a, 64);
  try {
    pool.deallocate(a, 64);
    FAIL() << "double free must throw";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::invalid_argument);
    EXPECT_EQ(std::string(e.what()).rfind("[alloc]", 0), 0u) << e.what();
  }
  EXPECT_THROW(pool.record_use(&x, runtime(DeviceKind::virt).new_stream(0).record()), Error);
  EXPECT_THROW(
      CachingAllocator(host_allocator(), CachingAllocatorOptions{100, 1 << 20, 2 << 20, 2 << 20}),
      Error);
}

// set_reserve_limit: growth past the cap throws out_of_memory naming the setting and takes
// nothing; cached free segments go back first, so a request that fits after that succeeds;
// 0 lifts the cap.
TEST(CachingAllocator, ReserveLimitStopsGrowthAndNamesTheSetting) {
  CachingAllocator pool(host_allocator());
  pool.set_reserve_limit(8 * kMiB, "--max-pinned-gb x");
  EXPECT_EQ(pool.reserve_limit(), 8 * kMiB);
  void* a = pool.allocate(3 * kMiB);  // a 4 MiB segment (large ones round to 2 MiB), all of it a's
  void* b = pool.allocate(kMiB / 2);  // a 2 MiB small segment: 6 MiB reserved
  EXPECT_EQ(pool.stats().reserved_bytes, 6 * kMiB);
  try {
    pool.allocate(5 * kMiB / 2);  // another 4 MiB segment: 10 MiB
    FAIL() << "expected the cap to refuse";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::out_of_memory);
    const std::string m = e.what();
    EXPECT_NE(m.find("the pool is capped at 8.00 MiB by --max-pinned-gb x: 2621440 bytes more would take it "
                     "to 10.00 MiB (4.50 MiB allocated, 0.00 MiB waiting for events)"),
              std::string::npos)
        << m;
  }
  EXPECT_EQ(pool.stats().reserved_bytes, 6 * kMiB);  // the refused request took nothing
  pool.deallocate(a, 3 * kMiB);                       // its segment stays cached: 6 MiB reserved
  void* d = pool.allocate(5 * kMiB);  // a 6 MiB segment: over the cap until the cached 4 MiB go back
  EXPECT_NE(d, nullptr);
  EXPECT_EQ(pool.stats().reserved_bytes, 8 * kMiB);
  pool.deallocate(d, 5 * kMiB);
  pool.deallocate(b, kMiB / 2);
  pool.set_reserve_limit(0, "");
  void* e = pool.allocate(20 * kMiB);
  EXPECT_NE(e, nullptr);
  pool.deallocate(e, 20 * kMiB);
}
