// decode_image (image_codec.h): checks the scale and hands the bytes to the JPEG or PNG decoder.
#include "data/codec/codec.h"
#include "tandem/error.h"

namespace tandem::data {

namespace {

// The JPEG scales decode_image supports: num / denom equal to k / 8 for k in {1, 2, 4, 8}.
bool supported_jpeg_scale(ImageScale s) {
  if (s.num <= 0 || s.denom <= 0) return false;
  for (int64_t k : {1, 2, 4, 8})
    if (int64_t{s.num} * 8 == k * s.denom) return true;
  return false;
}

}  // namespace

ImageInfo decode_image_region(const uint8_t* bytes, size_t size, const char* source,
                              ImageScale scale, ImageRegion request, std::vector<uint8_t>& out,
                              ImageRegion& decoded) {
  if (sniff_encoding(bytes, size) == Encoding::jpeg) {
    TD_CHECK_ARG(supported_jpeg_scale(scale), "decode_image_region",
                 "{}: JPEG scale must be 1/8, 1/4, 1/2 or 1, got {}/{}", source ? source : "image",
                 scale.num, scale.denom);
    return codec::decode_jpeg_region(bytes, size, source, scale, request, out, decoded);
  }
  const ImageInfo info = decode_image(bytes, size, source, scale, out);
  decoded = ImageRegion{0, 0, info.width, info.height};
  return info;
}

ImageInfo decode_image(const uint8_t* bytes, size_t size, const char* source, ImageScale scale,
                       std::vector<uint8_t>& out) {
  const Encoding encoding = sniff_encoding(bytes, size);
  if (encoding == Encoding::png) {
    TD_CHECK_ARG(scale.num > 0 && scale.num == scale.denom, "decode_image",
                 "{}: a PNG decodes at scale 1 only, got {}/{}", source ? source : "image",
                 scale.num, scale.denom);
    return codec::decode_png(bytes, size, source, out);
  }
  if (encoding == Encoding::jpeg) {
    TD_CHECK_ARG(supported_jpeg_scale(scale), "decode_image",
                 "{}: JPEG scale must be 1/8, 1/4, 1/2 or 1, got {}/{}", source ? source : "image",
                 scale.num, scale.denom);
    return codec::decode_jpeg(bytes, size, source, scale, out);
  }
  codec::throw_unknown_encoding(source, size);
}

}  // namespace tandem::data
