// decode_image_region for JPEG (image_codec.h) through libjpeg's API: crop the columns, skip
// the rows above, read the rows wanted, abort before the rows below.
// libjpeg reports errors by longjmp to the setjmp in each step below; the steps keep every
// value that must survive a jump in the Decoder (memory, not registers) and hold no object
// with a destructor, and the Decoder's destructor releases libjpeg's state on every path.
#include <algorithm>
#include <csetjmp>
#include <cstdio>
#include <cstring>
#include <vector>

// jpeglib.h needs size_t and FILE declared before it.
#include <jpeglib.h>

#include "data/codec/codec.h"
#include "tandem/error.h"

namespace tandem::data::codec {

namespace {

constexpr const char* kOp = "decode_image_region";
// TurboJPEG's TJFLAG_LIMITSCANS bound, which decode_image applies.
constexpr int kMaxScans = 500;

struct Decoder {
  jpeg_decompress_struct cinfo{};
  jpeg_error_mgr err{};
  jpeg_progress_mgr progress{};
  std::jmp_buf jump{};
  char message[JMSG_LENGTH_MAX] = {};
  const uint8_t* bytes = nullptr;
  size_t size = 0;
  bool created = false;

  ~Decoder() {
    if (created) jpeg_destroy_decompress(&cinfo);
  }
};

Decoder& decoder_of(j_common_ptr cinfo) {
  return *static_cast<Decoder*>(cinfo->client_data);
}

[[noreturn]] void on_error(j_common_ptr cinfo) {
  Decoder& d = decoder_of(cinfo);
  (*cinfo->err->format_message)(cinfo, d.message);
  std::longjmp(d.jump, 1);
}

// Warnings (level -1) are errors, except junk between segments in a file whose last scan
// is followed by EOI (the rule decode_image applies); trace messages are ignored.
void on_message(j_common_ptr cinfo, int level) {
  if (level >= 0) return;
  Decoder& d = decoder_of(cinfo);
  (*cinfo->err->format_message)(cinfo, d.message);
  if (std::strstr(d.message, "extraneous bytes before marker") != nullptr &&
      has_eoi_after_last_scan(d.bytes, d.size)) {
    ++cinfo->err->num_warnings;
    return;
  }
  std::longjmp(d.jump, 1);
}

void on_progress(j_common_ptr cinfo) {
  if (!cinfo->is_decompressor) return;
  if (reinterpret_cast<j_decompress_ptr>(cinfo)->input_scan_number > kMaxScans) {
    Decoder& d = decoder_of(cinfo);
    std::snprintf(d.message, sizeof d.message, "Progressive JPEG image has more than %d scans",
                  kMaxScans);
    std::longjmp(d.jump, 1);
  }
}

// Header and output size at `scale`; false on a libjpeg error (d.message says why).
bool read_header(Decoder& d, ImageScale scale) {
  if (setjmp(d.jump)) return false;
  d.cinfo.client_data = &d;  // kept by jpeg_create_decompress, needed by its error path
  jpeg_create_decompress(&d.cinfo);
  d.created = true;
  d.cinfo.progress = &d.progress;
  jpeg_mem_src(&d.cinfo, d.bytes, static_cast<unsigned long>(d.size));
  jpeg_read_header(&d.cinfo, TRUE);
  const bool cmyk = d.cinfo.jpeg_color_space == JCS_CMYK || d.cinfo.jpeg_color_space == JCS_YCCK;
  d.cinfo.out_color_space = cmyk ? JCS_CMYK : JCS_EXT_RGB;
  d.cinfo.dct_method = JDCT_ISLOW;
  d.cinfo.do_fancy_upsampling = TRUE;
  d.cinfo.scale_num = static_cast<unsigned>(scale.num * 8 / scale.denom);
  d.cinfo.scale_denom = 8;
  jpeg_calc_output_dimensions(&d.cinfo);
  return true;
}

// Decodes rows [y, y + height) of the columns `x`, `width` (widened by jpeg_crop_scanline)
// into `out`, which holds room for width * height pixels of output_components bytes; false on
// a libjpeg error. `x` and `width` come back as the decoded columns.
bool read_region(Decoder& d, JDIMENSION* x, JDIMENSION* width, JDIMENSION y, JDIMENSION height,
                 std::vector<uint8_t>* out) {
  if (setjmp(d.jump)) return false;
  jpeg_start_decompress(&d.cinfo);
  if (*width < d.cinfo.output_width) jpeg_crop_scanline(&d.cinfo, x, width);
  if (static_cast<int64_t>(*width) * height > kMaxDecodePixels) {
    std::snprintf(d.message, sizeof d.message,
                  "decoding %ux%u pixels exceeds the limit of %lld pixels (a decompression bomb, or "
                  "an image too large to decode whole)",
                  static_cast<unsigned>(*width), static_cast<unsigned>(height),
                  static_cast<long long>(kMaxDecodePixels));
    return false;
  }
  out->resize(static_cast<size_t>(*width) * height *
              static_cast<size_t>(d.cinfo.output_components));
  const size_t stride =
      static_cast<size_t>(*width) * static_cast<size_t>(d.cinfo.output_components);
  if (y > 0 && jpeg_skip_scanlines(&d.cinfo, y) != y) return false;
  while (d.cinfo.output_scanline < y + height) {
    JSAMPROW rows[4];
    const JDIMENSION done = d.cinfo.output_scanline - y;
    const JDIMENSION n = std::min<JDIMENSION>(4, height - done);
    for (JDIMENSION i = 0; i < n; ++i) rows[i] = out->data() + (done + i) * stride;
    jpeg_read_scanlines(&d.cinfo, rows, n);
  }
  jpeg_abort_decompress(&d.cinfo);
  return true;
}

}  // namespace

ImageInfo decode_jpeg_region(const uint8_t* bytes, size_t size, const char* source,
                             ImageScale scale, ImageRegion request, std::vector<uint8_t>& out,
                             ImageRegion& decoded) {
  Decoder d;
  d.bytes = bytes, d.size = size;
  d.cinfo.err = jpeg_std_error(&d.err);
  d.err.error_exit = on_error;
  d.err.emit_message = on_message;
  d.progress.progress_monitor = on_progress;
  if (!read_header(d, scale)) throw_decode_error(source, d.message);
  check_image_size(source, d.cinfo.image_width, d.cinfo.image_height);
  // A progressive file keeps the coefficients of the whole image in memory whatever the
  // region: bound them like a full decode.
  if (d.cinfo.progressive_mode) check_decode_pixels(source, d.cinfo.image_width, d.cinfo.image_height);
  // The header reader stops after the first SOS header; the rest is image data, which must
  // end in EOI (a file cut below the region would otherwise pass).
  const size_t header_end = size - d.cinfo.src->bytes_in_buffer;
  if (!has_eoi_after(bytes, size, header_end))
    throw_decode_error(source, "Premature end of JPEG file (no EOI marker)");
  const int width = static_cast<int>(d.cinfo.output_width);
  const int height = static_cast<int>(d.cinfo.output_height);
  const ImageRegion& r = request;
  TD_CHECK_ARG(r.x >= 0 && r.y >= 0 && r.width > 0 && r.height > 0 && r.x <= width - r.width &&
                   r.y <= height - r.height,
               kOp, "{}: region {}x{} at ({}, {}) is not inside the {}x{} image at scale {}/{}",
               source ? source : "image", r.width, r.height, r.x, r.y, width, height, scale.num,
               scale.denom);
  check_jpeg_density(source, bytes, size, d.cinfo.image_width, d.cinfo.image_height);
  const bool cmyk = d.cinfo.out_color_space == JCS_CMYK;
  JDIMENSION x = static_cast<JDIMENSION>(r.x), w = static_cast<JDIMENSION>(r.width);
  if (static_cast<int>(w) == width) x = 0;
  if (!read_region(d, &x, &w, static_cast<JDIMENSION>(r.y), static_cast<JDIMENSION>(r.height),
                   &out)) {
    if (d.message[0] == '\0') std::snprintf(d.message, sizeof d.message, "cannot skip rows");
    throw_decode_error(source, d.message);
  }
  decoded = ImageRegion{static_cast<int>(x), r.y, static_cast<int>(w), r.height};
  const size_t pixels = static_cast<size_t>(w) * static_cast<size_t>(r.height);
  if (cmyk) {
    cmyk_to_rgb(out.data(), pixels, has_adobe_marker(bytes, size));
    out.resize(pixels * 3);
  }
  const int channels = d.cinfo.num_components == 1 ? 1 : cmyk ? 4 : 3;
  return ImageInfo{Encoding::jpeg, width, height, channels};
}

}  // namespace tandem::data::codec
