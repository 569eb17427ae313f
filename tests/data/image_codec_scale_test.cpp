// The image codec's DCT-domain scaling (jpeg_scale_for, scaled decode_image), encode / decode
// round trips, the one accepted libjpeg warning, and concurrent decoding.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <thread>
#include <vector>

#include "data/image_fixtures.h"
#include "tandem/data/image_codec.h"
#include "tandem/error.h"

using namespace tandem;
using namespace tandem::data;
using namespace tandem::testing;

namespace {

// A smooth RGB u8 [height, width, 3] image: gradients and low-frequency waves, on which
// JPEG's loss and DCT scaling stay small.
std::vector<uint8_t> smooth_image(int width, int height) {
  std::vector<uint8_t> rgb(static_cast<size_t>(width) * height * 3);
  for (int y = 0; y < height; ++y)
    for (int x = 0; x < width; ++x) {
      uint8_t* p = &rgb[(static_cast<size_t>(y) * width + x) * 3];
      p[0] = static_cast<uint8_t>(30 + 190.0 * x / (width - 1));
      p[1] = static_cast<uint8_t>(128 + 90 * std::sin(y / 9.0) * std::cos(x / 13.0));
      p[2] = static_cast<uint8_t>(40 + 170.0 * y / (height - 1));
    }
  return rgb;
}

// The mean of each k x k block of `full` ([h, w, 3]) that lies wholly inside it, next to the
// matching pixels of `scaled` (the rest is skipped): returns {max, mean} absolute difference.
std::pair<int, double> compare_with_box_average(const std::vector<uint8_t>& full, int w, int h,
                                                const std::vector<uint8_t>& scaled, int sw, int k) {
  int max_diff = 0;
  double sum = 0;
  int64_t count = 0;
  for (int y = 0; y + 1 <= h / k; ++y)
    for (int x = 0; x + 1 <= w / k; ++x)
      for (int c = 0; c < 3; ++c) {
        double s = 0;
        for (int dy = 0; dy < k; ++dy)
          for (int dx = 0; dx < k; ++dx)
            s += full[((static_cast<size_t>(y) * k + dy) * w + x * k + dx) * 3 + c];
        const int d = std::abs(static_cast<int>(std::lround(s / (k * k))) -
                               int{scaled[(static_cast<size_t>(y) * sw + x) * 3 + c]});
        max_diff = std::max(max_diff, d);
        sum += d;
        ++count;
      }
  return {max_diff, sum / static_cast<double>(count)};
}

}  // namespace

TEST(ImageScale, JpegScaleForPicksTheSmallestScaleThatStillOnlyShrinks) {
  auto eq = [](ImageScale s, int num, int denom) { return s.num * denom == num * s.denom; };
  EXPECT_TRUE(eq(jpeg_scale_for(448, 448, 224, 224), 1, 2));    // exactly 2x: 1/2
  EXPECT_TRUE(eq(jpeg_scale_for(447.9, 448, 224, 224), 1, 1));  // under 2x in width: 1
  EXPECT_TRUE(eq(jpeg_scale_for(448, 447.9, 224, 224), 1, 1));
  EXPECT_TRUE(eq(jpeg_scale_for(896, 896, 224, 224), 1, 4));
  EXPECT_TRUE(eq(jpeg_scale_for(895, 896, 224, 224), 1, 2));
  EXPECT_TRUE(eq(jpeg_scale_for(1792, 1792, 224, 224), 1, 8));
  EXPECT_TRUE(eq(jpeg_scale_for(1791, 1792, 224, 224), 1, 4));
  EXPECT_TRUE(eq(jpeg_scale_for(100000, 100000, 224, 224), 1, 8));  // 1/8 is the least
  EXPECT_TRUE(eq(jpeg_scale_for(1000, 800, 224, 224), 1, 2));       // the tighter side decides
  EXPECT_TRUE(eq(jpeg_scale_for(100, 100, 224, 224), 1, 1));        // enlarging: no reduction
  EXPECT_TRUE(eq(jpeg_scale_for(1000, 100, 20, 30), 1, 2));         // non-square need
  // Reductions come as k / 8; no reduction as the default scale 1 / 1.
  EXPECT_EQ(jpeg_scale_for(896, 896, 224, 224).denom, 8);
  EXPECT_EQ(jpeg_scale_for(100, 100, 224, 224).num, 1);
  EXPECT_EQ(jpeg_scale_for(100, 100, 224, 224).denom, 1);
  const double nan = std::numeric_limits<double>::quiet_NaN();
  for (ImageScale s : {jpeg_scale_for(0, 900, 10, 10), jpeg_scale_for(900, -1, 10, 10),
                       jpeg_scale_for(nan, 900, 10, 10), jpeg_scale_for(900, 900, 0, 10),
                       jpeg_scale_for(900, 900, 10, -3)})
    EXPECT_TRUE(eq(s, 1, 1));
}

