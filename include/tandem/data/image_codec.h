// Image codecs: JPEG through libjpeg-turbo's TurboJPEG API, PNG through libpng. Every image
// comes out as 8-bit RGB, interleaved [H, W, 3] (rows of width * 3 bytes, no padding):
// grayscale is replicated, alpha dropped (not blended), palette expanded, 16-bit reduced to
// 8 bits, CMYK and YCCK JPEG converted (Adobe-inverted CMYK, the APP14 "Adobe" marker,
// included). A JPEG may be decoded at a DCT-domain scale num/8 (1/8, 1/4, 1/2, 1), which is
// how a crop that will be shrunk by 2x or more is decoded at a fraction of the work.
//
// JPEG decoding: tjDecompress2 with TJFLAG_ACCURATEDCT (the integer "islow" IDCT; no
// TJFLAG_FASTDCT, no TJFLAG_FASTUPSAMPLE) and TJFLAG_LIMITSCANS (a progressive file of more
// than 500 scans is an error rather than unbounded work). libjpeg warnings are errors
// (a truncated file, "Premature end of JPEG file", is only a warning to libjpeg and would
// otherwise decode with its missing part gray; so is corrupt entropy data), except "Corrupt
// JPEG data: N extraneous bytes before marker", junk between segments that leaves the pixels
// intact, accepted when an EOI marker follows the last scan. CMYK to RGB is the naive
// conversion Pillow applies (libImaging/Convert.c): R = (255 - C)(255 - K) / 255, G and B
// likewise from M and Y, rounded to nearest; when the file has an Adobe APP14 marker (as every
// Photoshop CMYK file and every YCCK file does) the stored values are inverted (255 - C, ...)
// and are un-inverted first (libjpeg.txt: Photoshop "writes inverted data in CMYK JPEG
// files"; Pillow reads such files as "CMYK;I").
// PNG decoding: png_set_expand, png_set_strip_16 (keeps the high byte, as Pillow does),
// png_set_strip_alpha, png_set_gray_to_rgb, interlace handling; no gamma correction; ancillary
// chunks are ignored, the file is read to IEND (so a file cut anywhere is an error).
// Pillow decodes the fixtures in tests/data/fixtures/images/ to the same pixels (PNG exactly,
// JPEG with this libjpeg-turbo 2.1.5 exactly too; a test allows 2 levels for other builds).
//
// Errors: Error(format) whose message starts with `source` (the file's path, or "image" when
// null) and carries the decoder's own message, e.g. "photos/cat/1.jpg: Premature end of JPEG
// file"; a failed decode leaks nothing (libjpeg and libpng report errors by longjmp; the
// decoder state is released on every path). Argument errors (a bad scale, bad encoder input)
// are Error(invalid_argument) "[decode_image] ...", "[encode_jpeg] ...", "[encode_png] ...".
// Thread-safety: every function is reentrant; concurrent calls on different buffers are safe.
// Each thread keeps one TurboJPEG decompressor and one compressor (created on first use,
// destroyed at thread exit, replaced after a failed call).
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

/// The most pixels decode_image or decode_image_region produces in one call: Pillow's
/// decompression-bomb error threshold (2 * Image.MAX_IMAGE_PIXELS, 0.5 GiB of RGB). A header
/// claiming more (e.g. a 74-byte PNG that says 65535x65535) is an error before any pixel
/// memory is allocated.
inline constexpr int64_t kMaxDecodePixels = 178'956'970;

/// The encoding from the first bytes: jpeg (FF D8 FF), png (89 'P' 'N' 'G' 0D 0A 1A 0A), or
/// raw when neither (too short, or null, included). Never throws.
Encoding sniff_encoding(const uint8_t* bytes, size_t size) noexcept;

/// Reads the header only (JPEG: the markers up to the first scan; PNG: the chunks up to the
/// image data), so a file cut inside its image data passes here and fails in decode_image.
/// Throws Error(format) "<source>: <why>" for an unknown encoding ("empty file, expected a
/// JPEG or PNG image", "not a JPEG or PNG image (unknown signature)"), a corrupt or truncated
/// header (the decoder's message), or a width or height of 0 or above 65535 ("image size WxH
/// is outside 1..65535 pixels per side"; libjpeg reports a zero height itself: "Empty JPEG
/// image (DNL not supported)").
ImageInfo read_image_info(const uint8_t* bytes, size_t size, const char* source);

