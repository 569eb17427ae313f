// The shard rule (tandem/shard_range.h): n elements padded to a multiple of align * world_size
// and cut into world_size equal shards; every element in exactly one shard, the owner of an
// element is the rank whose shard holds it.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tandem/error.h"
#include "tandem/shard_range.h"

namespace tandem {
namespace {

TEST(ShardRange, EqualShardsOfADivisibleRange) {
  for (int r = 0; r < 4; ++r) {
    const ShardRange s = shard_range(12, r, 4);
    EXPECT_EQ(s.size, 3);
    EXPECT_EQ(s.offset, 3 * r);
    EXPECT_EQ(s.end(), 3 * r + 3);
    EXPECT_EQ(s.padded, 12);
    EXPECT_EQ(s.begin_in(12), 3 * r);
    EXPECT_EQ(s.end_in(12), 3 * r + 3);
  }
}

TEST(ShardRange, ARangeNotDivisibleIsPaddedAtTheEnd) {
  // 10 over 4: shards of 3, padded to 12; rank 3 holds element 9 and two pads.
  const ShardRange last = shard_range(10, 3, 4);
  EXPECT_EQ(last.size, 3);
  EXPECT_EQ(last.padded, 12);
  EXPECT_EQ(last.offset, 9);
  EXPECT_EQ(last.begin_in(10), 9);
  EXPECT_EQ(last.end_in(10), 10);
  // Every element lies in exactly one shard, in order.
  std::vector<int> hits(10, 0);
  for (int r = 0; r < 4; ++r) {
    const ShardRange s = shard_range(10, r, 4);
    for (int64_t i = s.begin_in(10); i < s.end_in(10); ++i) {
      ++hits[static_cast<size_t>(i)];
      EXPECT_EQ(shard_owner(i, 10, 4), r) << i;
    }
  }
  EXPECT_EQ(hits, std::vector<int>(10, 1));
}

TEST(ShardRange, FewerElementsThanRanksLeavesTheLastShardsPaddingOnly) {
  for (int r = 0; r < 4; ++r) {
    const ShardRange s = shard_range(2, r, 4);
    EXPECT_EQ(s.size, 1);
    EXPECT_EQ(s.padded, 4);
    EXPECT_EQ(s.end_in(2) - s.begin_in(2), r < 2 ? 1 : 0) << r;
  }
  EXPECT_EQ(shard_owner(1, 2, 4), 1);
  EXPECT_EQ(shard_owner(2, 2, 4), 1);  // the end: the last rank holding an element
}

TEST(ShardRange, NoElementsGiveEmptyShards) {
  for (int r = 0; r < 3; ++r) {
    const ShardRange s = shard_range(0, r, 3, 16);
    EXPECT_EQ(s.size, 0);
    EXPECT_EQ(s.offset, 0);
    EXPECT_EQ(s.padded, 0);
    EXPECT_EQ(s.begin_in(0), s.end_in(0));
  }
  EXPECT_EQ(shard_owner(0, 0, 3), 0);
}

TEST(ShardRange, AlignmentMakesEveryShardWholeLines) {
  // The offloaded optimizer's buckets: 16-float lines. 100 over 3 ranks: 48 per line unit, so
  // padded to 144 and shards of 48.
  const ShardRange s = shard_range(100, 2, 3, 16);
  EXPECT_EQ(s.size, 48);
  EXPECT_EQ(s.offset, 96);
  EXPECT_EQ(s.padded, 144);
  EXPECT_EQ(s.end_in(100) - s.begin_in(100), 4);
  // One rank and a multiple of the alignment: the range itself.
  const ShardRange one = shard_range(160, 0, 1, 16);
  EXPECT_EQ(one.size, 160);
  EXPECT_EQ(one.padded, 160);
  // One rank, not a multiple: rounded up to the next line.
  EXPECT_EQ(shard_range(17, 0, 1, 16).padded, 32);
  EXPECT_EQ(shard_owner(47, 100, 3, 16), 0);
  EXPECT_EQ(shard_owner(48, 100, 3, 16), 1);
  EXPECT_EQ(shard_owner(99, 100, 3, 16), 2);
}

TEST(ShardRange, BadArgumentsAreRefusedNamingTheValue) {
  const auto message = [](auto f) {
    try {
      f();
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::invalid_argument);
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message([] { shard_range(-1, 0, 2); }).find("expected n >= 0 elements, got -1"),
            std::string::npos);
  EXPECT_NE(message([] { shard_range(4, 0, 0); }).find("expected world_size >= 1, got 0"),
            std::string::npos);
  EXPECT_NE(message([] { shard_range(4, 2, 2); }).find("rank 2 of world_size 2"),
            std::string::npos);
  EXPECT_NE(message([] { shard_range(4, 0, 2, 0); }).find("expected align >= 1 elements, got 0"),
            std::string::npos);
  EXPECT_NE(message([] { shard_owner(5, 4, 2); }).find("element 5 of 4"), std::string::npos);
}

}  // namespace
}  // namespace tandem
