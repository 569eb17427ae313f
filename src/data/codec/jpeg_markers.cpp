// JPEG marker scans and the CMYK / YCCK to RGB conversion libjpeg leaves to the application,
// shared by the full-image decoder (jpeg_decode.cpp) and the region decoder
// (jpeg_region_decode.cpp). Contracts in codec.h.
#include <fmt/format.h>

#include <cstring>

#include "data/codec/codec.h"

namespace tandem::data::codec {

namespace {

// (x * y) / 255 rounded to nearest, for x, y in [0, 255].
inline uint8_t mul255(unsigned x, unsigned y) {
  return static_cast<uint8_t>((x * y + 127) / 255);
}

}  // namespace

namespace {

// The frame marker (SOF0-SOF15, not DHT, JPG or DAC) before the first scan, or 0. Junk between
// segments is skipped as libjpeg skips it.
uint8_t frame_marker(const uint8_t* b, size_t n) {
  size_t i = 2;  // after SOI
  while (i + 4 <= n) {
    if (b[i] != 0xFF) {  // extraneous bytes before a marker
      ++i;
      continue;
    }
    const uint8_t marker = b[i + 1];
    if (marker == 0xFF) {
      ++i;
      continue;
    }
    if (marker == 0x01 || (marker >= 0xD0 && marker <= 0xD8)) {
      i += 2;
      continue;
    }
    if (marker == 0xDA || marker == 0xD9) return 0;
    if (marker >= 0xC0 && marker <= 0xCF && marker != 0xC4 && marker != 0xC8 && marker != 0xCC) return marker;
    const size_t length = (size_t{b[i + 2]} << 8) | b[i + 3];
    if (length < 2) return 0;
    i += 2 + length;
  }
  return 0;
}

}  // namespace

void check_jpeg_density(const char* source, const uint8_t* b, size_t n, int64_t width, int64_t height) {
  const uint8_t sof = frame_marker(b, n);
  const bool arithmetic = sof >= 0xC9;
  const int64_t per_byte = arithmetic ? 16384 : 1024;
  const int64_t pixels = width * height;
  if (pixels / per_byte >= static_cast<int64_t>(n))
    throw_decode_error(source, fmt::format("{}x{} pixels cannot be coded in {} bytes (a {}-coded JPEG holds at most "
                                           "{} pixels per byte): the file is truncated or forged",
                                           width, height, n, arithmetic ? "arithmetic" : "Huffman", per_byte));
}

bool has_adobe_marker(const uint8_t* b, size_t n) {
  size_t i = 2;  // after SOI
  while (i + 4 <= n) {
    if (b[i] != 0xFF) return false;
    const uint8_t marker = b[i + 1];
    if (marker == 0xFF) {  // fill byte
      ++i;
      continue;
    }
    if (marker == 0x01 || (marker >= 0xD0 && marker <= 0xD8)) {  // no length field
      i += 2;
      continue;
    }
    if (marker == 0xDA || marker == 0xD9) return false;  // first scan or end: header done
    const size_t length = (size_t{b[i + 2]} << 8) | b[i + 3];
    if (length < 2) return false;
    if (marker == 0xEE && length >= 2 + 12 && i + 4 + 5 <= n &&
        std::memcmp(b + i + 4, "Adobe", 5) == 0)
      return true;
    i += 2 + length;
  }
  return false;
}

bool has_eoi_after_last_scan(const uint8_t* b, size_t n) {
  // The last SOS of the file, then an EOI after it (an EOI before it, e.g. an Exif thumbnail's,
  // does not end the image).
  size_t sos = n;
  for (size_t i = n; i >= 2 && sos == n; --i)
    if (b[i - 2] == 0xFF && b[i - 1] == 0xDA) sos = i - 2;
  if (sos == n) return false;
  return has_eoi_after(b, n, sos + 2);
}

bool has_eoi_after(const uint8_t* b, size_t n, size_t from) {
  for (size_t i = n; i >= from + 2; --i)
    if (b[i - 2] == 0xFF && b[i - 1] == 0xD9) return true;
  return false;
}

void cmyk_to_rgb(uint8_t* p, size_t pixels, bool inverted) {
  for (size_t i = 0; i < pixels; ++i) {
    unsigned c = p[4 * i], m = p[4 * i + 1], y = p[4 * i + 2], k = p[4 * i + 3];
    if (!inverted) c = 255 - c, m = 255 - m, y = 255 - y, k = 255 - k;
    p[3 * i] = mul255(c, k);
    p[3 * i + 1] = mul255(m, k);
    p[3 * i + 2] = mul255(y, k);
  }
}

}  // namespace tandem::data::codec