TEST(ImageScale, ScaledIsTurboJpegsCeiling) {
  EXPECT_EQ((ImageScale{1, 8}.scaled(1)), 1);
  EXPECT_EQ((ImageScale{1, 8}.scaled(8)), 1);
  EXPECT_EQ((ImageScale{1, 8}.scaled(9)), 2);
  EXPECT_EQ((ImageScale{4, 8}.scaled(97)), 49);
  EXPECT_EQ((ImageScale{2, 8}.scaled(61)), 16);
  EXPECT_EQ((ImageScale{1, 1}.scaled(65535)), 65535);
}

TEST(ImageScale, ScaledDecodeHasTheScaledSizeAndIsCloseToABoxAverage) {
  const int w = 97, h = 61;  // not multiples of 8: the sizes round up
  const std::vector<uint8_t> jpeg = encode_jpeg(smooth_image(w, h).data(), w, h, 95);
  std::vector<uint8_t> full;
  const ImageInfo fi = decode_image(jpeg.data(), jpeg.size(), "smooth.jpg", ImageScale{}, full);
  ASSERT_EQ(fi.width, w);
  ASSERT_EQ(fi.height, h);
  for (int k : {2, 4, 8}) {
    SCOPED_TRACE(k);
    const ImageScale scale{8 / k, 8};
    std::vector<uint8_t> out;
    const ImageInfo info = decode_image(jpeg.data(), jpeg.size(), "smooth.jpg", scale, out);
    EXPECT_EQ(info.width, (w + k - 1) / k);
    EXPECT_EQ(info.height, (h + k - 1) / k);
    EXPECT_EQ(info.width, scale.scaled(w));
    EXPECT_EQ(info.channels, 3);
    ASSERT_EQ(out.size(), static_cast<size_t>(info.width) * info.height * 3);
    const auto [max_diff, mean_diff] = compare_with_box_average(full, w, h, out, info.width, k);
    EXPECT_LE(max_diff, 12);
    EXPECT_LT(mean_diff, 2.0);
  }
  // The same scale written as 1/2 and as 4/8 gives the same pixels.
  std::vector<uint8_t> a, b;
  decode_image(jpeg.data(), jpeg.size(), "smooth.jpg", ImageScale{1, 2}, a);
  decode_image(jpeg.data(), jpeg.size(), "smooth.jpg", ImageScale{4, 8}, b);
  EXPECT_EQ(a, b);
}

TEST(ImageScale, EveryJpegFixtureDecodesScaled) {
  for (const char* name :
       {"rgb_baseline.jpg", "rgb_progressive.jpg", "gray.jpg", "cmyk_adobe.jpg", "ycck.jpg"}) {
    const std::vector<uint8_t> bytes = image_fixture(name);
    std::vector<uint8_t> out;
    const ImageInfo info = decode_image(bytes.data(), bytes.size(), name, ImageScale{1, 8}, out);
    EXPECT_EQ(info.width, 3) << name;   // 24 / 8
    EXPECT_EQ(info.height, 2) << name;  // 16 / 8
    EXPECT_EQ(out.size(), 3u * 2 * 3) << name;
  }
}

