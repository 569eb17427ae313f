// Samplers: the order of dataset indices in an epoch, as a pure function of (seed, epoch)
// (and rank for the distributed one), so a resumed run replays the same order.
// Shuffles are Fisher-Yates driven by Philox(seed, epoch, 0, 0x80000000) — a stream no sample
// index uses (transforms use Philox(seed, epoch, index)).
// Thread-safety: immutable; indices() may be called concurrently.
#pragma once

#include <cstdint>
#include <vector>

namespace tandem::data {

class Sampler {
 public:
  virtual ~Sampler() = default;
  /// Number of indices per epoch.
  virtual int64_t size() const = 0;
  /// Fills `out` with size() dataset indices for `epoch` (resizes it; reuses its capacity).
  virtual void indices(uint64_t epoch, std::vector<int64_t>& out) const = 0;
};

/// 0, 1, ..., n-1 every epoch. Throws Error(invalid_argument) for n < 0.
class SequentialSampler final : public Sampler {
 public:
  explicit SequentialSampler(int64_t n);
  int64_t size() const override { return n_; }
  void indices(uint64_t epoch, std::vector<int64_t>& out) const override;

 private:
  int64_t n_;
};

/// A permutation of 0..n-1, new every epoch, a pure function of (seed, epoch).
class RandomSampler final : public Sampler {
 public:
  RandomSampler(int64_t n, uint64_t seed);
  int64_t size() const override { return n_; }
  void indices(uint64_t epoch, std::vector<int64_t>& out) const override;

 private:
  int64_t n_;
  uint64_t seed_;
};

/// The share of rank `rank` out of `world_size`, like torch.utils.data.DistributedSampler:
/// every rank gets the same number of samples. The (shuffled, if `shuffle`) order of all n
/// indices is the same on every rank; without drop_last it is padded by wrapping around to
/// the beginning (repeatedly when n < world_size) up to ceil(n / world_size) * world_size;
/// with drop_last the tail is cut to floor(n / world_size) * world_size. Rank r takes
/// positions r, r + world_size, r + 2*world_size, ...
/// n == 0 gives 0 samples per rank. Throws Error(invalid_argument) for world_size < 1, rank
/// outside [0, world_size) or n < 0.
class DistributedSampler final : public Sampler {
 public:
  DistributedSampler(int64_t n, int world_size, int rank, bool shuffle = true, uint64_t seed = 0,
                     bool drop_last = false);
  int64_t size() const override { return num_samples_; }
  void indices(uint64_t epoch, std::vector<int64_t>& out) const override;

 private:
  int64_t n_;
  int world_size_, rank_;
  bool shuffle_;
  uint64_t seed_;
  bool drop_last_;
  int64_t num_samples_;  // per rank
};

/// Evaluation's share of rank `rank` out of `world_size`: positions rank, rank + world_size,
/// ... below n, in order, with no padding, so over all ranks every index appears exactly once
/// (ranks hold ceil or floor of n / world_size indices). Throws Error(invalid_argument) as
/// DistributedSampler.
class ShardSampler final : public Sampler {
 public:
  ShardSampler(int64_t n, int world_size, int rank);
  int64_t size() const override { return size_; }
  void indices(uint64_t epoch, std::vector<int64_t>& out) const override;

 private:
  int world_size_, rank_;
  int64_t size_;
};

/// Fills `out` with a uniformly random permutation of 0..n-1 for (seed, epoch).
void random_permutation(int64_t n, uint64_t seed, uint64_t epoch, std::vector<int64_t>& out);

}  // namespace tandem::data
