// RandomResizedCrop's box and Resize + CenterCrop's geometry, as torchvision computes them.
#include "tandem/data/resized_crop_params.h"

#include <algorithm>
#include <cmath>

namespace tandem::data {

namespace {
// Python's round() for the non-negative values used here: half to even.
int64_t py_round(double v) {
  return static_cast<int64_t>(std::nearbyint(v));
}

double uniform_in(Philox& rng, double lo, double hi) {
  return lo + (hi - lo) * static_cast<double>(rng.uniform());
}
}  // namespace

CropBox random_resized_crop_box(int64_t width, int64_t height, const std::array<double, 2>& scale,
                                const std::array<double, 2>& ratio, Philox& rng) {
  const double area = static_cast<double>(width) * static_cast<double>(height);
  const double log_lo = std::log(ratio[0]), log_hi = std::log(ratio[1]);
  for (int attempt = 0; attempt < 10; ++attempt) {
    const double target_area = area * uniform_in(rng, scale[0], scale[1]);
    const double aspect = std::exp(uniform_in(rng, log_lo, log_hi));
    const int64_t w = py_round(std::sqrt(target_area * aspect));
    const int64_t h = py_round(std::sqrt(target_area / aspect));
    if (w > 0 && w <= width && h > 0 && h <= height) {
      CropBox b;
      b.w = w;
      b.h = h;
      b.y = static_cast<int64_t>(rng.randint64(static_cast<uint64_t>(height - h) + 1));
      b.x = static_cast<int64_t>(rng.randint64(static_cast<uint64_t>(width - w) + 1));
      return b;
    }
  }
  // Fallback: the centred crop of the whole image, its aspect ratio clamped into the range.
  const double in_ratio = static_cast<double>(width) / static_cast<double>(height);
  CropBox b{0, 0, width, height};
  if (in_ratio < std::min(ratio[0], ratio[1])) {
    b.h = py_round(static_cast<double>(width) / std::min(ratio[0], ratio[1]));
  } else if (in_ratio > std::max(ratio[0], ratio[1])) {
    b.w = py_round(static_cast<double>(height) * std::max(ratio[0], ratio[1]));
  }
  b.y = (height - b.h) / 2;
  b.x = (width - b.w) / 2;
  return b;
}

std::array<int64_t, 2> resize_shorter_side(int64_t width, int64_t height, int64_t resize_size) {
  const bool wide = width >= height;
  const int64_t shorter = wide ? height : width, longer = wide ? width : height;
  // int(size * long / short) in Python: float division, then truncation.
  const auto other =
      static_cast<int64_t>(static_cast<double>(resize_size) * static_cast<double>(longer) /
                           static_cast<double>(shorter));
  return wide ? std::array<int64_t, 2>{other, resize_size}
              : std::array<int64_t, 2>{resize_size, other};
}

CropBox center_crop_box(int64_t resized_width, int64_t resized_height, int64_t size) {
  CropBox b;
  b.w = size;
  b.h = size;
  b.x = py_round(static_cast<double>(resized_width - size) / 2.0);
  b.y = py_round(static_cast<double>(resized_height - size) / 2.0);
  return b;
}

}  // namespace tandem::data
