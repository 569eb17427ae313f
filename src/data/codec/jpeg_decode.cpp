// JPEG header reading and decoding through TurboJPEG (image_codec.h); the marker scans and the
// CMYK / YCCK to RGB conversion are in jpeg_markers.cpp.
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

struct JpegHeader {
  int width = 0, height = 0, subsampling = 0, colorspace = 0;
};

// A benign warning in tjDecompressHeader3 (junk before SOS) still fills the outputs.
JpegHeader read_header(const uint8_t* bytes, size_t size, const char* source) {
  tjhandle handle = thread_jpeg_decompressor();
  JpegHeader h;
  if (tjDecompressHeader3(handle, bytes, size, &h.width, &h.height, &h.subsampling,
                          &h.colorspace) != 0) {
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
  check_decode_pixels(source, width, height);
  check_jpeg_density(source, bytes, size, h.width, h.height);
  const bool cmyk = h.colorspace == TJCS_CMYK || h.colorspace == TJCS_YCCK;
  const size_t pixels = static_cast<size_t>(width) * static_cast<size_t>(height);
  out.resize(pixels * (cmyk ? 4 : 3));
  // TurboJPEG picks the largest scaling factor whose TJSCALED size fits width x height; that
  // is `scale` or one giving the same size, so the output is exactly width x height.
  if (tjDecompress2(handle, bytes, size, out.data(), width, 0, height, cmyk ? TJPF_CMYK : TJPF_RGB,
                    kDecodeFlags) != 0) {
    if (!is_benign_warning(handle, bytes, size)) throw_tj_error(handle, source);
    discard_thread_jpeg_decompressor();
    // TurboJPEG keeps only the first warning's text: junk before a marker can hide a later
    // "Premature end of JPEG file" (a file cut inside its scan). libjpeg's own API, as the
    // region decoder drives it, judges every warning: decode the whole image through it.
    ImageRegion decoded;
    return decode_jpeg_region(bytes, size, source, scale, ImageRegion{0, 0, width, height}, out, decoded);
  }
  if (cmyk) {
    cmyk_to_rgb(out.data(), pixels, has_adobe_marker(bytes, size));
    out.resize(pixels * 3);
  }
  return ImageInfo{Encoding::jpeg, width, height, file_channels(h.colorspace)};
}

}  // namespace tandem::data::codec
