// The resampler against torchvision (tests/golden/image_transforms.safetensors, written by
// scripts/golden_image_transforms.py) and a float64 reference. Comparison, in u8 levels
// (identity affine, so outputs are resampled levels before any rounding): within 2e-3 of
// torchvision's float32 path, and within 1 level of its uint8 path (which rounds after each
// of its two passes and at the end; the script's own float/uint8 gap is below 1).
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "image_test_util.h"
#include "tandem/data/image_resample.h"
#include "tandem/data/image_transform.h"
#include "tandem/data/resized_crop_params.h"
#include "tandem/safetensors.h"

using namespace tandem;
using namespace tandem::data;
using tandem::testing::formula_chw;
using tandem::testing::formula_hwc;

namespace {

const std::string kGolden =
    std::string(TANDEM_SOURCE_DIR) + "/tests/golden/image_transforms.safetensors";
constexpr int64_t kImages[3][2] = {
    {40, 30}, {23, 37}, {64, 48}};  // (width, height), as in the script

const NamedTensors& golden() {
  static const NamedTensors g = load_safetensors(kGolden);
  return g;
}

std::vector<float> golden_values(const std::string& name) {
  const Tensor& t = find_tensor(golden(), name, "image transform golden file");
  return t.dtype() == DType::f32 ? t.to_vector() : t.to(DType::f32).to_vector();
}

void expect_matches_torchvision(const std::string& name, const std::vector<float>& got) {
  const std::vector<float> f32 = golden_values(name + ".f32"), u8 = golden_values(name + ".u8");
  ASSERT_EQ(got.size(), f32.size()) << name;
  double err_f32 = 0, err_u8 = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    err_f32 = std::max(err_f32, std::abs(static_cast<double>(got[i]) - f32[i]));
    err_u8 = std::max(err_u8, std::abs(static_cast<double>(got[i]) - u8[i]));
  }
  EXPECT_LE(err_f32, 2e-3) << name << ": max |ours - torchvision float32| in u8 levels";
  EXPECT_LE(err_u8, 1.0) << name << ": max |ours - torchvision uint8| in u8 levels";
}

struct CropCase {
  const char* name;
  int image;
  int64_t top, left, h, w, out_h, out_w;
};

}  // namespace

TEST(ImageResampleGolden, ResizedCropMatchesTorchvision) {
  const CropCase cases[] = {{"crop_down", 0, 2, 3, 24, 30, 16, 16},
                            {"crop_up", 0, 5, 10, 6, 8, 16, 16},
                            {"crop_whole", 0, 0, 0, 30, 40, 13, 13},
                            {"crop_wide", 0, 1, 2, 27, 33, 9, 20},
                            {"crop_strong", 1, 4, 1, 30, 21, 7, 7}};
  std::vector<float> work;
  for (const CropCase& c : cases) {
    const int64_t width = kImages[c.image][0], height = kImages[c.image][1];
    const std::vector<uint8_t> img = formula_hwc(c.image, width, height);
    const RgbView crop{img.data() + (c.top * width + c.left) * 3, c.w, c.h, width * 3};
    const ResampleBox box{0.0, 0.0, static_cast<double>(c.w) / static_cast<double>(c.out_w),
                          static_cast<double>(c.h) / static_cast<double>(c.out_h)};
    std::vector<float> out(static_cast<size_t>(3 * c.out_h * c.out_w));
    resample_rgb_to_chw(crop, box, c.out_h, c.out_w, false, ChannelAffine{}, out.data(), work);
    expect_matches_torchvision(c.name, out);
  }
}

TEST(ImageResampleGolden, ResizeCenterCropMatchesTorchvision) {
  struct EvalCase {
    const char* name;
    int image;
    int64_t resize_size, size;
  };
  const EvalCase cases[] = {
      {"eval_tall", 1, 20, 16}, {"eval_wide", 2, 32, 24}, {"eval_half", 2, 20, 15}};
  std::vector<float> work;
  for (const EvalCase& c : cases) {
    const int64_t width = kImages[c.image][0], height = kImages[c.image][1];
    const std::vector<uint8_t> img = formula_hwc(c.image, width, height);
    const auto [rw, rh] = resize_shorter_side(width, height, c.resize_size);
    const CropBox crop = center_crop_box(rw, rh, c.size);
    const double sx = static_cast<double>(width) / static_cast<double>(rw);
    const double sy = static_cast<double>(height) / static_cast<double>(rh);
    const ResampleBox box{static_cast<double>(crop.x) * sx, static_cast<double>(crop.y) * sy, sx,
                          sy};
    std::vector<float> out(static_cast<size_t>(3 * c.size * c.size));
    resample_rgb_to_chw({img.data(), width, height, width * 3}, box, c.size, c.size, false,
                        ChannelAffine{}, out.data(), work);
    expect_matches_torchvision(c.name, out);

    // The same through ImageTransform in eval mode on the raw [3, H, W] planes, with a
    // normalisation that leaves u8 levels (mean 0, std 1/255).
    ImageTransformOptions o;
    o.mode = ImageTransformMode::eval;
    o.size = c.size;
    o.resize_size = c.resize_size;
    o.mean = {0.0f};
    o.std = {1.0f / 255.0f};
    const ImageTransform t(o);
    const std::vector<uint8_t> chw = formula_chw(c.image, width, height);
    std::vector<float> via(out.size());
    t.apply(chw.data(), {3, height, width}, via.data(), SampleKey{});
    expect_matches_torchvision(c.name, via);
  }
}

