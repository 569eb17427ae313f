// ImageTransform on encoded samples: PNG equals the raw path pixel for pixel; a JPEG decoded
// at a DCT scale stays close to the same crop resampled from the full-size decode; decoding
// errors propagate as Error(format) naming the source.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>

#include "image_test_util.h"
#include "tandem/data/image_codec.h"
#include "tandem/data/image_transform.h"
#include "tandem/error.h"

using namespace tandem;
using namespace tandem::data;

namespace {

// A smooth RGB [h, w, 3] image (gradients and a slow wave) that JPEG keeps well.
std::vector<uint8_t> smooth_hwc(int w, int h) {
  std::vector<uint8_t> v(static_cast<size_t>(w * h * 3));
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x) {
      uint8_t* p = v.data() + (y * w + x) * 3;
      p[0] = static_cast<uint8_t>(255 * x / (w - 1));
      p[1] = static_cast<uint8_t>(255 * y / (h - 1));
      p[2] = static_cast<uint8_t>(127.5 + 100 * std::sin(x * 0.05) * std::cos(y * 0.04));
    }
  return v;
}

std::vector<uint8_t> to_chw(const std::vector<uint8_t>& hwc, int w, int h) {
  std::vector<uint8_t> v(hwc.size());
  for (int c = 0; c < 3; ++c)
    for (int p = 0; p < w * h; ++p) v[static_cast<size_t>(c * w * h + p)] = hwc[static_cast<size_t>(p * 3 + c)];
  return v;
}

Sample encoded(const std::vector<uint8_t>& bytes, Encoding e, const char* source) {
  Sample s;
  s.pixels = bytes.data();
  s.size = bytes.size();
  s.encoding = e;
  s.source = source;
  return s;
}

ImageTransformOptions options(ImageTransformMode mode, int64_t size) {
  ImageTransformOptions o;
  o.mode = mode;
  o.size = size;
  o.resize_size = size * 8 / 7;
  return o;
}

}  // namespace

TEST(ImageTransformDecode, PngEqualsTheRawPath) {
  const int w = 45, h = 33;
  const std::vector<uint8_t> hwc = tandem::testing::formula_hwc(1, w, h);
  const std::vector<uint8_t> png = encode_png(hwc.data(), w, h), chw = to_chw(hwc, w, h);
  for (const ImageTransformMode mode : {ImageTransformMode::train, ImageTransformMode::eval}) {
    const ImageTransform t(options(mode, 24));
    TransformScratch scratch;
    std::vector<float> a(3 * 24 * 24), b(a.size());
    for (int64_t k = 0; k < 8; ++k) {
      // The folder dataset reports [3, 0, 0]; the decoded size is what counts.
      t.apply_sample(encoded(png, Encoding::png, "x.png"), {3, 0, 0}, a.data(), {2, 0, k}, scratch);
      t.apply(chw.data(), {3, h, w}, b.data(), {2, 0, k});
      ASSERT_EQ(a, b) << "key " << k;
    }
  }
}

TEST(ImageTransformDecode, JpegAtADctScaleIsCloseToTheFullDecode) {
  // 480x360 to 56x56: boxes of 112 pixels or more decode at 1/2 and beyond. Reference: the
  // same box and flip resampled from the full-size decode. Both antialias, so they differ by
  // the DCT's own downscale only: a few u8 levels at most on this smooth image.
  const int w = 480, h = 360;
  const int64_t size = 56;
  const std::vector<uint8_t> jpg = encode_jpeg(smooth_hwc(w, h).data(), w, h, 95);
  std::vector<uint8_t> full;
  decode_image(jpg.data(), jpg.size(), "x.jpg", ImageScale{}, full);
  const std::vector<uint8_t> full_chw = to_chw(full, w, h);
  for (const ImageTransformMode mode : {ImageTransformMode::train, ImageTransformMode::eval}) {
    ImageTransformOptions o = options(mode, size);
    o.mean = {0.0f};
    o.std = {1.0f / 255.0f};  // outputs in u8 levels
    const ImageTransform t(o);
    TransformScratch scratch;
    std::vector<float> got(static_cast<size_t>(3 * size * size)), want(got.size());
    int scaled = 0;
    for (int64_t k = 0; k < 16; ++k) {
      const SampleKey key{4, 1, k};
      const ImageSampleParams p = t.params(key, w, h);
      scaled += jpeg_scale_for(p.w, p.h, static_cast<int>(size), static_cast<int>(size)).num < 8;
      t.apply_sample(encoded(jpg, Encoding::jpeg, "x.jpg"), {3, 0, 0}, got.data(), key, scratch);
      t.apply(full_chw.data(), {3, h, w}, want.data(), key);
      double max_err = 0, sum_err = 0;
      for (size_t i = 0; i < got.size(); ++i) {
        const double e = std::abs(static_cast<double>(got[i]) - want[i]);
        max_err = std::max(max_err, e);
        sum_err += e;
      }
      EXPECT_LT(max_err, 8.0) << "key " << k;
      EXPECT_LT(sum_err / static_cast<double>(got.size()), 1.0) << "key " << k;
    }
    EXPECT_GT(scaled, 0) << "no key took the DCT-scaled path";
  }
}

