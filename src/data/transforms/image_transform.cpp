// ImageTransform: the box and flip per sample, decoding (at a DCT scale where a JPEG allows),
// then one resampling pass into the batch slot.
#include "tandem/data/image_transform.h"

#include <algorithm>
#include <cmath>

#include "tandem/data/image_codec.h"
#include "tandem/error.h"
#include "tandem/rng.h"

namespace tandem::data {

namespace {
constexpr const char* kOp = "image_transform";

bool ordered_positive(const std::array<double, 2>& r) {
  return std::isfinite(r[0]) && std::isfinite(r[1]) && r[0] > 0.0 && r[0] <= r[1];
}

std::array<float, 3> per_channel(const std::vector<float>& v) {
  return v.size() == 1 ? std::array<float, 3>{v[0], v[0], v[0]}
                       : std::array<float, 3>{v[0], v[1], v[2]};
}

const char* name_of(const Sample& s) {
  return s.source ? s.source : "image";
}
}  // namespace

ImageTransform::ImageTransform(ImageTransformOptions o) : opt_(std::move(o)) {
  TD_CHECK_ARG(opt_.size > 0, kOp, "expected size > 0, found {}", opt_.size);
  TD_CHECK_ARG(opt_.resize_size >= opt_.size, kOp, "expected resize_size >= size ({}), found {}",
               opt_.size, opt_.resize_size);
  TD_CHECK_ARG(ordered_positive(opt_.scale), kOp,
               "expected scale (lo, hi) with 0 < lo <= hi, found ({}, {})", opt_.scale[0],
               opt_.scale[1]);
  TD_CHECK_ARG(ordered_positive(opt_.ratio), kOp,
               "expected ratio (lo, hi) with 0 < lo <= hi, found ({}, {})", opt_.ratio[0],
               opt_.ratio[1]);
  TD_CHECK_ARG(opt_.flip_p >= 0.0f && opt_.flip_p <= 1.0f, kOp,
               "expected flip_p in [0, 1], found {}", opt_.flip_p);
  TD_CHECK_ARG(
      (opt_.mean.size() == 1 || opt_.mean.size() == 3) && opt_.std.size() == opt_.mean.size(), kOp,
      "expected mean and std of 1 or 3 values each (the same count), found {} and {}",
      opt_.mean.size(), opt_.std.size());
  for (size_t c = 0; c < opt_.std.size(); ++c) {
    TD_CHECK_ARG(std::isfinite(opt_.mean[c]), kOp, "expected a finite mean, found mean[{}] = {}", c,
                 opt_.mean[c]);
    TD_CHECK_ARG(std::isfinite(opt_.std[c]) && opt_.std[c] > 0.0f, kOp,
                 "expected std > 0, found std[{}] = {}", c, opt_.std[c]);
  }
  affine_ = normalize_affine(per_channel(opt_.mean), per_channel(opt_.std));
}

ImageDims ImageTransform::output_dims(const ImageDims& in) const {
  TD_CHECK_ARG(in.channels == 1 || in.channels == 3, kOp,
               "expected 1 or 3 channels (gray or RGB), found {}", in.channels);
  return {3, opt_.size, opt_.size};
}

ImageSampleParams ImageTransform::params(const SampleKey& key, int64_t width,
                                         int64_t height) const {
  TD_CHECK_ARG(width > 0 && height > 0, kOp,
               "expected an image of at least 1x1 pixels, found {}x{}", width, height);
  ImageSampleParams p;
  const auto size = static_cast<double>(opt_.size);
  if (opt_.mode == ImageTransformMode::eval) {
    const auto [rw, rh] = resize_shorter_side(width, height, opt_.resize_size);
    const CropBox c = center_crop_box(rw, rh, opt_.size);
    const double sx = static_cast<double>(width) / static_cast<double>(rw);
    const double sy = static_cast<double>(height) / static_cast<double>(rh);
    p.x = static_cast<double>(c.x) * sx, p.y = static_cast<double>(c.y) * sy;
    p.w = size * sx, p.h = size * sy;
    p.clip_to_box = false;
    return p;
  }
  const uint64_t index = static_cast<uint64_t>(key.index);
  Philox rng(key.seed, key.epoch, static_cast<uint32_t>(index), static_cast<uint32_t>(index >> 32));
  const CropBox b = random_resized_crop_box(width, height, opt_.scale, opt_.ratio, rng);
  p.x = static_cast<double>(b.x), p.y = static_cast<double>(b.y);
  p.w = static_cast<double>(b.w), p.h = static_cast<double>(b.h);
  p.clip_to_box = true;
  p.flip = opt_.flip_p > 0.0f && rng.uniform() < opt_.flip_p;
  return p;
}

void ImageTransform::resample(const uint8_t* rgb, int64_t decoded_w, int64_t decoded_h,
                              int64_t width, int64_t height, const ImageSampleParams& p, float* out,
                              std::vector<float>& work) const {
  // The box in the decoded image's pixels (a DCT scale shrinks both axes by about num/8).
  const double fx = static_cast<double>(decoded_w) / static_cast<double>(width);
  const double fy = static_cast<double>(decoded_h) / static_cast<double>(height);
  const double size = static_cast<double>(opt_.size);
  RgbView view{rgb, decoded_w, decoded_h, decoded_w * 3};
  ResampleBox box{p.x * fx, p.y * fy, p.w * fx / size, p.h * fy / size};
  if (p.clip_to_box) {
    // The view is the crop itself, so taps never reach outside it (torchvision crops first).
    const auto edge = [](double v, int64_t n) {
      return std::clamp<int64_t>(std::llround(v), 0, n);
    };
    const int64_t x0 = std::min(edge(box.x0, decoded_w), decoded_w - 1);
    const int64_t y0 = std::min(edge(box.y0, decoded_h), decoded_h - 1);
    const int64_t x1 = std::max(edge((p.x + p.w) * fx, decoded_w), x0 + 1);
    const int64_t y1 = std::max(edge((p.y + p.h) * fy, decoded_h), y0 + 1);
    view = {rgb + y0 * view.row_stride + x0 * 3, x1 - x0, y1 - y0, view.row_stride};
    box.x0 -= static_cast<double>(x0);
    box.y0 -= static_cast<double>(y0);
  }
  resample_rgb_to_chw(view, box, opt_.size, opt_.size, p.flip, affine_, out, work);
}

void ImageTransform::apply_raw(const uint8_t* in, const ImageDims& d, float* out,
                               const SampleKey& key, TransformScratch& scratch) const {
  TD_CHECK_ARG((d.channels == 1 || d.channels == 3) && d.height > 0 && d.width > 0, kOp,
               "expected a raw sample of u8 [1 or 3, H, W] with H, W > 0, found [{}, {}, {}]",
               d.channels, d.height, d.width);
  // [C, H, W] planes to interleaved RGB [H, W, 3] (gray replicated), what the resampler reads.
  const int64_t hw = d.height * d.width;
  std::vector<uint8_t>& rgb = scratch.bytes2;
  if (static_cast<int64_t>(rgb.size()) < hw * 3) rgb.resize(static_cast<size_t>(hw * 3));
  const int64_t step = d.channels == 3 ? hw : 0;
  const uint8_t *r = in, *g = in + step, *b = in + 2 * step;
  for (int64_t i = 0; i < hw; ++i) {
    rgb[static_cast<size_t>(3 * i)] = r[i];
    rgb[static_cast<size_t>(3 * i + 1)] = g[i];
    rgb[static_cast<size_t>(3 * i + 2)] = b[i];
  }
  resample(rgb.data(), d.width, d.height, d.width, d.height, params(key, d.width, d.height), out,
           scratch.floats);
}

void ImageTransform::apply(const uint8_t* in, const ImageDims& in_dims, float* out,
                           const SampleKey& key) const {
  thread_local TransformScratch scratch;
  apply_raw(in, in_dims, out, key, scratch);
}

void ImageTransform::apply_sample(const Sample& sample, const ImageDims& in_dims, float* out,
                                  const SampleKey& key, TransformScratch& scratch) const {
  if (sample.encoding == Encoding::raw) {
    apply_raw(sample.pixels, in_dims, out, key, scratch);
    return;
  }
  const ImageInfo info = read_image_info(sample.pixels, sample.size, name_of(sample));
  const ImageSampleParams p = params(key, info.width, info.height);
  const ImageScale scale =
      sample.encoding == Encoding::jpeg
          ? jpeg_scale_for(p.w, p.h, static_cast<int>(opt_.size), static_cast<int>(opt_.size))
          : ImageScale{};
  const ImageInfo got =
      decode_image(sample.pixels, sample.size, name_of(sample), scale, scratch.bytes);
  resample(scratch.bytes.data(), got.width, got.height, info.width, info.height, p, out,
           scratch.floats);
}

}  // namespace tandem::data
