// ImageTransform: the box and flip per sample, decoding (a JPEG only the region read, at a DCT
// scale where the box allows), then one resampling pass into the batch slot.
#include "tandem/data/image_transform.h"

#include <algorithm>
#include <cmath>

#include "tandem/data/image_codec.h"
#include "tandem/error.h"
#include "tandem/rng.h"

namespace tandem::data {

namespace {
constexpr const char* kOp = "image_transform";
// Pixels decoded beyond the region the resampler reads on each side (image_codec.h:
// decode_image_region's pixels within 1 of a cut edge may differ from a full decode).
constexpr int64_t kRegionMargin = 2;

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

// The pixels of a decoded_w x decoded_h image (the original scaled by fx, fy) that resampling
// `p` to size x size reads. Clipped to the box: the crop, rounded to whole pixels. Otherwise
// the footprint widened by the filter's reach, max(scale, 1), plus a pixel for rounding.
CropBox source_region(const ImageSampleParams& p, double fx, double fy, int64_t decoded_w,
                      int64_t decoded_h, int64_t size) {
  const auto axis = [&](double start, double extent, double f, int64_t n, bool clip) {
    double lo = start * f, hi = (start + extent) * f;
    if (!clip) {
      const double reach = std::max(extent * f / static_cast<double>(size), 1.0) + 1.0;
      lo = std::floor(lo - reach), hi = std::ceil(hi + reach);
    }
    const int64_t a = std::min(std::clamp<int64_t>(std::llround(lo), 0, n), n - 1);
    const int64_t b = std::max(std::clamp<int64_t>(std::llround(hi), 0, n), a + 1);
    return std::array<int64_t, 2>{a, b - a};
  };
  const auto [x, w] = axis(p.x, p.w, fx, decoded_w, p.clip_to_box);
  const auto [y, h] = axis(p.y, p.h, fy, decoded_h, p.clip_to_box);
  return {x, y, w, h};
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

void ImageTransform::resample(const uint8_t* rgb, const CropBox& held, int64_t decoded_w,
                              int64_t decoded_h, int64_t width, int64_t height,
                              const ImageSampleParams& p, float* out,
                              std::vector<float>& work) const {
  // The box in the decoded image's pixels (a DCT scale shrinks both axes by about num/8).
  const double fx = static_cast<double>(decoded_w) / static_cast<double>(width);
  const double fy = static_cast<double>(decoded_h) / static_cast<double>(height);
  const double size = static_cast<double>(opt_.size);
  const CropBox r = source_region(p, fx, fy, decoded_w, decoded_h, opt_.size);
  TD_ASSERT(r.x >= held.x && r.y >= held.y && r.x + r.w <= held.x + held.w &&
            r.y + r.h <= held.y + held.h);
  const int64_t stride = held.w * 3;
  // Without clipping to the box the view is all that is held: the image, or a band holding
  // every tap (the filter's reach ends inside it).
  const CropBox v = p.clip_to_box ? r : held;
  const RgbView view{rgb + (v.y - held.y) * stride + (v.x - held.x) * 3, v.w, v.h, stride};
  const ResampleBox box{p.x * fx - static_cast<double>(v.x), p.y * fy - static_cast<double>(v.y),
                        p.w * fx / size, p.h * fy / size};
  resample_rgb_to_chw(view, box, opt_.size, opt_.size, p.flip, affine_, out, work);
}

void ImageTransform::apply_raw(const uint8_t* in, const ImageDims& d, float* out,
                               const SampleKey& key, TransformScratch& scratch) const {
  TD_CHECK_ARG((d.channels == 1 || d.channels == 3) && d.height > 0 && d.width > 0, kOp,
               "expected a raw sample of u8 [1 or 3, H, W] with H, W > 0, found [{}, {}, {}]",
               d.channels, d.height, d.width);
  const ImageSampleParams p = params(key, d.width, d.height);
  // The planes [C, H, W] of the region the resampler reads, interleaved to RGB [h, w, 3]
  // (gray replicated).
  const CropBox r = source_region(p, 1.0, 1.0, d.width, d.height, opt_.size);
  std::vector<uint8_t>& rgb = scratch.bytes2;
  if (static_cast<int64_t>(rgb.size()) < r.w * r.h * 3)
    rgb.resize(static_cast<size_t>(r.w * r.h * 3));
  const int64_t step = d.channels == 3 ? d.height * d.width : 0;
  uint8_t* o = rgb.data();
  for (int64_t y = r.y; y < r.y + r.h; ++y) {
    const uint8_t* src = in + y * d.width + r.x;
    const uint8_t *pr = src, *pg = src + step, *pb = src + 2 * step;
    for (int64_t x = 0; x < r.w; ++x, o += 3) o[0] = pr[x], o[1] = pg[x], o[2] = pb[x];
  }
  resample(rgb.data(), r, d.width, d.height, d.width, d.height, p, out, scratch.floats);
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
  if (info.encoding != Encoding::jpeg) {
    const ImageInfo got =
        decode_image(sample.pixels, sample.size, name_of(sample), ImageScale{}, scratch.bytes);
    resample(scratch.bytes.data(), CropBox{0, 0, got.width, got.height}, got.width, got.height,
             info.width, info.height, p, out, scratch.floats);
    return;
  }
  // A JPEG: only the pixels the resampler reads, plus the margin decode_image_region asks
  // for, at the smallest DCT scale that still leaves the box at least size x size.
  const int size = static_cast<int>(opt_.size);
  const ImageScale scale = jpeg_scale_for(p.w, p.h, size, size);
  const int64_t dw = scale.scaled(info.width), dh = scale.scaled(info.height);
  const CropBox r =
      source_region(p, static_cast<double>(dw) / static_cast<double>(info.width),
                    static_cast<double>(dh) / static_cast<double>(info.height), dw, dh, opt_.size);
  const int64_t x0 = std::max<int64_t>(r.x - kRegionMargin, 0);
  const int64_t y0 = std::max<int64_t>(r.y - kRegionMargin, 0);
  const int64_t x1 = std::min(r.x + r.w + kRegionMargin, dw);
  const int64_t y1 = std::min(r.y + r.h + kRegionMargin, dh);
  const ImageRegion want{static_cast<int>(x0), static_cast<int>(y0), static_cast<int>(x1 - x0),
                         static_cast<int>(y1 - y0)};
  ImageRegion got;
  decode_image_region(sample.pixels, sample.size, name_of(sample), scale, want, scratch.bytes, got);
  resample(scratch.bytes.data(), CropBox{got.x, got.y, got.width, got.height}, dw, dh, info.width,
           info.height, p, out, scratch.floats);
}

}  // namespace tandem::data
