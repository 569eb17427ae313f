// BlockShuffleSampler: a permutation, a pure function of (seed, epoch); how close its orders
// are to RandomSampler's, by the two measures block_shuffle_sampler.h documents, checked
// against the bounds stated there.
#include "tandem/data/block_shuffle_sampler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <numeric>

#include "tandem/error.h"

using namespace tandem;
using namespace tandem::data;

namespace {

// Whether `v` holds each of 0..n-1 once.
bool is_permutation_of_range(const std::vector<int64_t>& v, int64_t n) {
  std::vector<int64_t> range(static_cast<size_t>(n));
  std::iota(range.begin(), range.end(), int64_t{0});
  return std::is_permutation(v.begin(), v.end(), range.begin(), range.end());
}

struct Closeness {
  double same_block = 0;    // share of neighbouring output pairs from one block
  double displacement = 0;  // mean |output position - index| / n
};

// Both measures averaged over `epochs` epochs of `s`, with blocks of `block` records.
Closeness measure(const Sampler& s, int64_t block, int epochs) {
  Closeness c;
  std::vector<int64_t> order;
  const int64_t n = s.size();
  for (int e = 0; e < epochs; ++e) {
    s.indices(static_cast<uint64_t>(e), order);
    int64_t same = 0;
    double disp = 0;
    for (int64_t p = 0; p < n; ++p) {
      disp += static_cast<double>(std::llabs(order[static_cast<size_t>(p)] - p));
      if (p > 0 && order[static_cast<size_t>(p)] / block == order[static_cast<size_t>(p - 1)] / block) ++same;
    }
    c.same_block += static_cast<double>(same) / static_cast<double>(n - 1) / epochs;
    c.displacement += disp / static_cast<double>(n) / static_cast<double>(n) / epochs;
  }
  return c;
}

}  // namespace

TEST(BlockShuffleSampler, PermutationPureInSeedAndEpoch) {
  for (const int64_t n : {0, 1, 7, 100, 1001}) {
    const BlockShuffleSampler s(n, 16, 50, 3);
    std::vector<int64_t> a, b;
    s.indices(4, a);
    EXPECT_TRUE(is_permutation_of_range(a, n)) << n;
    s.indices(4, b);
    EXPECT_EQ(a, b);
    BlockShuffleSampler(n, 16, 50, 3).indices(4, b);
    EXPECT_EQ(a, b);
    if (n >= 100) {
      s.indices(5, b);
      EXPECT_NE(a, b);
      BlockShuffleSampler(n, 16, 50, 4).indices(4, b);
      EXPECT_NE(a, b);
    }
  }
  EXPECT_THROW(BlockShuffleSampler(-1, 1, 1, 0), Error);
  EXPECT_THROW(BlockShuffleSampler(10, 0, 1, 0), Error);
  EXPECT_THROW(BlockShuffleSampler(10, 1, 0, 0), Error);
}

TEST(BlockShuffleSampler, WindowOneReadsShuffledBlocksInOrder) {
  const BlockShuffleSampler s(100, 10, 1, 9);
  std::vector<int64_t> v;
  s.indices(0, v);
  for (size_t p = 0; p < v.size(); ++p) EXPECT_EQ(v[p] % 10, static_cast<int64_t>(p % 10)) << p;
  EXPECT_TRUE(is_permutation_of_range(v, 100));
}

TEST(BlockShuffleSampler, ClosenessToAFullShuffleWithinTheDocumentedBounds) {
  const int64_t n = 20000, block = 32;
  const int epochs = 8;
  const Closeness full = measure(RandomSampler(n, 1), block, epochs);
  const Closeness w1k = measure(BlockShuffleSampler(n, block, 1024, 1), block, epochs);
  const Closeness w4k = measure(BlockShuffleSampler(n, block, 4096, 1), block, epochs);
  const Closeness w1 = measure(BlockShuffleSampler(n, block, 1, 1), block, epochs);
  std::printf("same-block fraction: random %.4f, window 1024 %.4f, window 4096 %.4f, window 1 %.4f\n",
              full.same_block, w1k.same_block, w4k.same_block, w1.same_block);
  std::printf("mean |displacement| / n: random %.4f, window 1024 %.4f, window 4096 %.4f, window 1 %.4f\n",
              full.displacement, w1k.displacement, w4k.displacement, w1.displacement);
  // A full shuffle: (block - 1) / (n - 1) of neighbours share a block; displacement ~ 1/3.
  EXPECT_NEAR(full.same_block, 31.0 / 19999.0, 0.001);
  EXPECT_NEAR(full.displacement, 1.0 / 3.0, 0.01);
  EXPECT_LE(w1k.same_block, 0.025);
  EXPECT_LE(w4k.same_block, 0.007);
  EXPECT_LT(w4k.same_block, w1k.same_block);
  EXPECT_NEAR(w1k.displacement, full.displacement, 0.02);
  EXPECT_NEAR(w4k.displacement, full.displacement, 0.02);
  EXPECT_NEAR(w1.same_block, 1.0 - 624.0 / 19999.0, 1e-9);  // every pair but the 624 block seams
}
