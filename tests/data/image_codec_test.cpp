// The image codec on the fixtures: decoded pixels against Pillow's, header info, and the
// errors every kind of bad input gives.
#include "tandem/data/image_codec.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "data/image_fixtures.h"
#include "tandem/error.h"

using namespace tandem;
using namespace tandem::data;
using namespace tandem::testing;

namespace {

// JPEG decoders may differ by a few levels (IDCT, upsampling, CMYK rounding). Debian's
// libjpeg-turbo 2.1.5 and the one in Pillow 13 agree exactly on these fixtures (measured);
// the bound leaves room for another libjpeg-turbo build, not for a wrong conversion.
constexpr int kJpegTolerance = 2;

struct Fixture {
  const char* name;
  Encoding encoding;
  int channels;  // in the file
};

const Fixture kValid[] = {
    {"rgb_baseline.jpg", Encoding::jpeg, 3}, {"rgb_progressive.jpg", Encoding::jpeg, 3},
    {"gray.jpg", Encoding::jpeg, 1},         {"cmyk_adobe.jpg", Encoding::jpeg, 4},
    {"ycck.jpg", Encoding::jpeg, 4},         {"rgb.png", Encoding::png, 3},
    {"rgba.png", Encoding::png, 4},          {"palette.png", Encoding::png, 3},
    {"gray.png", Encoding::png, 1},          {"rgb16.png", Encoding::png, 3},
    {"interlaced.png", Encoding::png, 3},
};

Error decode_error(const std::vector<uint8_t>& bytes, const char* source) {
  std::vector<uint8_t> out;
  try {
    decode_image(bytes.data(), bytes.size(), source, ImageScale{}, out);
  } catch (const Error& e) {
    return e;
  }
  ADD_FAILURE() << "decode_image(" << (source ? source : "null") << ") did not throw";
  return Error(ErrorCode::internal, "");
}

Error info_error(const std::vector<uint8_t>& bytes, const char* source) {
  try {
    read_image_info(bytes.data(), bytes.size(), source);
  } catch (const Error& e) {
    return e;
  }
  ADD_FAILURE() << "read_image_info(" << (source ? source : "null") << ") did not throw";
  return Error(ErrorCode::internal, "");
}

}  // namespace

TEST(ImageCodec, EveryFixtureDecodesToPillowsPixels) {
  const auto refs = image_references();
  ASSERT_EQ(refs.size(), std::size(kValid));
  for (const Fixture& f : kValid) {
    SCOPED_TRACE(f.name);
    const std::vector<uint8_t> bytes = image_fixture(f.name);
    const RgbImage& ref = refs.at(f.name);
    std::vector<uint8_t> out(7, 0xAB);  // stale contents must be replaced
    const ImageInfo info = decode_image(bytes.data(), bytes.size(), f.name, ImageScale{}, out);
    EXPECT_EQ(info.encoding, f.encoding);
    EXPECT_EQ(info.width, ref.width);
    EXPECT_EQ(info.height, ref.height);
    EXPECT_EQ(info.channels, f.channels);
    ASSERT_EQ(out.size(), static_cast<size_t>(ref.width) * ref.height * 3);
    if (f.encoding == Encoding::png) {
      EXPECT_EQ(out, ref.pixels);  // lossless: exact
    } else {
      EXPECT_LE(max_abs_diff(out, ref.pixels), kJpegTolerance);
      EXPECT_LT(mean_abs_diff(out, ref.pixels), 0.5);
    }
  }
}

TEST(ImageCodec, GrayIsReplicatedAndCmykMatchesItsYcckTwin) {
  const std::vector<uint8_t> gray = image_fixture("gray.png");
  std::vector<uint8_t> out;
  decode_image(gray.data(), gray.size(), "gray.png", ImageScale{}, out);
  for (size_t i = 0; i < out.size(); i += 3) {
    ASSERT_EQ(out[i], out[i + 1]) << i;
    ASSERT_EQ(out[i], out[i + 2]) << i;
  }
  // The same inks stored as Adobe-inverted CMYK and as YCCK decode alike (up to JPEG loss);
  // reading either one without the inversion would turn it into its negative.
  std::vector<uint8_t> cmyk, ycck;
  const std::vector<uint8_t> a = image_fixture("cmyk_adobe.jpg"), b = image_fixture("ycck.jpg");
  decode_image(a.data(), a.size(), "cmyk_adobe.jpg", ImageScale{}, cmyk);
  decode_image(b.data(), b.size(), "ycck.jpg", ImageScale{}, ycck);
  EXPECT_LE(max_abs_diff(cmyk, ycck), 12);
  EXPECT_LT(mean_abs_diff(cmyk, ycck), 2.0);
}

TEST(ImageCodec, SniffsTheSignatureOnly) {
  const uint8_t jpeg[] = {0xFF, 0xD8, 0xFF};
  const uint8_t png[] = {0x89, 'P', 'N', 'G', 0x0D, 0x0A, 0x1A, 0x0A};
  EXPECT_EQ(sniff_encoding(jpeg, 3), Encoding::jpeg);
  EXPECT_EQ(sniff_encoding(jpeg, 2), Encoding::raw);
  EXPECT_EQ(sniff_encoding(png, 8), Encoding::png);
  EXPECT_EQ(sniff_encoding(png, 7), Encoding::raw);
  EXPECT_EQ(sniff_encoding(nullptr, 0), Encoding::raw);
  const std::vector<uint8_t> text = image_fixture("not_an_image.jpg");
  EXPECT_EQ(sniff_encoding(text.data(), text.size()), Encoding::raw);
  for (const Fixture& f : kValid) {
    const std::vector<uint8_t> bytes = image_fixture(f.name);
    EXPECT_EQ(sniff_encoding(bytes.data(), bytes.size()), f.encoding) << f.name;
  }
}

