// decode_image_region: a region decode equals the matching part of decode_image's full decode
// (exactly away from the region's cut sides), and its errors name the source and leak nothing.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "data/image_fixtures.h"
#include "tandem/data/image_codec.h"
#include "tandem/error.h"

using namespace tandem;
using namespace tandem::data;
using namespace tandem::testing;

namespace {

const ImageScale kScales[] = {{1, 1}, {1, 2}, {1, 4}, {1, 8}};

// A photo-like RGB u8 [height, width, 3] image: waves per channel plus hashed noise, so that
// every 8x8 block has detail (JPEG loss differs from block to block).
std::vector<uint8_t> photo_like(int width, int height) {
  std::vector<uint8_t> rgb(static_cast<size_t>(width) * height * 3);
  for (int y = 0; y < height; ++y)
    for (int x = 0; x < width; ++x)
      for (int c = 0; c < 3; ++c) {
        const double wave = 128 + 90 * std::sin(0.037 * x * (c + 1)) * std::cos(0.029 * y + c);
        const int noise =
            static_cast<int>(static_cast<uint32_t>((y * width + x) * 3 + c) * 2654435761u >> 27) -
            16;
        rgb[(static_cast<size_t>(y) * width + x) * 3 + c] =
            static_cast<uint8_t>(std::clamp(wave + noise, 0.0, 255.0));
      }
  return rgb;
}

// The regions tried on a width x height image: the whole, 1-pixel strips, corners, the
// middle, and odd-sized boxes at odd offsets.
std::vector<ImageRegion> regions_of(int w, int h) {
  std::vector<ImageRegion> r = {{0, 0, w, h}, {0, 0, 1, 1},     {w - 1, h - 1, 1, 1},
                                {0, 0, w, 1}, {0, h - 1, w, 1}, {w - 1, 0, 1, h}};
  r.push_back({w / 3, h / 4, std::max(1, w / 2), std::max(1, h / 2)});
  r.push_back({w / 2, h / 2, w - w / 2, h - h / 2});       // to the bottom-right corner
  r.push_back({0, h / 3, std::max(1, w / 3), h - h / 3});  // left side to the bottom
  for (int k = 1; k <= 6; ++k) {
    const int x = (k * 37) % w, y = (k * 23) % h;
    r.push_back({x, y, std::max(1, (w - x) * k / 7), std::max(1, (h - y) * (7 - k) / 7)});
  }
  return r;
}

struct Difference {
  int inside = 0;  // max |region - full| farther than 1 pixel from a cut side
  int edge = 0;    // max |region - full| within 1 pixel of a cut side
};

// Decodes `bytes` whole and by each region at each scale; checks the decoded rectangle
// contains the request and returns the largest differences seen.
Difference compare_regions(const std::vector<uint8_t>& bytes, const char* name) {
  Difference d;
  for (const ImageScale s : kScales) {
    std::vector<uint8_t> full, part;
    const ImageInfo info = decode_image(bytes.data(), bytes.size(), name, s, full);
    for (const ImageRegion& want : regions_of(info.width, info.height)) {
      SCOPED_TRACE(::testing::Message()
                   << name << " scale " << s.num << "/" << s.denom << " region " << want.width
                   << "x" << want.height << " at " << want.x << "," << want.y);
      ImageRegion got;
      const ImageInfo ri =
          decode_image_region(bytes.data(), bytes.size(), name, s, want, part, got);
      EXPECT_EQ(ri.width, info.width);
      EXPECT_EQ(ri.height, info.height);
      EXPECT_EQ(ri.channels, info.channels);
      EXPECT_TRUE(got.x <= want.x && got.y <= want.y && got.x + got.width >= want.x + want.width &&
                  got.y + got.height >= want.y + want.height);
      EXPECT_TRUE(got.x >= 0 && got.y >= 0 && got.x + got.width <= info.width &&
                  got.y + got.height <= info.height);
      EXPECT_EQ(part.size(), static_cast<size_t>(got.width) * got.height * 3);
      if (part.size() != static_cast<size_t>(got.width) * got.height * 3) return {255, 255};
      for (int y = 0; y < got.height; ++y)
        for (int x = 0; x < got.width; ++x) {
          const int fx = got.x + x, fy = got.y + y;
          // Near a side of the region that is not a side of the image.
          const bool edge = (got.x > 0 && x <= 1) || (got.y > 0 && y <= 1) ||
                            (fx + 2 >= got.x + got.width && got.x + got.width < info.width) ||
                            (fy + 2 >= got.y + got.height && got.y + got.height < info.height);
          for (int c = 0; c < 3; ++c) {
            const int a = part[(static_cast<size_t>(y) * got.width + x) * 3 + c];
            const int b = full[(static_cast<size_t>(fy) * info.width + fx) * 3 + c];
            int& m = edge ? d.edge : d.inside;
            m = std::max(m, std::abs(a - b));
          }
        }
    }
  }
  return d;
}

Error region_error(const std::vector<uint8_t>& bytes, const char* source, ImageRegion want,
                   ImageScale scale = {}) {
  std::vector<uint8_t> out;
  ImageRegion got;
  try {
    decode_image_region(bytes.data(), bytes.size(), source, scale, want, out, got);
  } catch (const Error& e) {
    return e;
  }
  ADD_FAILURE() << "decode_image_region(" << (source ? source : "null") << ") did not throw";
  return Error(ErrorCode::internal, "");
}

}  // namespace

