// FusedImageTransform: zero padding + random crop + random horizontal flip + normalize, done
// in one pass per sample from u8 [C, H, W] to f32 [C, crop_height, crop_width].
// Semantics follow torchvision/PyTorch as used in the reference Fashion-MNIST recipe
// (/work/shared/peers/torch_fmnist.py): x = u8 / 255 (f32); pad with zeros on all four sides
// (so a padded pixel becomes (0 - mean) / std); crop at offsets dy, dx drawn uniformly from
// [0, H + 2*pad - crop_height] and [0, W + 2*pad - crop_width]; flip reverses the W axis
// with probability flip_p; out = (x - mean[c]) / std[c] (torchvision Normalize), all in f32
// with the same operation order, so values equal PyTorch's bit for bit.
// Random draws per sample: Philox(seed, epoch, index) -> dy, then dx, then the flip; see params().
// Thread-safety: immutable after construction; apply() and params() may run concurrently.
#pragma once

#include <cstddef>
#include <vector>

#include "tandem/data/transform.h"

namespace tandem::data {

struct FusedImageTransformOptions {
  int64_t pad = 0;          // zero padding on each side, pixels
  int64_t crop_height = 0;  // 0 = input height
  int64_t crop_width = 0;   // 0 = input width
  float flip_p = 0.0f;      // probability of a horizontal flip
  std::vector<float> mean{0.0f};  // one value, or one per channel
  std::vector<float> std{1.0f};   // one value, or one per channel; each > 0
};

/// The random choices made for one sample.
struct AugmentParams {
  int64_t dy = 0;  // crop row offset in the padded image, [0, H + 2*pad - crop_height]
  int64_t dx = 0;  // crop column offset, [0, W + 2*pad - crop_width]
  bool flip = false;
};

class FusedImageTransform final : public Transform {
 public:
  /// Throws Error(invalid_argument) for pad < 0, crop sizes < 0, flip_p outside [0, 1],
  /// empty mean/std, mean and std of different lengths or std <= 0.
  explicit FusedImageTransform(FusedImageTransformOptions options);

  /// The reference Fashion-MNIST training augmentation: pad 2, crop 28x28, flip_p 0.5,
  /// mean 0.2860, std 0.3530.
  static FusedImageTransformOptions fashion_mnist_train();
  /// Evaluation: normalize only (mean 0.2860, std 0.3530).
  static FusedImageTransformOptions fashion_mnist_eval();

  ImageDims output_dims(const ImageDims& in) const override;
  void apply(const uint8_t* in, const ImageDims& in_dims, float* out, const SampleKey& key) const override;

  /// The crop offsets and flip apply() uses for `key` on an input of shape `in`.
  AugmentParams params(const SampleKey& key, const ImageDims& in) const;
  /// The normalized value of u8 value v in channel c: (f32(v) / 255 - mean[c]) / std[c].
  float normalized(int64_t c, uint8_t v) const { return lut_[static_cast<std::size_t>(lut_index(c)) * 256 + v]; }
  const FusedImageTransformOptions& options() const { return opt_; }

 private:
  int64_t lut_index(int64_t c) const { return opt_.mean.size() == 1 ? 0 : c; }
  FusedImageTransformOptions opt_;
  std::vector<float> lut_;  // [channels of mean/std, 256]
};

}  // namespace tandem::data
