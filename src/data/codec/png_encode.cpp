// encode_png (image_codec.h) through libpng 1.6, into memory. As in png_decode.cpp, the
// function that calls libpng after setjmp holds no C++ object with a destructor; the
// structures and the output are owned by the caller.
#include <png.h>

#include <csetjmp>
#include <cstdio>
#include <new>

#include "data/codec/codec.h"
#include "tandem/error.h"

namespace tandem::data {

namespace {

struct PngWriter {
  png_structp png = nullptr;
  png_infop info = nullptr;
  std::vector<uint8_t>* out = nullptr;
  char message[256] = "";

  PngWriter() = default;
  PngWriter(const PngWriter&) = delete;
  PngWriter& operator=(const PngWriter&) = delete;
  ~PngWriter() { png_destroy_write_struct(&png, info ? &info : nullptr); }
};

void on_error(png_structp png, png_const_charp message) {
  auto* w = static_cast<PngWriter*>(png_get_error_ptr(png));
  std::snprintf(w->message, sizeof(w->message), "%s", message ? message : "libpng error");
  png_longjmp(png, 1);
}

void on_warning(png_structp, png_const_charp) {}

// Appends to the output; an allocation failure becomes a libpng error rather than an
// exception unwinding through libpng's C frames.
void on_write(png_structp png, png_bytep data, size_t length) {
  auto* w = static_cast<PngWriter*>(png_get_io_ptr(png));
  bool ok = true;
  try {
    w->out->insert(w->out->end(), data, data + length);
  } catch (const std::bad_alloc&) {
    ok = false;
  }
  if (!ok) png_error(png, "out of memory");
}

void on_flush(png_structp) {}

bool write_steps(PngWriter& w, const uint8_t* rgb, int width, int height) {
  if (setjmp(png_jmpbuf(w.png))) return false;
  png_set_IHDR(w.png, w.info, static_cast<png_uint_32>(width), static_cast<png_uint_32>(height), 8,
               PNG_COLOR_TYPE_RGB, PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
  png_write_info(w.png, w.info);
  const size_t stride = static_cast<size_t>(width) * 3;
  for (int y = 0; y < height; ++y) png_write_row(w.png, rgb + stride * static_cast<size_t>(y));
  png_write_end(w.png, nullptr);
  return true;
}

}  // namespace

std::vector<uint8_t> encode_png(const uint8_t* rgb, int width, int height) {
  codec::check_encode_args("encode_png", rgb, width, height);
  std::vector<uint8_t> out;
  PngWriter w;
  w.out = &out;
  w.png = png_create_write_struct(PNG_LIBPNG_VER_STRING, &w, &on_error, &on_warning);
  if (w.png) w.info = png_create_info_struct(w.png);
  TD_CHECK(w.png && w.info, ErrorCode::out_of_memory, "encode_png", "cannot create a libpng writer");
  png_set_write_fn(w.png, &w, &on_write, &on_flush);
  if (!write_steps(w, rgb, width, height))
    throw_error(ErrorCode::internal, "encode_png", fmt::format("{}x{}: {}", width, height, w.message));
  return out;
}

}  // namespace tandem::data
