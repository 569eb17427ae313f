// Where an ImageNet-style transform samples an image: the random box of RandomResizedCrop
// (training) and the source box of Resize + CenterCrop (evaluation), in the original image's
// pixels. The formulas are torchvision's (torchvision.transforms.RandomResizedCrop.get_params,
// torchvision.transforms.functional.resize's size rule and center_crop's offsets); the random
// numbers come from tandem's Philox, so they differ from torch's while the formulas do not.
// Rounding is Python's round(): half to even (std::nearbyint under the default rounding mode).
// Thread-safety: pure functions; the Philox passed in is the caller's own.
#pragma once

#include <array>
#include <cstdint>

#include "tandem/rng.h"

namespace tandem::data {

/// An integer box in pixels: columns [x, x + w), rows [y, y + h). torchvision's get_params
/// returns it as (i, j, h, w) = (y, x, h, w).
struct CropBox {
  int64_t x = 0;
  int64_t y = 0;
  int64_t w = 0;
  int64_t h = 0;
  friend bool operator==(const CropBox&, const CropBox&) = default;
};

/// RandomResizedCrop.get_params for an image of width x height pixels (both > 0): up to ten
/// tries of target area = U(scale[0], scale[1]) * width * height and aspect ratio
/// exp(U(log ratio[0], log ratio[1])); w = round(sqrt(area * ratio)), h = round(sqrt(area /
/// ratio)); the first try with 0 < w <= width and 0 < h <= height is taken, at y = randint in
/// [0, height - h], x = randint in [0, width - w]. When none fits: the centred crop of the
/// whole image with its aspect ratio clamped to [ratio[0], ratio[1]] (w = round(h * ratio[1])
/// or h = round(w / ratio[0])), at ((height - h) / 2, (width - w) / 2) rounded down.
/// Draws per try: two uniforms (scale, then log-ratio), then two randints (y, then x) on success.
/// Expects 0 < scale[0] <= scale[1] and 0 < ratio[0] <= ratio[1] (checked by ImageTransform).
CropBox random_resized_crop_box(int64_t width, int64_t height, const std::array<double, 2>& scale,
                                const std::array<double, 2>& ratio, Philox& rng);

/// torchvision.transforms.Resize(resize_size) for an int size: the shorter side becomes
/// resize_size and the longer int(resize_size * long / short) (truncated). Returns {width, height}.
std::array<int64_t, 2> resize_shorter_side(int64_t width, int64_t height, int64_t resize_size);

/// The offsets of torchvision's CenterCrop(size) of a resized image of `resized_width` x
/// `resized_height` (each >= size): left = int(round((resized_width - size) / 2.0)), top alike.
/// Returns the crop in the resized image's pixels: {left, top, size, size}.
CropBox center_crop_box(int64_t resized_width, int64_t resized_height, int64_t size);

}  // namespace tandem::data