TEST(ImageRegionDecode, FixturesMatchTheFullDecode) {
  for (const char* name :
       {"rgb_baseline.jpg", "rgb_progressive.jpg", "gray.jpg", "cmyk_adobe.jpg", "ycck.jpg"}) {
    const Difference d = compare_regions(image_fixture(name), name);
    RecordProperty(std::string(name) + "_edge_max_abs_diff", std::to_string(d.edge));
    std::printf("%s: edge max abs diff %d\n", name, d.edge);
    EXPECT_EQ(d.inside, 0) << name;
    // The chroma upsampling next to a cut side lacks its outer neighbour (measured: 14 levels
    // on these high-contrast fixtures, 0 for gray and the 4:4:4 CMYK ones).
    EXPECT_LE(d.edge, 32) << name;
  }
}

TEST(ImageRegionDecode, LargeSubsampledJpegMatchesTheFullDecode) {
  // 4:2:0 (encode_jpeg), sizes not a multiple of the 16-pixel iMCU.
  for (const int quality : {90, 75}) {
    const int w = 517, h = 389;
    const std::vector<uint8_t> jpeg = encode_jpeg(photo_like(w, h).data(), w, h, quality);
    const Difference d = compare_regions(jpeg, "large.jpg");
    RecordProperty("large_q" + std::to_string(quality) + "_edge_max_abs_diff",
                   std::to_string(d.edge));
    EXPECT_EQ(d.inside, 0);
    EXPECT_LE(d.edge, 32);  // measured: 9 levels
  }
}

TEST(ImageRegionDecode, DecodesOnlyWhatWasAskedAndWidensLeftward) {
  const int w = 517, h = 389;
  const std::vector<uint8_t> jpeg = encode_jpeg(photo_like(w, h).data(), w, h, 90);
  std::vector<uint8_t> out;
  ImageRegion got;
  // 4:2:0 at scale 1: 16-pixel iMCU columns; rows are exact.
  decode_image_region(jpeg.data(), jpeg.size(), "a.jpg", {}, {100, 50, 40, 30}, out, got);
  EXPECT_EQ(got, (ImageRegion{96, 50, 44, 30}));
  // At 1/4 the iMCU is 4 pixels.
  decode_image_region(jpeg.data(), jpeg.size(), "a.jpg", {1, 4}, {30, 7, 10, 5}, out, got);
  EXPECT_EQ(got, (ImageRegion{28, 7, 12, 5}));
  EXPECT_EQ(out.size(), size_t{12} * 5 * 3);
}

