// JPEG header reading and decoding through TurboJPEG (image_codec.h), with the CMYK / YCCK to
// RGB conversion libjpeg leaves to the application.
#include <cstring>
#include <string>

#include "data/codec/codec.h"
#include "data/codec/turbojpeg_handle.h"
#include "tandem/error.h"

namespace tandem::data::codec {

namespace {

// Accurate integer DCT (the default, named to be explicit); refuse progressive files with
// more than 500 scans, which otherwise take unbounded time (a known denial-of-service input).
constexpr int kDecodeFlags = TJFLAG_ACCURATEDCT | TJFLAG_LIMITSCANS;

// Throws the handle's message, discarding the handle (see turbojpeg_handle.h).
[[noreturn]] void throw_tj_error(tjhandle handle, const char* source) {
  std::string message = tjGetErrorStr2(handle);
  discard_thread_jpeg_decompressor();
  throw_decode_error(source, message);
}

int file_channels(int colorspace) {
  switch (colorspace) {
    case TJCS_GRAY:
      return 1;
    case TJCS_CMYK:
    case TJCS_YCCK:
      return 4;
    default:
      return 3;
  }
}

// Whether the markers before the first scan include an APP14 "Adobe" segment (at least 12
// data bytes starting "Adobe", the test libjpeg's jdmarker.c applies). Photoshop, which
// writes that marker, stores CMYK inverted (0 = full ink).
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
    if (marker == 0xEE && length >= 2 + 12 && i + 4 + 5 <= n && std::memcmp(b + i + 4, "Adobe", 5) == 0)
      return true;
    i += 2 + length;
  }
  return false;
}

// Whether an EOI marker (FF D9) follows the last start-of-scan marker (FF DA): the data is
// complete. Neither byte pair can occur inside entropy-coded data (FF is stuffed as FF 00).
bool has_eoi_after_last_scan(const uint8_t* b, size_t n) {
  size_t eoi = n;
  for (size_t i = n; i >= 2 && eoi == n; --i)
    if (b[i - 2] == 0xFF && b[i - 1] == 0xD9) eoi = i - 2;
  if (eoi == n) return false;
  for (size_t i = eoi; i >= 2; --i)
    if (b[i - 2] == 0xFF && b[i - 1] == 0xDA) return true;
  return false;
}

// TurboJPEG reports libjpeg warnings as TJERR_WARNING after decoding the whole image; a
// truncated file is one ("Premature end of JPEG file": the rest is filled with gray), corrupt
// entropy data another. All are errors except junk between segments ("Corrupt JPEG data: N
// extraneous bytes before marker 0x.."), common in camera files and harmless to the pixels,
// accepted when the file still ends with EOI after its last scan.
bool is_benign_warning(tjhandle handle, const uint8_t* bytes, size_t size) {
  if (tjGetErrorCode(handle) != TJERR_WARNING) return false;
  const char* message = tjGetErrorStr2(handle);
  return std::strstr(message, "extraneous bytes before marker") != nullptr &&
         has_eoi_after_last_scan(bytes, size);
}

// (x * y) / 255 rounded to nearest, for x, y in [0, 255].
inline uint8_t mul255(unsigned x, unsigned y) { return static_cast<uint8_t>((x * y + 127) / 255); }

// CMYK [n, 4] to RGB [n, 3] in place (the output never overtakes the input). Plain CMYK:
// R = (255 - C)(255 - K) / 255 (likewise G from M, B from Y); Adobe-inverted CMYK stores
// 255 - C etc., so R = C'K' / 255. This is the naive conversion without a colour profile
// that Pillow applies (libImaging/Convert.c cmyk2rgb, after its "CMYK;I" unpacking of Adobe files).
void cmyk_to_rgb(uint8_t* p, size_t pixels, bool inverted) {
  for (size_t i = 0; i < pixels; ++i) {
    unsigned c = p[4 * i], m = p[4 * i + 1], y = p[4 * i + 2], k = p[4 * i + 3];
    if (!inverted) c = 255 - c, m = 255 - m, y = 255 - y, k = 255 - k;
    p[3 * i] = mul255(c, k);
    p[3 * i + 1] = mul255(m, k);
    p[3 * i + 2] = mul255(y, k);
  }
}

struct JpegHeader {
  int width = 0, height = 0, subsampling = 0, colorspace = 0;
};

// A benign warning in tjDecompressHeader3 (junk before SOS) still fills the outputs.
JpegHeader read_header(const uint8_t* bytes, size_t size, const char* source) {
  tjhandle handle = thread_jpeg_decompressor();
  JpegHeader h;
  if (tjDecompressHeader3(handle, bytes, size, &h.width, &h.height, &h.subsampling, &h.colorspace) != 0) {
    if (!is_benign_warning(handle, bytes, size)) throw_tj_error(handle, source);
    discard_thread_jpeg_decompressor();
  }
  check_image_size(source, h.width, h.height);
  return h;
}

}  // namespace

ImageInfo jpeg_info(const uint8_t* bytes, size_t size, const char* source) {
  const JpegHeader h = read_header(bytes, size, source);
  return ImageInfo{Encoding::jpeg, h.width, h.height, file_channels(h.colorspace)};
}

ImageInfo decode_jpeg(const uint8_t* bytes, size_t size, const char* source, ImageScale scale,
                      std::vector<uint8_t>& out) {
  const JpegHeader h = read_header(bytes, size, source);
  tjhandle handle = thread_jpeg_decompressor();
  const int width = scale.scaled(h.width), height = scale.scaled(h.height);
  const bool cmyk = h.colorspace == TJCS_CMYK || h.colorspace == TJCS_YCCK;
  const size_t pixels = static_cast<size_t>(width) * static_cast<size_t>(height);
  out.resize(pixels * (cmyk ? 4 : 3));
  // TurboJPEG picks the largest scaling factor whose TJSCALED size fits width x height; that
  // is `scale` or one giving the same size, so the output is exactly width x height.
  if (tjDecompress2(handle, bytes, size, out.data(), width, 0, height, cmyk ? TJPF_CMYK : TJPF_RGB,
                    kDecodeFlags) != 0) {
    if (!is_benign_warning(handle, bytes, size)) throw_tj_error(handle, source);
    discard_thread_jpeg_decompressor();
  }
  if (cmyk) {
    cmyk_to_rgb(out.data(), pixels, has_adobe_marker(bytes, size));
    out.resize(pixels * 3);
  }
  return ImageInfo{Encoding::jpeg, width, height, file_channels(h.colorspace)};
}

}  // namespace tandem::data::codec
