// CachingAllocator: segments from a backing allocator, split into blocks kept in one ordered
// set per (stream, small/large) pool; event-aware frees are held in a pending list that is
// scanned block by block on every allocation.
#include "tandem/caching_allocator.h"

#include <set>
#include <unordered_map>
#include <vector>

#include "tandem/error.h"

namespace tandem {
namespace {

enum class BlockState : uint8_t { allocated, pending, free };

struct Block {
  char* ptr = nullptr;
  size_t size = 0;
  const void* stream = nullptr;  // the pool this block belongs to
  bool small = false;
  BlockState state = BlockState::free;
  Block* prev = nullptr;  // neighbours inside the same segment
  Block* next = nullptr;
  std::vector<Event> uses;  // events that must complete before the block is reused
};

// Orders free blocks by pool, then size (best fit via lower_bound), then address.
struct BlockLess {
  bool operator()(const Block* a, const Block* b) const {
    if (a->stream != b->stream) return std::less<const void*>()(a->stream, b->stream);
    if (a->small != b->small) return a->small < b->small;
    if (a->size != b->size) return a->size < b->size;
    return std::less<char*>()(a->ptr, b->ptr);
  }
};

size_t round_up(size_t n, size_t m) {
  return (n + m - 1) / m * m;
}

double mib(size_t bytes) { return static_cast<double>(bytes) / (1024.0 * 1024.0); }

bool drop_completed(std::vector<Event>& uses) {
  std::erase_if(uses, [](const Event& e) { return e.query(); });
  return uses.empty();
}

}  // namespace

struct CachingAllocator::Impl {
  Allocator& backing;
  CachingAllocatorOptions opt;
  mutable std::mutex mu;
  std::set<Block*, BlockLess> free_blocks;
  std::unordered_map<void*, Block*> live;  // allocated and pending blocks by address
  std::vector<Block*> pending;
  AllocatorStats s;
  size_t pending_bytes = 0;
  size_t reserve_limit = 0;  // 0: none
  std::string limit_name;

  Impl(Allocator& b, CachingAllocatorOptions o) : backing(b), opt(o) {}

  // Moves a block to the free set, merging it with free neighbours.
  void release(Block* b) {
    b->state = BlockState::free;
    b->uses.clear();
    if (Block* p = b->prev; p && p->state == BlockState::free) {
      free_blocks.erase(p);
      p->size += b->size;
      p->next = b->next;
      if (b->next) b->next->prev = p;
      delete b;
      b = p;
    }
    if (Block* n = b->next; n && n->state == BlockState::free) {
      free_blocks.erase(n);
      b->size += n->size;
      b->next = n->next;
      if (n->next) n->next->prev = b;
      delete n;
    }
    free_blocks.insert(b);
  }

  // Frees every pending block whose events all completed, each judged on its own.
  void process_pending() {
    std::erase_if(pending, [this](Block* b) {
      if (!drop_completed(b->uses)) return false;
      pending_bytes -= b->size;
      live.erase(b->ptr);
      release(b);
      return true;
    });
  }

  void release_cached_segments() {
    for (auto it = free_blocks.begin(); it != free_blocks.end();) {
      Block* b = *it;
      if (!b->prev && !b->next) {
        backing.deallocate(b->ptr, b->size);
        s.reserved_bytes -= b->size;
        it = free_blocks.erase(it);
        delete b;
      } else {
        ++it;
      }
    }
  }

  Block* new_segment(size_t size, const void* stream, bool small) {
    const size_t seg = small ? opt.small_segment : round_up(size, opt.large_round);
    if (reserve_limit > 0 && s.reserved_bytes + seg > reserve_limit) {
      release_cached_segments();  // cached free segments first, as for a failing backing allocator
      if (s.reserved_bytes + seg > reserve_limit)
        throw_error(ErrorCode::out_of_memory, "alloc",
                    fmt::format("the pool is capped at {:.2f} MiB by {}: {} bytes more would take it to {:.2f} "
                                "MiB ({:.2f} MiB allocated, {:.2f} MiB waiting for events); raise the cap or "
                                "lower what the run holds (batch size, loader prefetch)",
                                mib(reserve_limit), limit_name, size, mib(s.reserved_bytes + seg),
                                mib(s.allocated_bytes), mib(pending_bytes)));
    }
    void* p = nullptr;
    try {
      p = backing.allocate(seg);
    } catch (const Error& e) {
      if (e.code() != ErrorCode::out_of_memory) throw;
      release_cached_segments();
      try {
        p = backing.allocate(seg);
      } catch (const Error& e2) {
        if (e2.code() != ErrorCode::out_of_memory) throw;
        throw_error(ErrorCode::out_of_memory, "alloc",
                    fmt::format("cannot allocate {} bytes on {}: pool holds {} bytes allocated, {} "
                                "reserved, {} waiting for events ({})",
                                size, backing.device().str(), s.allocated_bytes, s.reserved_bytes,
                                pending_bytes, e2.what()));
      }
    }
    Block* b = new Block();
    b->ptr = static_cast<char*>(p);
    b->size = seg;
    b->stream = stream;
    b->small = small;
    s.reserved_bytes += seg;
    if (s.reserved_bytes > s.peak_reserved_bytes) s.peak_reserved_bytes = s.reserved_bytes;
    return b;
  }