TEST(ImageTransformDecode, JpegRegionDecodeEqualsResamplingTheWholeDecode) {
  // apply_sample decodes only the region it reads (decode_image_region). Reference: the whole
  // image decoded at the same DCT scale, resampled through the same box (train: a view of the
  // crop rounded to whole pixels; eval: the whole image). The region's inexact edge pixels lie
  // outside what is read, so the outputs are equal bit for bit.
  const int w = 500, h = 375;
  std::vector<uint8_t> hwc = smooth_hwc(w, h);
  for (size_t i = 0; i < hwc.size(); ++i) {  // detail in every block, chroma included
    const int noise = static_cast<int>((i * 2654435761u) >> 28 & 15) - 8;
    hwc[i] = static_cast<uint8_t>(std::clamp(hwc[i] + noise, 0, 255));
  }
  const std::vector<uint8_t> jpg = encode_jpeg(hwc.data(), w, h, 90);
  for (const int64_t size : {int64_t{224}, int64_t{56}})
    for (const ImageTransformMode mode : {ImageTransformMode::train, ImageTransformMode::eval}) {
      const ImageTransform t(options(mode, size));
      TransformScratch scratch;
      std::vector<float> got(static_cast<size_t>(3 * size * size)), want(got.size()), work;
      std::vector<uint8_t> full;
      for (int64_t k = 0; k < 24; ++k) {
        const SampleKey key{7, 2, k};
        const ImageSampleParams p = t.params(key, w, h);
        const ImageScale scale =
            jpeg_scale_for(p.w, p.h, static_cast<int>(size), static_cast<int>(size));
        const ImageInfo d = decode_image(jpg.data(), jpg.size(), "x.jpg", scale, full);
        const double fx = static_cast<double>(d.width) / w, fy = static_cast<double>(d.height) / h;
        RgbView view{full.data(), d.width, d.height, int64_t{d.width} * 3};
        ResampleBox box{p.x * fx, p.y * fy, p.w * fx / static_cast<double>(size),
                        p.h * fy / static_cast<double>(size)};
        if (p.clip_to_box) {
          const auto edge = [](double v, int64_t n) {
            return std::clamp<int64_t>(std::llround(v), 0, n);
          };
          const int64_t x0 = std::min(edge(p.x * fx, d.width), int64_t{d.width} - 1);
          const int64_t y0 = std::min(edge(p.y * fy, d.height), int64_t{d.height} - 1);
          const int64_t x1 = std::max(edge((p.x + p.w) * fx, d.width), x0 + 1);
          const int64_t y1 = std::max(edge((p.y + p.h) * fy, d.height), y0 + 1);
          view.pixels += (y0 * d.width + x0) * 3;
          view.width = x1 - x0, view.height = y1 - y0;
          box.x0 -= static_cast<double>(x0), box.y0 -= static_cast<double>(y0);
        }
        resample_rgb_to_chw(view, box, size, size, p.flip, t.affine(), want.data(), work);
        t.apply_sample(encoded(jpg, Encoding::jpeg, "x.jpg"), {3, 0, 0}, got.data(), key, scratch);
        ASSERT_EQ(got, want) << "size " << size << " key " << k << " scale " << scale.num << "/"
                             << scale.denom;
      }
    }
}

TEST(ImageTransformDecode, DecodingErrorsNameTheSource) {
  const ImageTransform t{ImageTransformOptions{}};
  TransformScratch scratch;
  std::vector<float> out(3 * 224 * 224);
  const std::vector<uint8_t> hwc = smooth_hwc(64, 48);
  std::vector<uint8_t> jpg = encode_jpeg(hwc.data(), 64, 48, 90);
  jpg.resize(jpg.size() / 2);  // truncated
  const std::vector<uint8_t> junk(100, 7);
  for (const auto& [bytes, e] : {std::pair{jpg, Encoding::jpeg}, std::pair{junk, Encoding::png}}) {
    try {
      t.apply_sample(encoded(bytes, e, "photos/cat/1.jpg"), {3, 0, 0}, out.data(), {}, scratch);
      ADD_FAILURE() << "accepted a bad image";
    } catch (const Error& err) {
      EXPECT_EQ(err.code(), ErrorCode::format) << err.what();
      EXPECT_NE(std::string(err.what()).find("photos/cat/1.jpg"), std::string::npos) << err.what();
    }
  }
}
