#include "tandem/data/sampler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <numeric>

#include "tandem/error.h"

using namespace tandem;
using namespace tandem::data;

namespace {

bool is_permutation_of_range(std::vector<int64_t> v, int64_t n) {
  if (static_cast<int64_t>(v.size()) != n) return false;
  std::sort(v.begin(), v.end());
  for (int64_t i = 0; i < n; ++i)
    if (v[static_cast<size_t>(i)] != i) return false;
  return true;
}

// torch.utils.data.DistributedSampler.__iter__, written as in its source: pad the order by
// repeating it from the start, or cut it, then take every world_size-th from rank.
std::vector<int64_t> torch_distributed(std::vector<int64_t> order, int world, int rank, bool drop_last) {
  const int64_t n = static_cast<int64_t>(order.size());
  // num_samples = ceil((n - world) / world) when cutting, else ceil(n / world)
  const int64_t num = drop_last && n % world ? (n < world ? 0 : (n - world + world - 1) / world) : (n + world - 1) / world;
  const int64_t total = num * world;
  if (!drop_last) {
    const std::vector<int64_t> base = order;
    while (static_cast<int64_t>(order.size()) < total) order.insert(order.end(), base.begin(), base.end());
  }
  order.resize(static_cast<size_t>(total));
  std::vector<int64_t> out;
  for (int64_t p = rank; p < total; p += world) out.push_back(order[static_cast<size_t>(p)]);
  return out;
}

}  // namespace

TEST(Sampler, SequentialIsTheIdentity) {
  SequentialSampler s(7);
  std::vector<int64_t> v;
  s.indices(3, v);
  EXPECT_EQ(v, (std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6}));
  EXPECT_THROW(SequentialSampler(-1), Error);
}

TEST(Sampler, RandomIsAPureFunctionOfSeedAndEpoch) {
  RandomSampler a(1000, 42), b(1000, 42), c(1000, 43);
  std::vector<int64_t> a0, a0again, b0, a1, c0;
  a.indices(0, a0);
  a.indices(0, a0again);
  b.indices(0, b0);
  a.indices(1, a1);
  c.indices(0, c0);
  EXPECT_TRUE(is_permutation_of_range(a0, 1000));
  EXPECT_TRUE(is_permutation_of_range(a1, 1000));
  EXPECT_EQ(a0, a0again);
  EXPECT_EQ(a0, b0);
  EXPECT_NE(a0, a1);
  EXPECT_NE(a0, c0);
  std::vector<int64_t> id(1000);
  std::iota(id.begin(), id.end(), 0);
  EXPECT_NE(a0, id);
  std::vector<int64_t> empty;
  RandomSampler(0, 1).indices(0, empty);
  EXPECT_TRUE(empty.empty());
}

TEST(Sampler, RandomPermutationsAreUniform) {
  // All 6 orders of 3 items over 60000 epochs: 10000 each, sd ~91. A biased shuffle (j drawn
  // from [0, n) instead of [0, i]) makes some orders 8889 and others 11111.
  std::map<std::vector<int64_t>, int> count;
  std::vector<int64_t> v;
  for (uint64_t e = 0; e < 60000; ++e) {
    random_permutation(3, 7, e, v);
    ++count[v];
  }
  ASSERT_EQ(count.size(), 6u);
  for (const auto& [perm, c] : count) {
    EXPECT_GT(c, 9500);
    EXPECT_LT(c, 10500);
  }
}

TEST(Sampler, DistributedMatchesTorchPaddingAndCutting) {
  for (int64_t n : {0, 1, 2, 7, 10, 12}) {
    for (int world : {1, 3, 4}) {
      for (bool drop_last : {false, true}) {
        for (bool shuffle : {false, true}) {
          std::vector<int64_t> order(static_cast<size_t>(n));
          std::iota(order.begin(), order.end(), 0);
          if (shuffle) random_permutation(n, 5, 2, order);
          std::vector<int64_t> seen;
          int64_t per_rank = -1;
          for (int r = 0; r < world; ++r) {
            DistributedSampler s(n, world, r, shuffle, 5, drop_last);
            std::vector<int64_t> got;
            s.indices(2, got);
            if (n == 0) {
              EXPECT_TRUE(got.empty());
              continue;
            }
            EXPECT_EQ(got, torch_distributed(order, world, r, drop_last))
                << "n " << n << " world " << world << " rank " << r << " drop_last " << drop_last;
            EXPECT_EQ(static_cast<int64_t>(got.size()), s.size());
            if (per_rank >= 0) {
              EXPECT_EQ(s.size(), per_rank) << "ranks differ in sample count";
            }
            per_rank = s.size();
            seen.insert(seen.end(), got.begin(), got.end());
          }
          if (n && !drop_last) {  // every sample seen at least once
            std::sort(seen.begin(), seen.end());
            seen.erase(std::unique(seen.begin(), seen.end()), seen.end());
            EXPECT_EQ(static_cast<int64_t>(seen.size()), n);
          }
        }
      }
    }
  }
  EXPECT_THROW(DistributedSampler(10, 0, 0), Error);
  EXPECT_THROW(DistributedSampler(10, 2, 2), Error);
}