TEST(ImageRegionDecode, RejectsARegionOutsideTheImageAndABadScale) {
  const std::vector<uint8_t> jpeg = image_fixture("rgb_baseline.jpg");
  const ImageInfo info = read_image_info(jpeg.data(), jpeg.size(), "a.jpg");
  for (const ImageRegion r :
       {ImageRegion{0, 0, 0, 1}, ImageRegion{-1, 0, 2, 2}, ImageRegion{0, 0, info.width + 1, 1},
        ImageRegion{1, 0, info.width, 1}, ImageRegion{0, info.height, 1, 1}}) {
    const Error e = region_error(jpeg, "a.jpg", r);
    EXPECT_EQ(e.code(), ErrorCode::invalid_argument) << e.what();
    EXPECT_NE(std::string(e.what()).find("a.jpg"), std::string::npos) << e.what();
  }
  EXPECT_EQ(region_error(jpeg, "a.jpg", {0, 0, 1, 1}, {3, 8}).code(), ErrorCode::invalid_argument);
  // At 1/8 the image is ceil(width / 8) wide.
  const int w8 = (info.width + 7) / 8;
  EXPECT_EQ(region_error(jpeg, "a.jpg", {0, 0, w8 + 1, 1}, {1, 8}).code(),
            ErrorCode::invalid_argument);
}

TEST(ImageRegionDecode, TruncatedAndCorruptFilesNameTheSource) {
  const int w = 517, h = 389;
  const std::vector<uint8_t> jpeg = encode_jpeg(photo_like(w, h).data(), w, h, 90);
  const ImageRegion top{10, 0, 100, 40}, all{0, 0, w, h};
  // Cut in the middle: the rows above the cut decode, but the file has no EOI marker.
  const std::vector<uint8_t> cut(jpeg.begin(), jpeg.begin() + jpeg.size() / 2);
  expect_format_error(region_error(cut, "cut.jpg", top), "cut.jpg", "Premature end of JPEG file");
  expect_format_error(region_error(cut, "cut.jpg", all), "cut.jpg", "Premature end of JPEG file");
  // Cut, then EOI appended: libjpeg itself hits the marker inside the region.
  std::vector<uint8_t> early = cut;
  early.insert(early.end(), {0xFF, 0xD9});
  expect_format_error(region_error(early, "early.jpg", all), "early.jpg", "Corrupt JPEG data");
  // The fixture cut short, every cut of the baseline and progressive fixtures, and garbage
  // after the signature.
  expect_format_error(region_error(image_fixture("truncated.jpg"), "truncated.jpg", {0, 0, 1, 1}),
                      "truncated.jpg", "Premature end of JPEG file");
  for (const char* name : {"rgb_baseline.jpg", "rgb_progressive.jpg", "ycck.jpg"}) {
    const std::vector<uint8_t> whole = image_fixture(name);
    for (size_t keep = 3; keep + 2 < whole.size(); keep += 7) {
      const std::vector<uint8_t> part(whole.begin(),
                                      whole.begin() + static_cast<std::ptrdiff_t>(keep));
      expect_format_error(region_error(part, name, {0, 0, 1, 1}), name, "");
    }
  }
  std::vector<uint8_t> junk = {0xFF, 0xD8, 0xFF};
  for (int i = 0; i < 64; ++i) junk.push_back(static_cast<uint8_t>(i * 73 + 11));
  expect_format_error(region_error(junk, "junk.jpg", {0, 0, 1, 1}), "junk.jpg", "");
  expect_format_error(region_error(image_fixture("not_an_image.jpg"), nullptr, {0, 0, 1, 1}),
                      "image", "");
  expect_format_error(region_error(image_fixture("zero_height.jpg"), "z.jpg", {0, 0, 1, 1}),
                      "z.jpg", "");
}

TEST(ImageRegionDecode, LeavesTheRowsBelowTheRegionUnread) {
  // The documented limit of its validation: data cut below the region, with an EOI marker
  // put back, is not seen (decode_image reports it). The rows above are read and checked.
  const int w = 517, h = 389;
  const std::vector<uint8_t> jpeg = encode_jpeg(photo_like(w, h).data(), w, h, 90);
  std::vector<uint8_t> early(jpeg.begin(), jpeg.begin() + jpeg.size() / 2);
  early.insert(early.end(), {0xFF, 0xD9});
  std::vector<uint8_t> full, part;
  decode_image(jpeg.data(), jpeg.size(), "a.jpg", {}, full);
  ImageRegion got;
  decode_image_region(early.data(), early.size(), "a.jpg", {}, {0, 0, w, 40}, part, got);
  EXPECT_TRUE(std::equal(part.begin(), part.end(), full.begin()));
  std::vector<uint8_t> out;
  try {
    decode_image(early.data(), early.size(), "early.jpg", {}, out);
    ADD_FAILURE() << "decode_image accepted a cut file";
  } catch (const Error& e) {
    expect_format_error(e, "early.jpg", "Corrupt JPEG data");
  }
}