TEST(ImageResampleGolden, GeometryOfTheEvalCasesIsTorchvisions) {
  // The sizes and offsets the golden cases go through (torchvision's int() and round()).
  EXPECT_EQ(resize_shorter_side(23, 37, 20), (std::array<int64_t, 2>{20, 32}));
  EXPECT_EQ(resize_shorter_side(64, 48, 32), (std::array<int64_t, 2>{42, 32}));
  EXPECT_EQ(resize_shorter_side(500, 375, 256), (std::array<int64_t, 2>{341, 256}));
  EXPECT_EQ(resize_shorter_side(375, 500, 256), (std::array<int64_t, 2>{256, 341}));
  EXPECT_EQ(resize_shorter_side(300, 300, 256), (std::array<int64_t, 2>{256, 256}));
  EXPECT_EQ(center_crop_box(26, 20, 15),
            (CropBox{6, 2, 15, 15}));  // round(5.5) = 6, round(2.5) = 2
  EXPECT_EQ(center_crop_box(341, 256, 224), (CropBox{58, 16, 224, 224}));  // round(58.5) = 58
}

TEST(ImageResample, MatchesFloat64ReferenceAcrossScalesAndFlip) {
  // Output widths from 30x smaller to 1.5x larger than the region (1 to 60 horizontal taps),
  // with the box offset inside a larger image, a fractional start and both flips.
  const int64_t width = 120, height = 70, x = 11, y = 6, w = 97, h = 53;
  const std::vector<uint8_t> img = formula_hwc(2, width, height);
  const RgbView view{img.data() + (y * width + x) * 3, w, h, width * 3};
  std::vector<float> work;
  for (const int64_t out_w : {3, 5, 7, 11, 13, 16, 24, 31, 40, 97, 150}) {
    const int64_t out_h = 5 + out_w % 17;
    const ResampleBox box{0.75, 1.5, (w - 1.5) / static_cast<double>(out_w),
                          (h - 3.0) / static_cast<double>(out_h)};
    const std::vector<double> ref = tandem::testing::reference_resample(
        img, width, x, y, w, h, box.x0, box.y0, box.scale_x, box.scale_y, out_h, out_w);
    for (const bool flip : {false, true}) {
      std::vector<float> out(static_cast<size_t>(3 * out_h * out_w));
      resample_rgb_to_chw(view, box, out_h, out_w, flip, ChannelAffine{}, out.data(), work);
      double err = 0;
      for (int64_t c = 0; c < 3; ++c)
        for (int64_t i = 0; i < out_h; ++i)
          for (int64_t j = 0; j < out_w; ++j) {
            const int64_t sj = flip ? out_w - 1 - j : j;
            err = std::max(err, std::abs(out[static_cast<size_t>((c * out_h + i) * out_w + j)] -
                                         ref[static_cast<size_t>((c * out_h + i) * out_w + sj)]));
          }
      EXPECT_LT(err, 1e-3) << out_w << "x" << out_h << " flip " << flip;
    }
  }
}

TEST(ImageResample, AffineMapsLevelsPerChannel) {
  const std::vector<uint8_t> img(8 * 8 * 3, 51);
  const ChannelAffine a = normalize_affine({0.1f, 0.2f, 0.3f}, {0.5f, 0.25f, 2.0f});
  std::vector<float> out(3 * 4 * 4), work;
  resample_rgb_to_chw({img.data(), 8, 8, 24}, {0.0, 0.0, 2.0, 2.0}, 4, 4, false, a, out.data(),
                      work);
  const double want[3] = {(0.2 - 0.1) / 0.5, (0.2 - 0.2) / 0.25,
                          (0.2 - 0.3) / 2.0};  // 51 / 255 = 0.2
  for (int c = 0; c < 3; ++c)
    for (int i = 0; i < 16; ++i)
      EXPECT_NEAR(out[static_cast<size_t>(c * 16 + i)], want[c], 1e-6) << c;
}