/// The smallest JPEG scale in {1/8, 1/4, 1/2, 1} that keeps both decoded dimensions of an
/// image region of `region_width` x `region_height` pixels at least `need_width` x
/// `need_height` (so the resampler still only shrinks): k/8 is chosen when region_width * k / 8
/// >= need_width and region_height * k / 8 >= need_height (so 1/2 needs a region at least twice
/// the output in both directions). Returns {1, 8}, {2, 8} or {4, 8} for a reduction and {1, 1}
/// when none fits, or when an argument is not finite and positive. The caller uses {1, 1} for
/// PNG. The decoded image is scale.scaled(width) x scale.scaled(height); the region in it is
/// its size times num / denom (to within a pixel). Never throws.
ImageScale jpeg_scale_for(double region_width, double region_height, int need_width, int need_height);

/// Decodes into `out` (resized to height * width * 3; its old contents are overwritten) as RGB
/// u8 [H, W, 3], at `scale` (JPEG: num / denom equal to 1/8, 1/4, 1/2 or 1 in any form, e.g.
/// {1, 2} or {4, 8}; PNG requires num == denom). Returns the decoded image's info: width and
/// height are the scaled ones (exactly scale.scaled() of the file's), channels the file's (the
/// output always has 3). Throws Error(format) as above for a corrupt or truncated image (on
/// failure `out` holds unspecified bytes), for a decoded size over kMaxDecodePixels
/// ("<source>: decoding WxH = N pixels exceeds the limit of ..."), for a PNG whose file is too
/// small to hold its pixels even at deflate's best ratio (1032:1: "<source>: truncated or
/// corrupt PNG: ..."), and Error(invalid_argument) for an unsupported scale.
ImageInfo decode_image(const uint8_t* bytes, size_t size, const char* source, ImageScale scale,
                       std::vector<uint8_t>& out);

/// A rectangle of an image in pixels: columns [x, x + width), rows [y, y + height).
struct ImageRegion {
  int x = 0;
  int y = 0;
  int width = 0;
  int height = 0;
  friend bool operator==(const ImageRegion&, const ImageRegion&) = default;
};

/// Decodes only the part of the image at `scale` that covers `request` (in the scaled image's
/// pixels: 0 <= x, 0 < width, x + width <= scale.scaled(file width), likewise y and height).
/// JPEG, through libjpeg's API with the same settings as decode_image (islow IDCT, fancy
/// upsampling, at most 500 scans): jpeg_crop_scanline decodes only the iMCU columns (8 or 16
/// pixels at scale 1, times the scale) that hold the requested ones, jpeg_skip_scanlines
/// skips the rows above (their entropy data is still read), the rows below are not decoded
/// (jpeg_abort_decompress). `decoded` receives the rectangle actually decoded, which contains
/// `request` (widened leftward to an iMCU column, rows exact), and `out` RGB u8
/// [decoded.height, decoded.width, 3] of it (resized; old contents overwritten). Pixels equal
/// decode_image's at the same place, except within 1 pixel of a side of `decoded` that is not
/// a side of the image, where the chroma upsampling of a 4:2:0 / 4:2:2 image lacks the
/// neighbour outside and may differ by a few levels: request 2 pixels more on each side than
/// you read. PNG decodes the whole image (`decoded` is all of it). Returns as decode_image: the
/// scaled image's width and height, the file's channels.
/// Errors: as decode_image (Error(format) "<source>: <libjpeg message>", the pixel limit on
/// the decoded rectangle, the same warnings
/// are errors and the same junk-between-segments exception; nothing leaks on any path;
/// Error(invalid_argument) "[decode_image_region] ..." for a bad scale or a request outside
/// the image). Validation is weaker than decode_image's: corrupt entropy data below the
/// region, or in the columns right of it in a progressive file's later scans, goes unseen.
/// A file cut below the region is still an error, by a rule of its own: the bytes after the
/// header must contain an EOI marker (FF D9), else "<source>: Premature end of JPEG file (no
/// EOI marker)" (cheap for a file ending in EOI; trailing bytes after EOI are allowed). Use
/// decode_image to validate a file fully.
/// Thread-safety: reentrant (each call has its own libjpeg decompressor).
ImageInfo decode_image_region(const uint8_t* bytes, size_t size, const char* source,
                              ImageScale scale, ImageRegion request, std::vector<uint8_t>& out,
                              ImageRegion& decoded);

/// Encodes RGB u8 [height, width, 3] as a baseline JFIF JPEG (quality 1..100, 4:2:0
/// subsampling, accurate DCT). Throws Error(invalid_argument) for a width or height outside
/// 1..65535, a null `rgb` or a bad quality.
std::vector<uint8_t> encode_jpeg(const uint8_t* rgb, int width, int height, int quality);

/// Encodes RGB u8 [height, width, 3] as an 8-bit RGB PNG (not interlaced, zlib's default level).
/// Throws Error(invalid_argument) for a width or height outside 1..65535 or a null `rgb`.
std::vector<uint8_t> encode_png(const uint8_t* rgb, int width, int height);

}  // namespace tandem::data
