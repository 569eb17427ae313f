// Pinned staging buffers and asynchronous copies: a block read by a pending copy is never
// handed out again, reuse is judged per block (not in queue order), and the pool levels off
// under a deep prefetch loop.
#include <gtest/gtest.h>

#include <cstdint>
#include <deque>
#include <vector>

#include "tandem/pinned.h"
#include "tandem/tensor.h"
#include "tandem/virt.h"
#include "virt_test_util.h"

using namespace tandem;
using tandem::testing::Gate;

namespace {

constexpr Device kVirt0{DeviceKind::virt, 0};

Runtime& virt_rt() {
  return runtime(DeviceKind::virt);
}

// Enqueues a copy of the pinned block `p` into fresh device memory on `s` and records its use.
Event copy_from_pinned(void* p, size_t bytes, const Stream& s, std::vector<Tensor>& keep) {
  Tensor d = Tensor::empty({static_cast<int64_t>(bytes)}, DType::u8, kVirt0);
  keep.push_back(d);
  virt_rt().copy_async(d.raw_data(), kVirt0, p, Device{}, bytes, s);
  Event e = s.record();
  pinned_allocator().record_use(p, e);
  return e;
}

}  // namespace

TEST(Pinned, IsHostMemoryWithPageAlignedSegments) {
  CachingAllocator& pool = pinned_allocator();
  EXPECT_EQ(pool.device(), Device{});
  EXPECT_GE(pinned_page_size(), 4096u);
  Tensor t = pinned_empty({3, 5});
  t.fill(2.5);
  EXPECT_EQ(t.item(14), 2.5);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(t.raw_data()) % 512, 0u);
  // a large request gets its own segment, which starts on a page boundary
  Tensor big = pinned_empty({1 << 19});
  EXPECT_EQ(reinterpret_cast<uintptr_t>(big.raw_data()) % pinned_page_size(), 0u);
}

TEST(Pinned, BlockReadByAPendingCopyIsNotReusedUntilItsEventCompleted) {
  CachingAllocator& pool = pinned_allocator();
  Stream s = virt_rt().new_stream(0);
  std::vector<Tensor> keep;
  Gate gate;
  const size_t n = 4096;
  gate.hold(s);
  void* a = pool.allocate(n);
  Event e = copy_from_pinned(a, n, s, keep);
  pool.deallocate(a, n);
  EXPECT_GE(pool.pending_bytes(), n);
  void* b = pool.allocate(n);
  EXPECT_NE(b, a) << "a pinned block was handed out again while a copy still reads it";
  gate.open();
  e.synchronize();
  void* c = pool.allocate(n);
  EXPECT_EQ(c, a) << "once the copy completed, the block is reused";
  pool.deallocate(b, n);
  pool.deallocate(c, n);
  s.synchronize();
}

TEST(Pinned, RewritingASourceAfterFreeCannotCorruptAPendingCopy) {
  Stream s = virt_rt().new_stream(0);
  Gate gate;
  gate.hold(s);
  Tensor src = pinned_empty({1024});
  src.fill(1.0);
  Tensor dev = src.to(kVirt0, s);
  record_pinned_use(src, s.record());
  const void* old_block = src.raw_data();
  src = Tensor();  // freed while the copy is still queued
  Tensor next = pinned_empty({1024});
  EXPECT_NE(next.raw_data(), old_block);
  next.fill(-7.0);  // what a prefetcher would do with the "free" buffer
  gate.open();
  Tensor back = dev.to(Device{}, s);
  back.storage()->pending_write().synchronize();
  for (int64_t i = 0; i < 1024; ++i) ASSERT_EQ(back.item(i), 1.0) << i;
}