  void* allocate(size_t bytes, const void* stream) {
    if (bytes == 0) return nullptr;
    std::lock_guard<std::mutex> lock(mu);
    process_pending();
    const size_t size = round_up(bytes, opt.round_bytes);
    const bool small = size <= opt.small_size;
    Block probe;
    probe.stream = stream;
    probe.small = small;
    probe.size = size;
    Block* b = nullptr;
    auto it = free_blocks.lower_bound(&probe);
    if (it != free_blocks.end() && (*it)->stream == stream && (*it)->small == small) {
      b = *it;
      free_blocks.erase(it);
    } else {
      b = new_segment(size, stream, small);
    }
    // Split off the rest when it is worth keeping as a block of its own.
    const size_t rest = b->size - size;
    if (small ? rest >= opt.round_bytes : rest > opt.small_size) {
      Block* r = new Block();
      r->ptr = b->ptr + size;
      r->size = rest;
      r->stream = stream;
      r->small = small;
      r->prev = b;
      r->next = b->next;
      if (b->next) b->next->prev = r;
      b->next = r;
      b->size = size;
      free_blocks.insert(r);
    }
    b->state = BlockState::allocated;
    live[b->ptr] = b;
    s.allocated_bytes += b->size;
    if (s.allocated_bytes > s.peak_allocated_bytes) s.peak_allocated_bytes = s.allocated_bytes;
    ++s.num_allocs;
    return b->ptr;
  }

  Block* find_allocated(void* ptr, const char* what) {
    auto it = live.find(ptr);
    TD_CHECK_ARG(it != live.end() && it->second->state == BlockState::allocated, "alloc",
                 "{} of {} which this {} pool did not hand out (or already took back)", what, ptr,
                 backing.device().str());
    return it->second;
  }
};

CachingAllocator::CachingAllocator(Allocator& backing, CachingAllocatorOptions options)
    : impl_(std::make_unique<Impl>(backing, options)) {
  TD_CHECK_ARG(options.round_bytes >= 64 && (options.round_bytes & (options.round_bytes - 1)) == 0,
               "alloc", "round_bytes must be a power of two >= 64, got {}", options.round_bytes);
  TD_CHECK_ARG(
      options.small_segment >= options.small_size && options.large_round >= options.round_bytes,
      "alloc", "small_segment ({}) must be >= small_size ({})", options.small_segment,
      options.small_size);
}

CachingAllocator::~CachingAllocator() {
  std::lock_guard<std::mutex> lock(impl_->mu);
  impl_->release_cached_segments();
}

void* CachingAllocator::allocate(size_t bytes) {
  return impl_->allocate(bytes, nullptr);
}

void* CachingAllocator::allocate(size_t bytes, const Stream& stream) {
  return impl_->allocate(bytes, stream.impl());
}

void CachingAllocator::deallocate(void* ptr, size_t) {
  if (!ptr) return;
  std::lock_guard<std::mutex> lock(impl_->mu);
  Block* b = impl_->find_allocated(ptr, "deallocate");
  impl_->s.allocated_bytes -= b->size;
  ++impl_->s.num_frees;
  if (drop_completed(b->uses)) {
    impl_->live.erase(b->ptr);
    impl_->release(b);
  } else {
    b->state = BlockState::pending;
    impl_->pending.push_back(b);
    impl_->pending_bytes += b->size;
  }
}

void CachingAllocator::record_use(void* ptr, const Event& event) {
  if (!ptr) return;
  std::lock_guard<std::mutex> lock(impl_->mu);
  Block* b = impl_->find_allocated(ptr, "record_use");  // a foreign pointer throws, whatever the event
  if (event.query()) return;
  drop_completed(b->uses);
  b->uses.push_back(event);
}

void CachingAllocator::record_use(const Tensor& tensor, const Event& event) {
  if (tensor.defined()) record_use(tensor.storage()->data(), event);
}

bool CachingAllocator::owns(const void* ptr) const {
  if (!ptr) return false;
  std::lock_guard<std::mutex> lock(impl_->mu);
  auto it = impl_->live.find(const_cast<void*>(ptr));
  return it != impl_->live.end() && it->second->state == BlockState::allocated;
}

void CachingAllocator::empty_cache() {
  std::lock_guard<std::mutex> lock(impl_->mu);
  impl_->process_pending();
  impl_->release_cached_segments();
}

AllocatorStats CachingAllocator::stats() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->s;
}

Device CachingAllocator::device() const {
  return impl_->backing.device();
}

size_t CachingAllocator::pending_bytes() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->pending_bytes;
}

size_t CachingAllocator::cached_bytes() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  size_t n = 0;
  for (const Block* b : impl_->free_blocks) n += b->size;
  return n;
}

void CachingAllocator::set_reserve_limit(size_t bytes, std::string name) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  impl_->reserve_limit = bytes;
  impl_->limit_name = std::move(name);
}

size_t CachingAllocator::reserve_limit() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->reserve_limit;
}

void CachingAllocator::reset_peak_stats() {
  std::lock_guard<std::mutex> lock(impl_->mu);
  impl_->s.peak_allocated_bytes = impl_->s.allocated_bytes;
  impl_->s.peak_reserved_bytes = impl_->s.reserved_bytes;
}

}  // namespace tandem
