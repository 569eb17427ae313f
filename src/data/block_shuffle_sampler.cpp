#include "tandem/data/block_shuffle_sampler.h"

#include <algorithm>

#include "tandem/error.h"
#include "tandem/rng.h"

namespace tandem::data {

namespace {
constexpr uint32_t kShuffleStream = 0x80000000u;  // as sampler.cpp: never a sample's stream
constexpr const char* kOp = "sampler";
}  // namespace

BlockShuffleSampler::BlockShuffleSampler(int64_t n, int64_t block_size, int64_t window, uint64_t seed)
    : n_(n), block_size_(block_size), window_(window), seed_(seed) {
  TD_CHECK_ARG(n >= 0, kOp, "expected a dataset size >= 0, found {}", n);
  TD_CHECK_ARG(block_size >= 1, kOp, "expected block_size >= 1, found {}", block_size);
  TD_CHECK_ARG(window >= 1, kOp, "expected a shuffle window >= 1, found {}", window);
}

void BlockShuffleSampler::indices(uint64_t epoch, std::vector<int64_t>& out) const {
  out.clear();
  out.reserve(static_cast<size_t>(n_));
  if (n_ == 0) return;
  const int64_t nblocks = (n_ + block_size_ - 1) / block_size_;
  std::vector<int64_t> order(static_cast<size_t>(nblocks));
  for (int64_t b = 0; b < nblocks; ++b) order[static_cast<size_t>(b)] = b;
  Philox block_rng(seed_, epoch, 1, kShuffleStream);
  for (int64_t i = nblocks - 1; i > 0; --i)  // Fisher-Yates over blocks
    std::swap(order[static_cast<size_t>(i)], order[static_cast<size_t>(block_rng.randint64(static_cast<uint64_t>(i) + 1))]);

  Philox rng(seed_, epoch, 2, kShuffleStream);
  std::vector<int64_t> buf;
  buf.reserve(static_cast<size_t>(std::min(window_, n_)));
  for (const int64_t b : order) {
    const int64_t end = std::min(n_, (b + 1) * block_size_);
    for (int64_t idx = b * block_size_; idx < end; ++idx) {
      if (static_cast<int64_t>(buf.size()) < window_) {
        buf.push_back(idx);
        continue;
      }
      const size_t j = static_cast<size_t>(rng.randint64(buf.size()));
      out.push_back(buf[j]);
      buf[j] = idx;
    }
  }
  while (!buf.empty()) {  // drain in random order
    const size_t j = static_cast<size_t>(rng.randint64(buf.size()));
    out.push_back(buf[j]);
    buf[j] = buf.back();
    buf.pop_back();
  }
}

}  // namespace tandem::data
