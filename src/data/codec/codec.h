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

ImageInfo jpeg_info(const uint8_t* bytes, size_t size, const char* source);
ImageInfo png_info(const uint8_t* bytes, size_t size, const char* source);

/// `scale` is already validated: num / denom is one of 1/8, 1/4, 1/2, 1.
ImageInfo decode_jpeg(const uint8_t* bytes, size_t size, const char* source, ImageScale scale,
                      std::vector<uint8_t>& out);
ImageInfo decode_png(const uint8_t* bytes, size_t size, const char* source, std::vector<uint8_t>& out);

/// Checks encode_jpeg / encode_png arguments; throws Error(invalid_argument, "[op] ...").
void check_encode_args(const char* op, const uint8_t* rgb, int width, int height);

}  // namespace tandem::data::codec
