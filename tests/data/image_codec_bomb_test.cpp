// Decompression bombs: headers that claim more pixels than the file can hold or than
// kMaxDecodePixels allows fail before any pixel memory is allocated (image_codec.h).
#include <gtest/gtest.h>
#include <zlib.h>

#include <cstdint>
#include <string>
#include <vector>

#include "image_fixtures.h"
#include "tandem/data/image_codec.h"
#include "tandem/error.h"

namespace tandem::data {
namespace {

uint32_t crc32_bytes(const uint8_t* p, size_t n) {
  uint32_t c = 0xFFFFFFFFu;
  for (size_t i = 0; i < n; ++i) {
    c ^= p[i];
    for (int k = 0; k < 8; ++k) c = (c >> 1) ^ (0xEDB88320u & (0u - (c & 1u)));
  }
  return ~c;
}

void put_be32(uint8_t* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<uint8_t>(v >> (24 - 8 * i));
}

// A real PNG of 4x4 pixels whose IHDR is rewritten to claim width x height (CRC fixed).
std::vector<uint8_t> png_claiming(uint32_t width, uint32_t height) {
  const std::vector<uint8_t> rgb(4 * 4 * 3, 100);
  std::vector<uint8_t> png = encode_png(rgb.data(), 4, 4);
  // Signature (8), length (4), "IHDR" (4), width, height, ..., CRC over type + 13 data bytes.
  EXPECT_EQ(std::string(png.begin() + 12, png.begin() + 16), "IHDR");
  put_be32(png.data() + 16, width);
  put_be32(png.data() + 20, height);
  put_be32(png.data() + 29, crc32_bytes(png.data() + 12, 17));
  return png;
}

// A baseline JPEG of 16x16 pixels whose SOF0 is rewritten to claim width x height, with at
// least `pad` bytes of COM segments after SOI (so that it is large enough for the pixels it
// claims: check_jpeg_density's 1,024 pixels per byte).
std::vector<uint8_t> jpeg_claiming(uint16_t width, uint16_t height, size_t pad = 0) {
  const std::vector<uint8_t> rgb(16 * 16 * 3, 100);
  std::vector<uint8_t> jpg = encode_jpeg(rgb.data(), 16, 16, 90);
  for (size_t added = 0; added < pad; added += 65535) {
    std::vector<uint8_t> com = {0xFF, 0xFE, 0xFF, 0xFF};  // COM, length 65535
    com.resize(2 + 65535, 'x');
    jpg.insert(jpg.begin() + 2, com.begin(), com.end());
  }
  for (size_t i = 2; i + 9 < jpg.size(); ++i) {
    if (jpg[i] == 0xFF && jpg[i + 1] == 0xC0) {  // length (2), precision (1), height, width
      jpg[i + 5] = static_cast<uint8_t>(height >> 8), jpg[i + 6] = static_cast<uint8_t>(height);
      jpg[i + 7] = static_cast<uint8_t>(width >> 8), jpg[i + 8] = static_cast<uint8_t>(width);
      return jpg;
    }
  }
  ADD_FAILURE() << "no SOF0 marker";
  return jpg;
}

// Runs f, expecting Error(format) whose message contains `part`.
template <class F>
void expect_format_error(F f, const std::string& part) {
  try {
    f();
    ADD_FAILURE() << "no error; expected one containing: " << part;
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::format) << e.what();
    EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
  }
}

TEST(ImageCodecBomb, PngHeaderClaimingFourGigapixelsFailsWithoutAllocating) {
  const std::vector<uint8_t> png = png_claiming(65535, 65535);
  EXPECT_EQ(read_image_info(png.data(), png.size(), "bomb.png").width, 65535);  // header only
  std::vector<uint8_t> out;
  expect_format_error([&] { decode_image(png.data(), png.size(), "bomb.png", {}, out); },
                      "bomb.png: decoding 65535x65535 = 4294836225 pixels exceeds the limit of 178956970");
  EXPECT_EQ(out.capacity(), 0u);
}

TEST(ImageCodecBomb, PngTooSmallForItsPixelsUnderTheLimitFailsWithoutAllocating) {
  // 10000 x 10000 RGB is 300010000 bytes of filtered rows; the file is ~60 bytes.
  const std::vector<uint8_t> png = png_claiming(10000, 10000);
  std::vector<uint8_t> out;
  expect_format_error([&] { decode_image(png.data(), png.size(), "big.png", {}, out); },
                      "big.png: truncated or corrupt PNG: " + std::to_string(png.size()) +
                          " bytes cannot hold the 300010000 bytes of a 10000x10000 image");
  EXPECT_EQ(out.capacity(), 0u);
}

TEST(ImageCodecBomb, HighlyCompressedPngStillDecodes) {
  // One colour compresses hundreds of times over, yet stays inside deflate's 1032:1 bound.
  const std::vector<uint8_t> rgb(1000 * 1000 * 3, 7);
  const std::vector<uint8_t> png = encode_png(rgb.data(), 1000, 1000);
  ASSERT_GT(3001000u / png.size(), 100u) << png.size();
  std::vector<uint8_t> out;
  const ImageInfo info = decode_image(png.data(), png.size(), "flat.png", {}, out);
  EXPECT_EQ(info.width, 1000);
  EXPECT_EQ(info.height, 1000);
  EXPECT_EQ(out, rgb);
}

// A gray 8-bit PNG of zeros, IDAT compressed by zlib at level 9: the best ratio a real encoder
// reaches (about 1030:1, just under deflate's 1032:1).
std::vector<uint8_t> zero_png(uint32_t side) {
  const std::vector<uint8_t> raw(static_cast<size_t>(side + 1) * side, 0);  // filter byte 0 + samples
  uLongf n = compressBound(static_cast<uLong>(raw.size()));
  std::vector<uint8_t> z(n);
  EXPECT_EQ(compress2(z.data(), &n, raw.data(), static_cast<uLong>(raw.size()), 9), Z_OK);
  z.resize(n);
  std::vector<uint8_t> png = {0x89, 'P', 'N', 'G', 0x0D, 0x0A, 0x1A, 0x0A};
  auto chunk = [&png](const char* type, const std::vector<uint8_t>& data) {
    uint8_t len[4];
    put_be32(len, static_cast<uint32_t>(data.size()));
    png.insert(png.end(), len, len + 4);
    const size_t at = png.size();
    png.insert(png.end(), type, type + 4);
    png.insert(png.end(), data.begin(), data.end());
    uint8_t crc[4];
    put_be32(crc, crc32_bytes(png.data() + at, data.size() + 4));
    png.insert(png.end(), crc, crc + 4);
  };
  std::vector<uint8_t> ihdr(13, 0);
  put_be32(ihdr.data(), side);
  put_be32(ihdr.data() + 4, side);
  ihdr[8] = 8;  // bit depth; colour type 0 (gray), no interlace
  chunk("IHDR", ihdr);
  chunk("IDAT", z);
  chunk("IEND", {});
  return png;
}

TEST(ImageCodecBomb, PngNearDeflatesBestRatioStillDecodes) {
  const uint32_t side = 3000;
  const std::vector<uint8_t> png = zero_png(side);
  const double ratio = static_cast<double>(side + 1) * side / static_cast<double>(png.size());
  ASSERT_GT(ratio, 1000.0) << png.size();
  ASSERT_LT(ratio, 1032.0) << png.size();
  std::vector<uint8_t> out;
  const ImageInfo info = decode_image(png.data(), png.size(), "zeros.png", {}, out);
  EXPECT_EQ(info.width, 3000);
  EXPECT_EQ(out, std::vector<uint8_t>(size_t{3000} * 3000 * 3, 0));
}

TEST(ImageCodecBomb, JpegHeaderOverTheLimitFailsWithoutAllocating) {
  const std::vector<uint8_t> jpg = jpeg_claiming(20000, 20000);
  std::vector<uint8_t> out;
  expect_format_error([&] { decode_image(jpg.data(), jpg.size(), "bomb.jpg", {}, out); },
                      "bomb.jpg: decoding 20000x20000 = 400000000 pixels exceeds the limit");
  EXPECT_EQ(out.capacity(), 0u);
  // At scale 1/8 the output is 2500x2500, under the limit: the error is then libjpeg's own
  // (the entropy data ends early), not the limit.
  try {
    decode_image(jpg.data(), jpg.size(), "bomb.jpg", {1, 8}, out);
    ADD_FAILURE() << "a 16x16 file decoded as 20000x20000";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()).find("exceeds the limit"), std::string::npos) << e.what();
  }
  // A region of the whole image at scale 1 is over the limit too (in a file large enough for
  // the pixels it claims; a 16x16 file is refused by its size first).
  ImageRegion decoded;
  const std::vector<uint8_t> padded = jpeg_claiming(20000, 20000, 400000);
  expect_format_error(
      [&] { decode_image_region(padded.data(), padded.size(), "bomb.jpg", {}, {0, 0, 20000, 20000}, out, decoded); },
      "exceeds the limit of 178956970 pixels");
  expect_format_error(
      [&] { decode_image_region(jpg.data(), jpg.size(), "bomb.jpg", {}, {0, 0, 20000, 20000}, out, decoded); },
      "bomb.jpg: 20000x20000 pixels cannot be coded in");
}

