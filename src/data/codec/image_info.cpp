// sniff_encoding, read_image_info and jpeg_scale_for (image_codec.h), and the error helpers
// the decoders share.
#include <cmath>
#include <cstring>

#include "data/codec/codec.h"
#include "tandem/error.h"

namespace tandem::data {

namespace codec {

void throw_decode_error(const char* source, const std::string& message) {
  throw Error(ErrorCode::format, fmt::format("{}: {}", source ? source : "image", message));
}

void throw_unknown_encoding(const char* source, size_t size) {
  throw_decode_error(source, size == 0 ? std::string("empty file, expected a JPEG or PNG image")
                                       : "not a JPEG or PNG image (unknown signature)");
}

void check_image_size(const char* source, int64_t width, int64_t height) {
  if (width <= 0 || height <= 0 || width > kMaxImageSide || height > kMaxImageSide)
    throw_decode_error(source, fmt::format("image size {}x{} is outside 1..{} pixels per side",
                                           width, height, kMaxImageSide));
}

void check_decode_pixels(const char* source, int64_t width, int64_t height) {
  if (width * height > kMaxDecodePixels)
    throw_decode_error(source, fmt::format("decoding {}x{} = {} pixels exceeds the limit of {} pixels "
                                           "(a decompression bomb, or an image too large to decode whole)",
                                           width, height, width * height, kMaxDecodePixels));
}

void check_encode_args(const char* op, const uint8_t* rgb, int width, int height) {
  TD_CHECK_ARG(width > 0 && height > 0 && width <= kMaxImageSide && height <= kMaxImageSide, op,
               "width and height must be in 1..{}, got {}x{}", kMaxImageSide, width, height);
  TD_CHECK_ARG(rgb != nullptr, op, "no pixels (null pointer) for a {}x{} image", width, height);
}

}  // namespace codec

Encoding sniff_encoding(const uint8_t* bytes, size_t size) noexcept {
  static constexpr uint8_t kJpeg[] = {0xFF, 0xD8, 0xFF};
  static constexpr uint8_t kPng[] = {0x89, 'P', 'N', 'G', 0x0D, 0x0A, 0x1A, 0x0A};
  if (bytes == nullptr) return Encoding::raw;
  if (size >= sizeof(kJpeg) && std::memcmp(bytes, kJpeg, sizeof(kJpeg)) == 0) return Encoding::jpeg;
  if (size >= sizeof(kPng) && std::memcmp(bytes, kPng, sizeof(kPng)) == 0) return Encoding::png;
  return Encoding::raw;
}

ImageInfo read_image_info(const uint8_t* bytes, size_t size, const char* source) {
  switch (sniff_encoding(bytes, size)) {
    case Encoding::jpeg:
      return codec::jpeg_info(bytes, size, source);
    case Encoding::png:
      return codec::png_info(bytes, size, source);
    case Encoding::raw:
      break;
  }
  codec::throw_unknown_encoding(source, size);
}

ImageScale jpeg_scale_for(double region_width, double region_height, int need_width,
                          int need_height) {
  const bool valid = std::isfinite(region_width) && std::isfinite(region_height) &&
                     region_width > 0 && region_height > 0 && need_width > 0 && need_height > 0;
  if (!valid) return ImageScale{};
  for (int num : {1, 2, 4}) {
    if (region_width * num >= 8.0 * need_width && region_height * num >= 8.0 * need_height)
      return ImageScale{num, 8};
  }
  return ImageScale{};
}

}  // namespace tandem::data
