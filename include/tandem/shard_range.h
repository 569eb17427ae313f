// The one shard rule of every layout that partitions elements over the ranks of a
// distributed run (llm.c's multi_gpu_get_shard_offset, llmc/zero.cuh, with padding instead of
// its divisibility requirement): ZeRO-1's owners of whole parameters
// (train/dist/zero_optimizer.h), the offloaded optimizer's bucket blocks
// (tandem/optim/offload.h, align 16) and ZeRO-3's sections of streamed parameters
// (train/place/shard_homes.h).
//
// n elements [0, n) are padded up to a multiple of align * world_size and cut into world_size
// equal contiguous shards, rank 0 first; each shard holds a multiple of `align` elements. The
// padding lies at the end: the last ranks' shards may hold padding only (n < world_size).
// Thread-safety: pure functions.
#pragma once

#include <algorithm>
#include <cstdint>

namespace tandem {

/// Rank `rank`'s shard of n elements, in elements.
struct ShardRange {
  int64_t offset = 0;  // the shard's first element: rank * size
  int64_t size = 0;    // elements of every rank's shard: a multiple of align, 0 when n == 0
  int64_t padded = 0;  // world_size * size: n rounded up to a multiple of align * world_size
  int64_t end() const { return offset + size; }
  /// The shard's elements that lie in [0, n): [offset, end()) clipped to n (empty: begin == end).
  int64_t begin_in(int64_t n) const { return std::min(offset, n); }
  int64_t end_in(int64_t n) const { return std::min(end(), n); }
};

/// The shard of `rank` among `world_size` of n elements, each shard a multiple of `align`
/// elements (e.g. 16 floats: 64-byte lines). Examples (align 1): n 10, world_size 4: size 3,
/// padded 12, rank 3 holds [9, 12) of which [9, 10) are elements; n 2, world_size 4: size 1,
/// ranks 2 and 3 hold padding only; n 0: every shard empty. Throws
/// Error(invalid_argument, "[shard] ...") for n < 0, world_size < 1, rank outside
/// [0, world_size) or align < 1.
ShardRange shard_range(int64_t n, int rank, int world_size, int64_t align = 1);

/// The rank whose shard (shard_range(n, ., world_size, align)) holds element i of [0, n); i
/// == n (the end) belongs to the last rank that holds an element, and n == 0 gives rank 0.
/// Throws as shard_range, and for i outside [0, n].
int shard_owner(int64_t i, int64_t n, int world_size, int64_t align = 1);

}  // namespace tandem