// A small file that claims many pixels under the pixel limit (13,376 x 13,376 in 600 bytes:
// 2.3 s and 704 MB to decode before this check) is refused before any pixel memory, by
// decode_image, the region decoder and so the loader, serving and `tandem pack`.
TEST(ImageCodecBomb, SmallJpegClaimingManyPixelsFailsWithoutAllocating) {
  const std::vector<uint8_t> jpg = jpeg_claiming(13376, 13376);
  std::vector<uint8_t> out;
  const std::string expected = "forged.jpg: 13376x13376 pixels cannot be coded in " + std::to_string(jpg.size()) +
                               " bytes (a Huffman-coded JPEG holds at most 1024 pixels per byte): the file is "
                               "truncated or forged";
  expect_format_error([&] { decode_image(jpg.data(), jpg.size(), "forged.jpg", {}, out); }, expected);
  EXPECT_EQ(out.capacity(), 0u);
  ImageRegion decoded;
  expect_format_error(
      [&] { decode_image_region(jpg.data(), jpg.size(), "forged.jpg", {1, 8}, {0, 0, 64, 64}, out, decoded); },
      expected);
  EXPECT_EQ(out.capacity(), 0u);
  // The same claim in a file large enough for it passes this check (and fails later, on its
  // entropy data, which ends early).
  const std::vector<uint8_t> big = jpeg_claiming(13376, 13376, 13376 * 13376 / 1024);
  try {
    decode_image_region(big.data(), big.size(), "padded.jpg", {1, 8}, {0, 0, 64, 64}, out, decoded);
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()).find("cannot be coded"), std::string::npos) << e.what();
  }
  // Real files are far below the bound: a flat 1024x1024 image, the best case for Huffman
  // coding, decodes.
  const std::vector<uint8_t> flat(1024 * 1024 * 3, 128);
  const std::vector<uint8_t> flat_jpg = encode_jpeg(flat.data(), 1024, 1024, 50);
  EXPECT_LT(1024 * 1024 / flat_jpg.size(), 1024u / 8) << flat_jpg.size();  // 8x below the bound
  decode_image(flat_jpg.data(), flat_jpg.size(), "flat.jpg", {}, out);
  EXPECT_EQ(out.size(), flat.size());
}

TEST(ImageCodecBomb, ProgressiveJpegRegionIsBoundedByTheWholeImage) {
  std::vector<uint8_t> jpg = testing::image_fixture("rgb_progressive.jpg");
  bool patched = false;
  for (size_t i = 2; i + 9 < jpg.size() && !patched; ++i) {
    if (jpg[i] == 0xFF && jpg[i + 1] == 0xC2) {
      jpg[i + 5] = 0xFF, jpg[i + 6] = 0xDC, jpg[i + 7] = 0xFF, jpg[i + 8] = 0xDC;  // 65500 x 65500
      patched = true;
    }
  }
  ASSERT_TRUE(patched);
  std::vector<uint8_t> out;
  ImageRegion decoded;
  // A small region still needs the coefficients of all 65500 x 65500 pixels.
  expect_format_error(
      [&] { decode_image_region(jpg.data(), jpg.size(), "prog.jpg", {1, 8}, {0, 0, 32, 32}, out, decoded); },
      "prog.jpg: decoding 65500x65500 = 4290250000 pixels exceeds the limit");
}

}  // namespace
}  // namespace tandem::data
