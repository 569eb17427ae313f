// Internal to src/data/codec: the per-format halves of image_codec.h's functions and the
// shared error helper. The public contract (shapes, errors, thread-safety) is in
// include/tandem/data/image_codec.h.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "tandem/data/image_codec.h"

namespace tandem::data::codec {

/// Throws Error(format, "<source>: <message>"), source "image" when null.
[[noreturn]] void throw_decode_error(const char* source, const std::string& message);

/// Throws throw_decode_error: `size` bytes are neither JPEG nor PNG (or empty).
[[noreturn]] void throw_unknown_encoding(const char* source, size_t size);

/// The largest width or height read_image_info and decode_image accept (JPEG's own limit).
inline constexpr int kMaxImageSide = 65535;

/// Throws throw_decode_error unless 0 < width, height <= kMaxImageSide.
void check_image_size(const char* source, int64_t width, int64_t height);

/// Throws throw_decode_error when decoding `width` x `height` pixels at once would exceed
/// kMaxDecodePixels (image_codec.h), before any pixel memory is allocated.
void check_decode_pixels(const char* source, int64_t width, int64_t height);

ImageInfo jpeg_info(const uint8_t* bytes, size_t size, const char* source);
ImageInfo png_info(const uint8_t* bytes, size_t size, const char* source);

/// `scale` is already validated: num / denom is one of 1/8, 1/4, 1/2, 1.
ImageInfo decode_jpeg(const uint8_t* bytes, size_t size, const char* source, ImageScale scale,
                      std::vector<uint8_t>& out);
ImageInfo decode_png(const uint8_t* bytes, size_t size, const char* source,
                     std::vector<uint8_t>& out);

/// Region decoding (image_codec.h's decode_image_region) of a JPEG; `scale` is validated and
/// `request` lies inside the scaled image.
ImageInfo decode_jpeg_region(const uint8_t* bytes, size_t size, const char* source,
                             ImageScale scale, ImageRegion request, std::vector<uint8_t>& out,
                             ImageRegion& decoded);

/// Throws throw_decode_error when a JPEG of `n` bytes declares more pixels than its entropy
/// data can code: Huffman coding spends at least 1 bit on each 8x8 block's DC coefficient
/// (T.81 F.1.2.1: the shortest code is 1 bit; progressive AC scans may code whole bands of
/// blocks in an EOB run, the DC scan may not), so a grey image needs at least
/// width * height / 512 bytes; the limit is twice that, 1,024 pixels per byte of file. An
/// arithmetic-coded file (SOF9-SOF15) can go below a bit per block: 16,384 pixels per byte.
/// The check runs before any pixel memory is allocated, so a 400-byte file that claims
/// 13,376 x 13,376 pixels costs microseconds, not seconds and 700 MB.
void check_jpeg_density(const char* source, const uint8_t* b, size_t n, int64_t width, int64_t height);

/// Whether the markers before the first scan of the JPEG `b` (n bytes) include an APP14
/// "Adobe" segment (at least 12 data bytes starting "Adobe", the test of libjpeg's jdmarker.c).
/// Photoshop, which writes that marker, stores CMYK inverted (0 = full ink).
bool has_adobe_marker(const uint8_t* b, size_t n);

/// Whether an EOI marker (FF D9) follows the last start-of-scan marker (FF DA): the data is
/// complete. Neither byte pair can occur inside entropy-coded data (FF is stuffed as FF 00).
/// Scans from the end: O(n) in the worst case.
bool has_eoi_after_last_scan(const uint8_t* b, size_t n);

/// Whether an EOI marker (FF D9) lies in b[from, n), searched from the end: O(1) for a file
/// ending in EOI, O(trailing bytes) for one with data after it, O(n - from) when there is none.
bool has_eoi_after(const uint8_t* b, size_t n, size_t from);

/// CMYK [pixels, 4] to RGB [pixels, 3] in place (the output never overtakes the input). Plain
/// CMYK: R = (255 - C)(255 - K) / 255 rounded to nearest (likewise G from M, B from Y);
/// Adobe-inverted CMYK (`inverted`) stores 255 - C etc., so R = C'K' / 255. The naive
/// conversion without a colour profile that Pillow applies (libImaging/Convert.c cmyk2rgb,
/// after its "CMYK;I" unpacking of Adobe files).
void cmyk_to_rgb(uint8_t* p, size_t pixels, bool inverted);

/// Checks encode_jpeg / encode_png arguments; throws Error(invalid_argument, "[op] ...").
void check_encode_args(const char* op, const uint8_t* rgb, int width, int height);

}  // namespace tandem::data::codec
