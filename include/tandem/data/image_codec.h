// Image codecs: JPEG through libjpeg-turbo's TurboJPEG API, PNG through libpng. Every image
// comes out as 8-bit RGB, interleaved [H, W, 3] (rows of width * 3 bytes, no padding):
// grayscale is replicated, alpha dropped (not blended), palette expanded, 16-bit reduced to
// 8 bits, CMYK and YCCK JPEG converted (Adobe-inverted CMYK, the APP14 "Adobe" marker,
// included). A JPEG may be decoded at a DCT-domain scale num/8 (1/8, 1/4, 1/2, 1), which is
// how a crop that will be shrunk by 2x or more is decoded at a fraction of the work.
// Errors: Error(format) whose message starts with `source` (the file's path, or "image" when
// null) and carries the decoder's own message, e.g. "photos/cat/1.jpg: Premature end of JPEG
// file"; a failed decode leaks nothing (libjpeg and libpng report errors by longjmp; the
// decoder state is released on every path).
// Thread-safety: every function is reentrant; concurrent calls on different buffers are safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "tandem/data/dataset.h"

namespace tandem::data {

/// What a file's header says.
struct ImageInfo {
  Encoding encoding = Encoding::raw;
  int width = 0;   // pixels, > 0
  int height = 0;  // pixels, > 0
  int channels = 0;  // in the file: 1 (gray), 2 (gray+alpha), 3 (RGB/YCbCr), 4 (RGBA, CMYK, YCCK)
};

/// A DCT-domain scale num / denom for JPEG (denom 8: num in {1, 2, 4, 8}); PNG decodes at 1.
struct ImageScale {
  int num = 1;
  int denom = 1;
  /// The decoded size of a dimension of `pixels`: ceil(pixels * num / denom) (TurboJPEG's TJSCALED).
  int scaled(int pixels) const { return static_cast<int>((static_cast<int64_t>(pixels) * num + denom - 1) / denom); }
};

/// The encoding from the first bytes: jpeg (FF D8 FF), png (89 'P' 'N' 'G' 0D 0A 1A 0A), or
/// raw when neither (too short included). Never throws.
Encoding sniff_encoding(const uint8_t* bytes, size_t size) noexcept;

/// Reads the header only. Throws Error(format) "<source>: <why>" for an unknown encoding, a
/// corrupt or truncated header, or a width or height of 0 or above 65535.
ImageInfo read_image_info(const uint8_t* bytes, size_t size, const char* source);

/// The smallest JPEG scale in {1/8, 1/4, 1/2, 1} that keeps both decoded dimensions of an
/// image region of `region_width` x `region_height` pixels at least `need_width` x
/// `need_height` (so the resampler still only shrinks). 1 for PNG and whenever no reduction fits.
ImageScale jpeg_scale_for(double region_width, double region_height, int need_width, int need_height);

/// Decodes into `out` (resized to height * width * 3) as RGB u8 [H, W, 3], at `scale` (JPEG
/// only; PNG requires num == denom). Returns the decoded image's info (width and height are the
/// scaled ones). Throws Error(format) as above for a corrupt or truncated image.
ImageInfo decode_image(const uint8_t* bytes, size_t size, const char* source, ImageScale scale,
                       std::vector<uint8_t>& out);

/// Encodes RGB u8 [height, width, 3] as JPEG (quality 1..100, 4:2:0 subsampling). Throws
/// Error(invalid_argument) for bad sizes or quality.
std::vector<uint8_t> encode_jpeg(const uint8_t* rgb, int width, int height, int quality);

/// Encodes RGB u8 [height, width, 3] as an 8-bit PNG. Throws Error(invalid_argument) for bad sizes.
std::vector<uint8_t> encode_png(const uint8_t* rgb, int width, int height);

}  // namespace tandem::data
