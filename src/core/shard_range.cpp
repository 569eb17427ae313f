#include "tandem/shard_range.h"

#include "tandem/error.h"

namespace tandem {

ShardRange shard_range(int64_t n, int rank, int world_size, int64_t align) {
  TD_CHECK_ARG(n >= 0, "shard", "expected n >= 0 elements, got {}", n);
  TD_CHECK_ARG(world_size >= 1, "shard", "expected world_size >= 1, got {}", world_size);
  TD_CHECK_ARG(rank >= 0 && rank < world_size, "shard",
               "rank {} of world_size {}: expected 0 <= rank < world_size", rank, world_size);
  TD_CHECK_ARG(align >= 1, "shard", "expected align >= 1 elements, got {}", align);
  const int64_t unit = align * world_size;
  ShardRange r;
  r.padded = (n + unit - 1) / unit * unit;
  r.size = r.padded / world_size;
  r.offset = rank * r.size;
  return r;
}

int shard_owner(int64_t i, int64_t n, int world_size, int64_t align) {
  const ShardRange r = shard_range(n, 0, world_size, align);
  TD_CHECK_ARG(i >= 0 && i <= n, "shard", "element {} of {}: expected 0 <= element <= n", i, n);
  if (n == 0) return 0;
  return static_cast<int>(std::min<int64_t>(i, n - 1) / r.size);
}

}  // namespace tandem