TEST(Pinned, ReuseIsJudgedPerBlockNotInQueueOrder) {
  CachingAllocator& pool = pinned_allocator();
  Stream slow = virt_rt().new_stream(0);
  Stream fast = virt_rt().new_stream(0);
  std::vector<Tensor> keep;
  Gate gate;
  const size_t n = 8192;
  gate.hold(slow);
  void* a = pool.allocate(n);
  void* b = pool.allocate(n);
  Event ea = copy_from_pinned(a, n, slow, keep);
  Event eb = copy_from_pinned(b, n, fast, keep);
  pool.deallocate(a, n);  // freed first, but its copy is held back
  pool.deallocate(b, n);
  eb.synchronize();
  EXPECT_FALSE(ea.query());
  void* c = pool.allocate(n);
  EXPECT_EQ(c, b) << "block b finished its copy and must be reusable despite a's slow event";
  void* d = pool.allocate(n);
  EXPECT_NE(d, a);
  gate.open();
  ea.synchronize();
  void* f = pool.allocate(n);
  EXPECT_EQ(f, a);
  for (void* p : {c, d, f}) pool.deallocate(p, n);
  slow.synchronize();
  fast.synchronize();
}

TEST(Pinned, BlockWaitsForAllOfItsEvents) {
  CachingAllocator& pool = pinned_allocator();
  Stream s1 = virt_rt().new_stream(0);
  Stream s2 = virt_rt().new_stream(0);
  std::vector<Tensor> keep;
  Gate gate1, gate2;
  const size_t n = 16384;
  gate1.hold(s1);
  gate2.hold(s2);
  void* a = pool.allocate(n);
  Event e1 = copy_from_pinned(a, n, s1, keep);
  Event e2 = copy_from_pinned(a, n, s2, keep);
  pool.deallocate(a, n);
  gate2.open();
  e2.synchronize();
  void* b = pool.allocate(n);
  EXPECT_NE(b, a) << "one of two copies reading the block is still pending";
  gate1.open();
  e1.synchronize();
  void* c = pool.allocate(n);
  EXPECT_EQ(c, a);
  pool.deallocate(b, n);
  pool.deallocate(c, n);
}

TEST(Pinned, HighWaterMarkLevelsOffWithPrefetchDepthEight) {
  CachingAllocator& pool = pinned_allocator();
  Stream copy_stream = virt_rt().new_stream(0);
  const int prefetch_depth = 8;
  const int64_t batch_floats = 3 << 17;  // 1.5 MiB: one 2 MiB segment per batch
  const size_t segment = size_t{2} << 20;
  const size_t reserved_before = pool.stats().reserved_bytes;
  pool.reset_peak_stats();
  std::deque<std::pair<Tensor, Event>> in_flight;
  size_t peak_after_warmup = 0;
  double checksum = 0, expected = 0;
  for (int step = 0; step < 300; ++step) {
    Tensor staging = pinned_empty({batch_floats});
    staging.fill(static_cast<double>(step % 17));
    Tensor dev = staging.to(kVirt0, copy_stream);
    record_pinned_use(staging, dev.storage()->pending_write());
    staging = Tensor();  // back to the pool while the copy is queued
    in_flight.emplace_back(dev, dev.storage()->pending_write());
    if (static_cast<int>(in_flight.size()) == prefetch_depth) {
      auto [oldest, ev] = in_flight.front();
      in_flight.pop_front();
      ev.synchronize();
      Tensor h = oldest.narrow(0, 0, 1).to(Device{}, copy_stream);
      copy_stream.synchronize();
      checksum += h.item(0);
      expected += static_cast<double>((step - prefetch_depth + 1) % 17);
    }
    if (step == 50) peak_after_warmup = pool.stats().peak_reserved_bytes;
  }
  copy_stream.synchronize();
  const AllocatorStats st = pool.stats();
  // At most depth copies in flight plus the batch being filled hold a segment each.
  EXPECT_LE(st.peak_reserved_bytes, reserved_before + (prefetch_depth + 1) * segment);
  EXPECT_LE(st.peak_reserved_bytes,
            std::max(peak_after_warmup, reserved_before + (prefetch_depth + 1) * segment));
  EXPECT_EQ(checksum, expected);
}
