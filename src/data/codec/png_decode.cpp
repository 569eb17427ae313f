// PNG header reading and decoding through libpng 1.6 (image_codec.h), from memory.
// libpng reports errors by longjmp to the setjmp in the function that called it. The two
// functions that call libpng (read_header_steps, read_rows_steps) hold no C++ object with a
// destructor and read none of their locals after the jump; the libpng structures are owned
// by a PngReader in the caller, released on every path.
#include <png.h>

#include <csetjmp>
#include <cstdio>
#include <cstring>

#include "data/codec/codec.h"
#include "tandem/error.h"

namespace tandem::data::codec {

namespace {

// Deflate's largest expansion: a 258-byte match coded in 2 bits (RFC 1951).
constexpr uint64_t kMaxDeflateRatio = 1032;

struct PngReader {
  png_structp png = nullptr;
  png_infop info = nullptr;
  const uint8_t* bytes = nullptr;
  size_t size = 0;
  size_t offset = 0;
  char message[256] = "";  // the last libpng error message

  PngReader() = default;
  PngReader(const PngReader&) = delete;
  PngReader& operator=(const PngReader&) = delete;
  ~PngReader() { png_destroy_read_struct(&png, info ? &info : nullptr, nullptr); }
};

void on_error(png_structp png, png_const_charp message) {
  auto* r = static_cast<PngReader*>(png_get_error_ptr(png));
  std::snprintf(r->message, sizeof(r->message), "%s", message ? message : "libpng error");
  png_longjmp(png, 1);
}

void on_warning(png_structp, png_const_charp) {}  // e.g. a known-bad sRGB profile: ignored

void on_read(png_structp png, png_bytep data, size_t length) {
  auto* r = static_cast<PngReader*>(png_get_io_ptr(png));
  if (length > r->size - r->offset) png_error(png, "Premature end of PNG file");
  std::memcpy(data, r->bytes + r->offset, length);
  r->offset += length;
}

void open_reader(PngReader& r, const uint8_t* bytes, size_t size) {
  r.bytes = bytes;
  r.size = size;
  r.png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &r, &on_error, &on_warning);
  if (r.png) r.info = png_create_info_struct(r.png);
  TD_CHECK(r.png && r.info, ErrorCode::out_of_memory, "png", "cannot create a libpng reader");
  png_set_read_fn(r.png, &r, &on_read);
}

// Reads the chunks up to the image data. false: libpng failed (r.message says why).
bool read_header_steps(PngReader& r) {
  if (setjmp(png_jmpbuf(r.png))) return false;
  png_read_info(r.png, r.info);
  return true;
}

// Sets up the conversion to 8-bit RGB and returns the number of interlace passes; 0 when
// libpng failed.
int setup_rgb_steps(PngReader& r) {
  if (setjmp(png_jmpbuf(r.png))) return 0;
  png_set_expand(r.png);    // palette to RGB, gray below 8 bits to 8, tRNS to alpha
  png_set_strip_16(r.png);  // 16 to 8 bits: the high byte, as Pillow does
  png_set_strip_alpha(r.png);
  png_set_gray_to_rgb(r.png);
  const int passes = png_set_interlace_handling(r.png);
  png_read_update_info(r.png, r.info);
  return passes;
}

// Reads every row of every pass into rows of `stride` bytes at `pixels`, then the chunks
// after the image (so a file cut before IEND is reported). false: libpng failed.
bool read_rows_steps(PngReader& r, uint8_t* pixels, size_t stride, int height, int passes) {
  if (setjmp(png_jmpbuf(r.png))) return false;
  for (int pass = 0; pass < passes; ++pass)
    for (int y = 0; y < height; ++y)
      png_read_row(r.png, pixels + stride * static_cast<size_t>(y), nullptr);
  png_read_end(r.png, nullptr);
  return true;
}

int file_channels(int color_type) {
  switch (color_type) {
    case PNG_COLOR_TYPE_GRAY:
      return 1;
    case PNG_COLOR_TYPE_GRAY_ALPHA:
      return 2;
    case PNG_COLOR_TYPE_RGB_ALPHA:
      return 4;
    default:
      return 3;  // RGB, palette
  }
}

ImageInfo header_info(PngReader& r, const char* source) {
  if (!read_header_steps(r)) throw_decode_error(source, r.message);
  const png_uint_32 width = png_get_image_width(r.png, r.info),
                    height = png_get_image_height(r.png, r.info);
  check_image_size(source, width, height);
  return ImageInfo{Encoding::png, static_cast<int>(width), static_cast<int>(height),
                   file_channels(png_get_color_type(r.png, r.info))};
}

}  // namespace

ImageInfo png_info(const uint8_t* bytes, size_t size, const char* source) {
  PngReader r;
  open_reader(r, bytes, size);
  return header_info(r, source);
}

ImageInfo decode_png(const uint8_t* bytes, size_t size, const char* source,
                     std::vector<uint8_t>& out) {
  PngReader r;
  open_reader(r, bytes, size);
  const ImageInfo info = header_info(r, source);
  check_decode_pixels(source, info.width, info.height);
  // Each row of the file is a filter byte and rowbytes of samples; deflate expands at most
  // 1032:1, so a file smaller than that bound is cut short (or lies about its size), known
  // before the pixels are allocated.
  const uint64_t raw = (uint64_t{png_get_rowbytes(r.png, r.info)} + 1) * static_cast<uint64_t>(info.height);
  if (raw > uint64_t{size} * kMaxDeflateRatio)
    throw_decode_error(source, fmt::format("truncated or corrupt PNG: {} bytes cannot hold the {} bytes of a "
                                           "{}x{} image even at deflate's best ratio ({}:1)",
                                           size, raw, info.width, info.height, kMaxDeflateRatio));
  const int passes = setup_rgb_steps(r);
  if (passes == 0) throw_decode_error(source, r.message);
  const size_t stride = static_cast<size_t>(info.width) * 3;
  TD_ASSERT(png_get_rowbytes(r.png, r.info) == stride && png_get_bit_depth(r.png, r.info) == 8);
  out.resize(stride * static_cast<size_t>(info.height));
  if (!read_rows_steps(r, out.data(), stride, info.height, passes))
    throw_decode_error(source, r.message);
  return info;
}

}  // namespace tandem::data::codec