TEST(ImageRegionDecode, PngDecodesWhole) {
  const std::vector<uint8_t> png = image_fixture("rgb.png");
  std::vector<uint8_t> full, part;
  const ImageInfo info = decode_image(png.data(), png.size(), "a.png", {}, full);
  ImageRegion got;
  const ImageInfo ri =
      decode_image_region(png.data(), png.size(), "a.png", {}, {1, 1, 2, 2}, part, got);
  EXPECT_EQ(ri.width, info.width);
  EXPECT_EQ(got, (ImageRegion{0, 0, info.width, info.height}));
  EXPECT_EQ(part, full);
}

TEST(ImageRegionDecode, AcceptsJunkBetweenSegmentsAndTrailingBytes) {
  const std::vector<uint8_t> whole = image_fixture("rgb_baseline.jpg");
  std::vector<uint8_t> full, part;
  const ImageInfo info = decode_image(whole.data(), whole.size(), "a.jpg", {}, full);
  size_t sos = 0;
  for (size_t i = 2; i + 1 < whole.size() && sos == 0; ++i)
    if (whole[i] == 0xFF && whole[i + 1] == 0xDA) sos = i;
  ASSERT_GT(sos, 0u);
  std::vector<uint8_t> junk(whole.begin(), whole.begin() + static_cast<std::ptrdiff_t>(sos));
  junk.insert(junk.end(), {0x00, 0x11, 0x22});  // "3 extraneous bytes before marker 0xda"
  junk.insert(junk.end(), whole.begin() + static_cast<std::ptrdiff_t>(sos), whole.end());
  std::vector<uint8_t> trailing = whole;
  trailing.insert(trailing.end(), 3000, 0x00);
  ImageRegion got;
  for (const auto* bytes : {&junk, &trailing}) {
    decode_image_region(bytes->data(), bytes->size(), "a.jpg", {}, {0, 0, info.width, info.height},
                        part, got);
    EXPECT_EQ(part, full);
  }
  // The junk in a file also cut short: still an error.
  const std::vector<uint8_t> cut(junk.begin(), junk.end() - 100);
  expect_format_error(region_error(cut, "junk_cut.jpg", {0, 0, 1, 1}), "junk_cut.jpg", "");
}

TEST(ImageRegionDecode, TenThousandFailedDecodesKeepResidentMemoryFlat) {
  if (kAddressSanitizer || kThreadSanitizer)
    GTEST_SKIP() << "RSS is not meaningful under AddressSanitizer (it checks leaks itself) or ThreadSanitizer "
                    "(its allocator and shadow memory grow it)";
  const int w = 517, h = 389;
  const std::vector<uint8_t> jpeg = encode_jpeg(photo_like(w, h).data(), w, h, 90);
  std::vector<uint8_t> early(jpeg.begin(), jpeg.begin() + jpeg.size() / 2);
  early.insert(early.end(), {0xFF, 0xD9});  // fails inside libjpeg, after start_decompress
  const std::vector<uint8_t> header_cut(jpeg.begin(), jpeg.begin() + 300);  // in the header
  const std::vector<uint8_t> no_eoi(jpeg.begin(), jpeg.end() - 2);  // the EOI rule, after it
  int failures = 0;
  auto run = [&](int n) {
    std::vector<uint8_t> out;
    ImageRegion got;
    for (int i = 0; i < n; ++i) {
      const std::vector<uint8_t>& bytes = i % 3 == 0 ? early : i % 3 == 1 ? header_cut : no_eoi;
      try {
        decode_image_region(bytes.data(), bytes.size(), "bad.jpg", {1, 2}, {0, 0, 200, 190}, out,
                            got);
      } catch (const Error& e) {
        if (e.code() == ErrorCode::format) ++failures;
      }
    }
  };
  const int64_t growth = resident_growth(run, 500, 10000);
  RecordProperty("rss_growth_bytes", std::to_string(growth));
  EXPECT_EQ(failures, 10500);
  EXPECT_LT(growth, 2 << 20) << "resident memory grew by " << growth << " bytes";
}