TEST(ImageCodec, InfoReadsTheHeader) {
  const auto refs = image_references();
  for (const Fixture& f : kValid) {
    const std::vector<uint8_t> bytes = image_fixture(f.name);
    const ImageInfo info = read_image_info(bytes.data(), bytes.size(), f.name);
    EXPECT_EQ(info.encoding, f.encoding) << f.name;
    EXPECT_EQ(info.width, refs.at(f.name).width) << f.name;
    EXPECT_EQ(info.height, refs.at(f.name).height) << f.name;
    EXPECT_EQ(info.channels, f.channels) << f.name;
  }
  // A truncated file's header is still whole: info succeeds, decoding fails.
  const std::vector<uint8_t> cut = image_fixture("truncated.jpg");
  EXPECT_EQ(read_image_info(cut.data(), cut.size(), "truncated.jpg").width, 24);
}

TEST(ImageCodec, BadInputThrowsFormatErrorNamingTheSource) {
  struct Case {
    const char* name;
    const char* needle;
  };
  const Case cases[] = {
      {"truncated.jpg", "Premature end of JPEG file"},
      {"truncated.png", "Premature end of PNG file"},
      {"zero_height.jpg", "Empty JPEG image"},
      {"zero_width.png", "width"},
      {"not_an_image.jpg", "not a JPEG or PNG"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const std::string source = "photos/cat/" + std::string(c.name);
    expect_format_error(decode_error(image_fixture(c.name), source.c_str()), source, c.needle);
  }
  for (const char* name : {"zero_height.jpg", "zero_width.png", "not_an_image.jpg"})
    expect_format_error(info_error(image_fixture(name), name), name, "");
  expect_format_error(decode_error({}, "empty.jpg"), "empty.jpg", "empty file");
  expect_format_error(info_error({}, "empty.png"), "empty.png", "empty file");
  expect_format_error(decode_error({}, nullptr), "image", "empty file");
}

TEST(ImageCodec, GarbageAfterASignatureThrows) {
  // Each signature followed by bytes that are no valid segment or chunk, and every cut of a
  // valid file: an error naming the source, never a crash or a success with garbage.
  std::vector<uint8_t> jpeg_junk = {0xFF, 0xD8, 0xFF};
  std::vector<uint8_t> png_junk = {0x89, 'P', 'N', 'G', 0x0D, 0x0A, 0x1A, 0x0A};
  for (int i = 0; i < 64; ++i) {
    jpeg_junk.push_back(static_cast<uint8_t>(i * 73 + 11));
    png_junk.push_back(static_cast<uint8_t>(i * 73 + 11));
  }
  expect_format_error(decode_error(jpeg_junk, "junk.jpg"), "junk.jpg", "");
  expect_format_error(decode_error(png_junk, "junk.png"), "junk.png", "");
  expect_format_error(info_error(png_junk, "junk.png"), "junk.png", "");
  for (const char* name :
       {"rgb_baseline.jpg", "rgb_progressive.jpg", "ycck.jpg", "rgb.png", "interlaced.png"}) {
    const std::vector<uint8_t> whole = image_fixture(name);
    for (size_t keep = 3; keep + 2 < whole.size(); keep += 7) {
      const std::vector<uint8_t> cut(whole.begin(),
                                     whole.begin() + static_cast<std::ptrdiff_t>(keep));
      expect_format_error(decode_error(cut, name), name, "");
    }
  }
}

TEST(ImageCodec, PngRejectsScaledDecode) {
  const std::vector<uint8_t> png = image_fixture("rgb.png");
  const std::vector<uint8_t> jpeg = image_fixture("rgb_baseline.jpg");
  std::vector<uint8_t> out;
  try {
    decode_image(png.data(), png.size(), "rgb.png", ImageScale{1, 2}, out);
    ADD_FAILURE() << "a PNG decoded at 1/2";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::invalid_argument) << e.what();
  }
  for (ImageScale bad : {ImageScale{3, 8}, ImageScale{0, 8}, ImageScale{2, 1}, ImageScale{1, 0}}) {
    try {
      decode_image(jpeg.data(), jpeg.size(), "rgb_baseline.jpg", bad, out);
      ADD_FAILURE() << "decoded at " << bad.num << "/" << bad.denom;
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::invalid_argument) << e.what();
    }
  }
  EXPECT_NO_THROW(decode_image(png.data(), png.size(), "rgb.png", ImageScale{8, 8}, out));
}

TEST(ImageCodec, CorruptBytesDecodeOrThrowFormatError) {
  // Deterministic byte changes anywhere in each valid fixture: every decode either succeeds
  // with a full-size RGB image or throws Error(format) naming the file; nothing else.
  uint32_t state = 2024;
  auto next = [&] { return state = state * 1664525u + 1013904223u; };
  for (const Fixture& f : kValid) {
    const std::vector<uint8_t> whole = image_fixture(f.name);
    for (int trial = 0; trial < 300; ++trial) {
      std::vector<uint8_t> bytes = whole;
      for (int k = 0; k < 1 + trial % 4; ++k)
        bytes[next() % bytes.size()] = static_cast<uint8_t>(next() >> 24);
      std::vector<uint8_t> out;
      try {
        const ImageInfo info = decode_image(bytes.data(), bytes.size(), f.name, ImageScale{}, out);
        ASSERT_EQ(out.size(), static_cast<size_t>(info.width) * info.height * 3) << f.name;
      } catch (const Error& e) {
        ASSERT_EQ(e.code(), ErrorCode::format) << e.what();
        ASSERT_EQ(std::string(e.what()).rfind(std::string(f.name) + ": ", 0), 0u) << e.what();
      }
    }
  }
}
