#include "tandem/data/synthetic_dataset.h"

#include <thread>

#include "tandem/error.h"
#include "tandem/rng.h"

namespace tandem::data {

SyntheticDataset::SyntheticDataset(int64_t n, uint64_t seed, std::chrono::microseconds delay) : n_(n), delay_(delay) {
  TD_CHECK_ARG(n >= 0, "synthetic-dataset", "expected n >= 0 samples, found {}", n);
  TD_CHECK_ARG(delay.count() >= 0, "synthetic-dataset", "expected a delay >= 0 us, found {}", delay.count());
  pixels_.resize(static_cast<size_t>(n) * 784);
  labels_.resize(static_cast<size_t>(n));
  Philox rng(seed, 0);
  for (int64_t i = 0; i < n; ++i) {
    const uint32_t c = rng.randint(10);
    labels_[static_cast<size_t>(i)] = c;
    uint8_t* img = pixels_.data() + i * 784;
    for (int p = 0; p < 784; ++p) img[p] = static_cast<uint8_t>(rng.randint(60));
    for (int x = 0; x < 28; ++x) img[(2 * c + 4) * 28 + x] = 255;
  }
}

Sample SyntheticDataset::get(int64_t index, std::vector<uint8_t>&) const {
  TD_CHECK_ARG(index >= 0 && index < n_, "synthetic-dataset", "index {} out of range [0, {})", index, n_);
  if (delay_.count() > 0) std::this_thread::sleep_for(delay_);
  return {pixels_.data() + index * 784, labels_[static_cast<size_t>(index)]};
}

}  // namespace tandem::data
