// StripesDataset: a data set of one's own behind tandem's data::Dataset interface. Sample i is
// a 1x16x16 u8 image of noise with a bright stripe whose direction is its class: 0 horizontal,
// 1 vertical, 2 the main diagonal, 3 the other diagonal, at a position drawn from (seed, i).
// The pixels are made on demand in get() into the worker's scratch buffer, as a decoding data
// set would do: nothing is held in memory.
// Thread-safety: get() is const and reentrant (the loader's workers call it concurrently).
#pragma once

#include <cstdint>
#include <vector>

#include "tandem/data/dataset.h"

class StripesDataset final : public tandem::data::Dataset {
 public:
  static constexpr int64_t kSide = 16;
  /// n samples drawn from `seed` (another seed gives other samples: a test set).
  StripesDataset(int64_t n, uint64_t seed) : n_(n), seed_(seed) {}
  int64_t size() const override { return n_; }
  tandem::data::ImageDims dims() const override { return {1, kSide, kSide}; }
  int64_t num_classes() const override { return 4; }
  tandem::data::Sample get(int64_t index, std::vector<uint8_t>& scratch) const override;
  std::string class_name(int64_t label) const override;

 private:
  int64_t n_;
  uint64_t seed_;
};
