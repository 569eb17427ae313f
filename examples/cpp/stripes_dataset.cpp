#include "stripes_dataset.h"

#include <array>
#include <string>

#include "tandem/error.h"
#include "tandem/rng.h"

tandem::data::Sample StripesDataset::get(int64_t index, std::vector<uint8_t>& scratch) const {
  TD_CHECK_ARG(index >= 0 && index < n_, "stripes", "sample {}: expected an index in [0, {})",
               index, n_);
  tandem::Philox rng(seed_, static_cast<uint64_t>(index));
  const int64_t label = rng.randint(4);
  const int64_t at = 2 + rng.randint(kSide - 4);  // the stripe's row, column or diagonal offset
  scratch.resize(kSide * kSide);
  for (int64_t y = 0; y < kSide; ++y) {
    for (int64_t x = 0; x < kSide; ++x) {
      const bool on = label == 0   ? y == at
                      : label == 1 ? x == at
                      : label == 2 ? x - y == at - kSide / 2
                                   : x + y == at + kSide / 2;
      scratch[y * kSide + x] = on ? 230 : static_cast<uint8_t>(rng.randint(80));
    }
  }
  tandem::data::Sample s;
  s.pixels = scratch.data();
  s.label = label;
  return s;
}

std::string StripesDataset::class_name(int64_t label) const {
  static const std::array<const char*, 4> names = {"horizontal", "vertical", "diagonal",
                                                   "anti-diagonal"};
  TD_CHECK_ARG(label >= 0 && label < 4, "stripes", "class {}: expected a label in [0, 4)", label);
  return names[static_cast<size_t>(label)];
}