TEST(ImageRoundTrip, PngIsExactAndJpegIsClose) {
  for (auto [w, h] : {std::pair{1, 1}, std::pair{37, 23}, std::pair{300, 2}}) {
    SCOPED_TRACE(std::to_string(w) + "x" + std::to_string(h));
    std::vector<uint8_t> noise(static_cast<size_t>(w) * h * 3);
    uint32_t state = 12345;
    for (uint8_t& v : noise)
      v = static_cast<uint8_t>((state = state * 1664525u + 1013904223u) >> 24);
    const std::vector<uint8_t> png = encode_png(noise.data(), w, h);
    std::vector<uint8_t> out;
    const ImageInfo info = decode_image(png.data(), png.size(), "noise.png", ImageScale{}, out);
    EXPECT_EQ(info.encoding, Encoding::png);
    EXPECT_EQ(info.width, w);
    EXPECT_EQ(info.height, h);
    EXPECT_EQ(out, noise);
  }
  const int w = 64, h = 40;
  const std::vector<uint8_t> smooth = smooth_image(w, h);
  for (int quality : {75, 90, 100}) {  // 4:2:0 subsampling: lossy even at 100
    const std::vector<uint8_t> jpeg = encode_jpeg(smooth.data(), w, h, quality);
    EXPECT_EQ(sniff_encoding(jpeg.data(), jpeg.size()), Encoding::jpeg);
    std::vector<uint8_t> out;
    const ImageInfo info = decode_image(jpeg.data(), jpeg.size(), "smooth.jpg", ImageScale{}, out);
    EXPECT_EQ(info.width, w);
    EXPECT_EQ(info.height, h);
    EXPECT_LE(max_abs_diff(out, smooth), quality == 100 ? 8 : 16) << quality;
    EXPECT_LT(mean_abs_diff(out, smooth), quality == 100 ? 1.0 : 2.5) << quality;
  }
}

TEST(ImageRoundTrip, EncodersRejectBadArguments) {
  const std::vector<uint8_t> rgb(12, 7);
  auto expect_invalid = [](auto&& f, const char* op) {
    try {
      f();
      ADD_FAILURE() << op << " did not throw";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::invalid_argument) << e.what();
      EXPECT_EQ(std::string(e.what()).rfind(std::string("[") + op + "] ", 0), 0u) << e.what();
    }
  };
  expect_invalid([&] { encode_jpeg(rgb.data(), 0, 4, 90); }, "encode_jpeg");
  expect_invalid([&] { encode_jpeg(rgb.data(), 2, 2, 0); }, "encode_jpeg");
  expect_invalid([&] { encode_jpeg(rgb.data(), 2, 2, 101); }, "encode_jpeg");
  expect_invalid([&] { encode_jpeg(nullptr, 2, 2, 90); }, "encode_jpeg");
  expect_invalid([&] { encode_jpeg(rgb.data(), 70000, 1, 90); }, "encode_jpeg");
  expect_invalid([&] { encode_png(rgb.data(), 2, -1); }, "encode_png");
  expect_invalid([&] { encode_png(nullptr, 2, 2); }, "encode_png");
}

TEST(ImageCodecWarnings, JunkBetweenSegmentsIsAcceptedTruncationIsNot) {
  const std::vector<uint8_t> whole = image_fixture("rgb_baseline.jpg");
  size_t sos = 0;
  for (size_t i = 2; i + 1 < whole.size(); ++i)
    if (whole[i] == 0xFF && whole[i + 1] == 0xDA) {
      sos = i;
      break;
    }
  ASSERT_GT(sos, 0u);
  std::vector<uint8_t> junk(whole.begin(), whole.begin() + static_cast<std::ptrdiff_t>(sos));
  junk.insert(junk.end(), {0x00, 0x11, 0x22});  // libjpeg: "3 extraneous bytes before marker 0xda"
  junk.insert(junk.end(), whole.begin() + static_cast<std::ptrdiff_t>(sos), whole.end());
  std::vector<uint8_t> out;
  decode_image(junk.data(), junk.size(), "junk.jpg", ImageScale{}, out);
  EXPECT_EQ(out, image_references().at("rgb_baseline.jpg").pixels);
  // The same junk in a file that is also cut short: the first warning is the junk, and the
  // missing end is still reported.
  const std::vector<uint8_t> cut(junk.begin(), junk.end() - 100);
  try {
    decode_image(cut.data(), cut.size(), "junk_cut.jpg", ImageScale{}, out);
    ADD_FAILURE() << "a truncated file with junk decoded";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::format);
    EXPECT_EQ(std::string(e.what()).rfind("junk_cut.jpg: ", 0), 0u) << e.what();
  }
}

