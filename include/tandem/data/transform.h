// Transform: turns one sample's u8 pixels [C, H, W] into f32 [C', H', W'] written at a given
// destination (a batch slot), in one pass. Randomness is a pure function of SampleKey
// (seed, epoch, sample index): never of a thread, so results do not depend on num_workers,
// and a resumed run sees the same augmentation.
// Thread-safety: apply() is const and called concurrently by loader workers.
#pragma once

#include <cstdint>
#include <vector>

#include "tandem/data/dataset.h"

namespace tandem::data {

/// What keys a sample's random draws. `index` is the dataset index (not the position in the
/// epoch), so a sample is augmented the same way whatever the sampler or rank.
struct SampleKey {
  uint64_t seed = 0;
  uint64_t epoch = 0;
  int64_t index = 0;
};

/// Per-thread working memory a transform may use (decoded pixels, resampling rows); each
/// loader thread owns one and reuses it, so a transform allocates only while buffers grow.
struct TransformScratch {
  std::vector<uint8_t> bytes;
  std::vector<uint8_t> bytes2;
  std::vector<float> floats;
};

class Transform {
 public:
  virtual ~Transform() = default;
  /// Output shape for input shape `in`; throws Error(invalid_argument) when the transform
  /// cannot apply to it (e.g. a crop larger than the padded image, a mean per channel that
  /// does not match C).
  virtual ImageDims output_dims(const ImageDims& in) const = 0;
  /// Writes output_dims(in).numel() f32 values, [C', H', W'], to `out`. `in` holds
  /// in.numel() u8 values [C, H, W]. No allocation.
  virtual void apply(const uint8_t* in, const ImageDims& in_dims, float* out, const SampleKey& key) const = 0;
  /// What the loader calls for each sample: writes output_dims(in_dims).numel() f32 values to
  /// `out`, where `in_dims` is the dataset's dims(). The default handles raw samples by
  /// calling apply() and throws Error(format) for an encoded one (naming its source); a
  /// transform that decodes images overrides it. Throws what decoding throws (Error(format)
  /// naming the file and the decoder's message).
  virtual void apply_sample(const Sample& sample, const ImageDims& in_dims, float* out, const SampleKey& key,
                            TransformScratch& scratch) const;
};

}  // namespace tandem::data
