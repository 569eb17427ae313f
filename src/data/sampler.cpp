#include "tandem/data/sampler.h"

#include <numeric>

#include "tandem/error.h"
#include "tandem/rng.h"

namespace tandem::data {

namespace {
// Counter word reserved for shuffles: sample indices are < 2^63, so their high word never
// reaches 0x80000000 and a shuffle's stream never equals a sample's augmentation stream.
constexpr uint32_t kShuffleStream = 0x80000000u;
}  // namespace

void random_permutation(int64_t n, uint64_t seed, uint64_t epoch, std::vector<int64_t>& out) {
  out.resize(static_cast<size_t>(n));
  std::iota(out.begin(), out.end(), int64_t{0});
  Philox rng(seed, epoch, 0, kShuffleStream);
  // Fisher-Yates (Knuth, TAOCP vol. 2, Algorithm P): swap position i with a uniform j in [0, i].
  for (int64_t i = n - 1; i > 0; --i) {
    const int64_t j = static_cast<int64_t>(rng.randint64(static_cast<uint64_t>(i) + 1));
    std::swap(out[static_cast<size_t>(i)], out[static_cast<size_t>(j)]);
  }
}

SequentialSampler::SequentialSampler(int64_t n) : n_(n) {
  TD_CHECK_ARG(n >= 0, "sampler", "expected a dataset size >= 0, found {}", n);
}

void SequentialSampler::indices(uint64_t, std::vector<int64_t>& out) const {
  out.resize(static_cast<size_t>(n_));
  std::iota(out.begin(), out.end(), int64_t{0});
}

RandomSampler::RandomSampler(int64_t n, uint64_t seed) : n_(n), seed_(seed) {
  TD_CHECK_ARG(n >= 0, "sampler", "expected a dataset size >= 0, found {}", n);
}

void RandomSampler::indices(uint64_t epoch, std::vector<int64_t>& out) const {
  random_permutation(n_, seed_, epoch, out);
}

DistributedSampler::DistributedSampler(int64_t n, int world_size, int rank, bool shuffle, uint64_t seed,
                                       bool drop_last)
    : n_(n), world_size_(world_size), rank_(rank), shuffle_(shuffle), seed_(seed), drop_last_(drop_last) {
  TD_CHECK_ARG(n >= 0, "sampler", "expected a dataset size >= 0, found {}", n);
  TD_CHECK_ARG(world_size >= 1, "sampler", "expected world_size >= 1, found {}", world_size);
  TD_CHECK_ARG(rank >= 0 && rank < world_size, "sampler", "expected rank in [0, {}), found {}", world_size, rank);
  num_samples_ = drop_last ? n / world_size : (n + world_size - 1) / world_size;
}

void DistributedSampler::indices(uint64_t epoch, std::vector<int64_t>& out) const {
  out.resize(static_cast<size_t>(num_samples_));
  if (num_samples_ == 0) return;
  // Position p of the padded global order maps to p mod n of the base order (wrap-around).
  std::vector<int64_t> base;
  if (shuffle_) random_permutation(n_, seed_, epoch, base);
  for (int64_t k = 0; k < num_samples_; ++k) {
    const int64_t p = (rank_ + k * world_size_) % n_;
    out[static_cast<size_t>(k)] = shuffle_ ? base[static_cast<size_t>(p)] : p;
  }
}

ShardSampler::ShardSampler(int64_t n, int world_size, int rank) : world_size_(world_size), rank_(rank) {
  TD_CHECK_ARG(n >= 0, "sampler", "expected a dataset size >= 0, found {}", n);
  TD_CHECK_ARG(world_size >= 1, "sampler", "expected world_size >= 1, found {}", world_size);
  TD_CHECK_ARG(rank >= 0 && rank < world_size, "sampler", "expected rank in [0, {}), found {}", world_size, rank);
  size_ = n > rank ? (n - rank + world_size - 1) / world_size : 0;
}

void ShardSampler::indices(uint64_t, std::vector<int64_t>& out) const {
  out.resize(static_cast<size_t>(size_));
  for (int64_t k = 0; k < size_; ++k) out[static_cast<size_t>(k)] = rank_ + k * world_size_;
}

}  // namespace tandem::data