// Junk before the frame header (SOF) of a file cut inside its scan, in a file that carries a
// thumbnail (a whole JPEG, SOS and EOI included, in an APP1 segment, as Exif does): TurboJPEG
// reports only the first warning (the junk), which hid the "Premature end of JPEG file" that
// followed, and the thumbnail's EOI passed for the image's, so such a file decoded, 44 levels
// off on average. Every decoder now refuses it.
TEST(ImageCodecWarnings, JunkBeforeTheFrameDoesNotHideATruncatedScan) {
  const std::vector<uint8_t> plain = image_fixture("rgb_baseline.jpg");
  const std::vector<uint8_t> rgb(16 * 16 * 3, 90);
  const std::vector<uint8_t> thumb = encode_jpeg(rgb.data(), 16, 16, 90);
  std::vector<uint8_t> app1 = {0xFF, 0xE1, 0, 0, 'E', 'x', 'i', 'f', 0, 0};
  app1.insert(app1.end(), thumb.begin(), thumb.end());
  const size_t len = app1.size() - 2;
  app1[2] = static_cast<uint8_t>(len >> 8), app1[3] = static_cast<uint8_t>(len);
  std::vector<uint8_t> whole(plain.begin(), plain.begin() + 2);
  whole.insert(whole.end(), app1.begin(), app1.end());
  whole.insert(whole.end(), plain.begin() + 2, plain.end());
  size_t sof = 0, sos = 0;
  for (size_t i = 2 + app1.size(); i + 1 < whole.size(); ++i) {
    if (whole[i] == 0xFF && whole[i + 1] == 0xC0 && sof == 0) sof = i;
    if (whole[i] == 0xFF && whole[i + 1] == 0xDA && sos == 0) sos = i;
  }
  ASSERT_GT(sof, 0u);
  ASSERT_GT(sos, sof);
  std::vector<uint8_t> junk(whole.begin(), whole.begin() + static_cast<std::ptrdiff_t>(sof));
  junk.insert(junk.end(), {0x01, 0x02, 0x03, 0x04, 0x05});  // "5 extraneous bytes before marker 0xc0"
  junk.insert(junk.end(), whole.begin() + static_cast<std::ptrdiff_t>(sof), whole.end());
  std::vector<uint8_t> out;
  decode_image(junk.data(), junk.size(), "junk.jpg", ImageScale{}, out);  // junk alone is accepted
  EXPECT_EQ(out, image_references().at("rgb_baseline.jpg").pixels);
  const size_t scan = sos + 5 + (junk.size() - sos - 5) / 2;  // halfway through the entropy data
  const std::vector<uint8_t> cut(junk.begin(), junk.begin() + static_cast<std::ptrdiff_t>(scan));
  try {
    decode_image(cut.data(), cut.size(), "junk_cut.jpg", ImageScale{}, out);
    ADD_FAILURE() << "a file cut inside its scan, with junk before its frame header, decoded";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::format);
    EXPECT_EQ(std::string(e.what()).rfind("junk_cut.jpg: ", 0), 0u) << e.what();
  }
  ImageRegion decoded;
  const ImageInfo info = read_image_info(junk.data(), junk.size(), "junk.jpg");
  EXPECT_THROW(decode_image_region(cut.data(), cut.size(), "junk_cut.jpg", ImageScale{},
                                   ImageRegion{0, 0, info.width, info.height}, out, decoded),
               Error);
}

TEST(ImageCodecThreads, ConcurrentDecodesGiveTheSamePixels) {
  const auto refs = image_references();
  const char* names[] = {"rgb_baseline.jpg", "cmyk_adobe.jpg", "ycck.jpg", "rgb.png",
                         "interlaced.png"};
  std::vector<std::vector<uint8_t>> files;
  for (const char* n : names) files.push_back(image_fixture(n));
  const std::vector<uint8_t> bad = image_fixture("truncated.jpg");
  std::vector<int> mismatches(4, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      std::vector<uint8_t> out;
      for (int i = 0; i < 100; ++i) {
        const size_t f = static_cast<size_t>(i + t) % files.size();
        decode_image(files[f].data(), files[f].size(), names[f], ImageScale{}, out);
        if (out != refs.at(names[f]).pixels) ++mismatches[t];
        try {  // a failure between decodes does not disturb this thread's next one
          decode_image(bad.data(), bad.size(), "truncated.jpg", ImageScale{}, out);
          ++mismatches[t];
        } catch (const Error&) {
        }
      }
    });
  for (auto& th : threads) th.join();
  for (int t = 0; t < 4; ++t) EXPECT_EQ(mismatches[t], 0) << "thread " << t;
}
