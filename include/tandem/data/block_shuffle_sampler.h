// BlockShuffleSampler: a page-aware shuffle for datasets read from mapped files (packed.h).
// The n indices are cut into blocks of `block_size` consecutive records (the last may be
// shorter); the blocks are put in a random order (Fisher-Yates); the resulting stream then
// passes through a shuffle buffer of `window` indices (tf.data's shuffle: fill the buffer, then
// repeatedly emit a uniformly chosen entry and refill its slot from the stream; the buffer's
// rest comes out in random order). Records of one block are thus read within a short span of
// the epoch (their pages come in with one readahead), while neighbours in the output are mostly
// from different blocks. A pure function of (seed, epoch): Philox(seed, epoch, 1 | 2,
// 0x80000000), streams no other sampler or sample uses.
//
// How close to a full shuffle (RandomSampler), measured over 8 epochs by
// tests/data/block_shuffle_sampler_test.cpp for n = 20000, block_size = 32:
//   adjacent-same-block fraction, the share of neighbouring output pairs from one block:
//     RandomSampler (block_size - 1) / (n - 1) = 0.0016; this sampler about
//     block_size / (2 * window): window 1024: 0.015, window 4096: 0.0042 (test bounds 0.025
//     and 0.007); window 1: 0.969 (blocks in order).
//   mean |displacement| / n, how far a record lands from its index: RandomSampler 0.334;
//     this sampler 0.336 (window 1024) and 0.335 (4096): blocks go anywhere in the epoch
//     (test bound: within 0.02 of RandomSampler's).
//   So a window of 64 blocks leaves about 1 neighbouring pair in 130 from the same block;
//   block_size = 1 with window >= n is a uniform permutation.
// Thread-safety: immutable; indices() may be called concurrently.
#pragma once

#include <cstdint>
#include <vector>

#include "tandem/data/sampler.h"

namespace tandem::data {

class BlockShuffleSampler final : public Sampler {
 public:
  /// Throws Error(invalid_argument) for n < 0, block_size < 1 or window < 1.
  BlockShuffleSampler(int64_t n, int64_t block_size, int64_t window, uint64_t seed);
  int64_t size() const override { return n_; }
  void indices(uint64_t epoch, std::vector<int64_t>& out) const override;
  int64_t block_size() const { return block_size_; }
  int64_t window() const { return window_; }

 private:
  int64_t n_, block_size_, window_;
  uint64_t seed_;
};

}  // namespace tandem::data
