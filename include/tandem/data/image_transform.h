// ImageTransform: the ImageNet-style per-sample transform, fused from the source pixels to the
// f32 batch slot. Training: torchvision RandomResizedCrop(size, scale, ratio) (antialiased
// bilinear), RandomHorizontalFlip(flip_p), ToTensor, Normalize(mean, std). Evaluation:
// Resize(resize_size) (shorter side; antialiased bilinear), CenterCrop(size), ToTensor,
// Normalize. Geometry in resized_crop_params.h, the filter in image_resample.h.
// Inputs: a JPEG or PNG sample (decoded here; a JPEG at the smallest DCT scale 1/8..1 that
// still leaves the box at least size x size pixels, so the resampler only shrinks), or a raw
// sample u8 [C, H, W] with C = 1 (replicated to RGB) or 3. Output: f32 [3, size, size].
// Random draws per sample: Philox(seed, epoch, index) -> the crop (random_resized_crop_box),
// then the flip (one uniform < flip_p); evaluation draws nothing.
// Thread-safety: immutable after construction; apply(), apply_sample() and params() may run
// concurrently (apply_sample with one scratch per thread).
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "tandem/data/image_resample.h"
#include "tandem/data/resized_crop_params.h"
#include "tandem/data/transform.h"

namespace tandem::data {

enum class ImageTransformMode { train, eval };

struct ImageTransformOptions {
  ImageTransformMode mode = ImageTransformMode::train;
  int64_t size = 224;                      // output height and width, pixels
  int64_t resize_size = 256;               // eval: the shorter side before the centre crop, >= size
  std::array<double, 2> scale{0.08, 1.0};  // train: crop area / image area
  std::array<double, 2> ratio{3.0 / 4.0, 4.0 / 3.0};  // train: crop width / height
  float flip_p = 0.5f;                                // train: probability of a horizontal flip
  std::vector<float> mean{0.485f, 0.456f, 0.406f};    // one value, or one per RGB channel
  std::vector<float> std{0.229f, 0.224f, 0.225f};     // one value, or one per RGB channel; each > 0
};

/// Where one sample is read from, in the original image's pixels.
struct ImageSampleParams {
  /// The source rectangle mapped onto the size x size output. Train: the integer
  /// RandomResizedCrop box; eval: the centre crop's footprint, {left * s_x, top * s_y,
  /// size * s_x, size * s_y} with s = image size / resized size.
  double x = 0.0, y = 0.0, w = 0.0, h = 0.0;
  /// Train: filter taps stay inside the crop (crop, then resize); eval: inside the image
  /// (resize the image, then crop).
  bool clip_to_box = true;
  bool flip = false;
};

class ImageTransform final : public Transform {
 public:
  /// Throws Error(invalid_argument) for size <= 0, resize_size < size, scale or ratio not
  /// 0 < lo <= hi (finite), flip_p outside [0, 1], mean or std not of 1 or 3 values (the same
  /// count), or a std <= 0 or not finite.
  explicit ImageTransform(ImageTransformOptions options);

  /// {3, size, size} for any height and width (0 included: datasets of varying sizes). Throws
  /// Error(invalid_argument) when in.channels is not 1 or 3.
  ImageDims output_dims(const ImageDims& in) const override;
  /// A raw sample u8 [C, H, W] (C 1 or 3, H, W > 0) to f32 [3, size, size] at `out`. Uses a
  /// per-thread scratch of its own. Throws Error(invalid_argument) for other dims.
  void apply(const uint8_t* in, const ImageDims& in_dims, float* out,
             const SampleKey& key) const override;
  /// Raw samples as apply(); JPEG and PNG samples are decoded into `scratch` (allocating only
  /// while its buffers grow). Throws the decoder's Error(format), which names sample.source.
  void apply_sample(const Sample& sample, const ImageDims& in_dims, float* out,
                    const SampleKey& key, TransformScratch& scratch) const override;

  /// The box and flip used for `key` on an image of width x height pixels (both > 0).
  ImageSampleParams params(const SampleKey& key, int64_t width, int64_t height) const;
  /// The map from resampled u8 levels to the output: (v / 255 - mean[c]) / std[c].
  const ChannelAffine& affine() const { return affine_; }
  const ImageTransformOptions& options() const { return opt_; }

 private:
  // Resamples an RGB image of decoded_w x decoded_h pixels, decoded from an original of
  // width x height (smaller when a JPEG was decoded at a DCT scale), per `p`, into `out`.
  // `rgb` holds the rectangle `held` of it ([held.h, held.w, 3]), which covers what `p` reads.
  void resample(const uint8_t* rgb, const CropBox& held, int64_t decoded_w, int64_t decoded_h,
                int64_t width, int64_t height, const ImageSampleParams& p, float* out,
                std::vector<float>& work) const;
  void apply_raw(const uint8_t* in, const ImageDims& in_dims, float* out, const SampleKey& key,
                 TransformScratch& scratch) const;

  ImageTransformOptions opt_;
  ChannelAffine affine_;
};

}  // namespace tandem::data
