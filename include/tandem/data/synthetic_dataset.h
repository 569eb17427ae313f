// SyntheticDataset: n learnable 1x28x28 images of 10 classes, made from a seed, for tests and
// benchmarks that need a dataset of a given size or speed without files. Sample i of class c
// is noise in [0, 60) with a bright bar (255) across row 2c + 4; classes are uniform.
// `delay` makes get() sleep that long first, standing in for slow storage or decoding (the
// sleep uses no CPU, so an input-bound run stays input-bound on a loaded machine).
// Thread-safety: as Dataset (get() is const and may run concurrently).
#pragma once

#include <chrono>
#include <cstdint>
#include <vector>

#include "tandem/data/dataset.h"

namespace tandem::data {

class SyntheticDataset final : public Dataset {
 public:
  /// Throws Error(invalid_argument) for n < 0 or a negative delay.
  SyntheticDataset(int64_t n, uint64_t seed, std::chrono::microseconds delay = std::chrono::microseconds(0));
  int64_t size() const override { return n_; }
  ImageDims dims() const override { return {1, 28, 28}; }
  int64_t num_classes() const override { return 10; }
  Sample get(int64_t index, std::vector<uint8_t>& scratch) const override;

 private:
  int64_t n_;
  std::chrono::microseconds delay_;
  std::vector<uint8_t> pixels_;  // [n, 28, 28]
  std::vector<int64_t> labels_;  // [n]
};

}  // namespace tandem::data
