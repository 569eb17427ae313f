// encode_jpeg (image_codec.h) through TurboJPEG's tjCompress2.
#include <memory>
#include <string>

#include "data/codec/codec.h"
#include "data/codec/turbojpeg_handle.h"
#include "tandem/error.h"

namespace tandem::data {

std::vector<uint8_t> encode_jpeg(const uint8_t* rgb, int width, int height, int quality) {
  codec::check_encode_args("encode_jpeg", rgb, width, height);
  TD_CHECK_ARG(quality >= 1 && quality <= 100, "encode_jpeg", "quality must be in 1..100, got {}", quality);
  tjhandle handle = codec::thread_jpeg_compressor();
  unsigned char* buffer = nullptr;  // allocated by TurboJPEG
  unsigned long size = 0;
  const int rc = tjCompress2(handle, rgb, width, 0, height, TJPF_RGB, &buffer, &size, TJSAMP_420, quality,
                             TJFLAG_ACCURATEDCT);
  const std::unique_ptr<unsigned char, void (*)(unsigned char*)> owned(buffer, &tjFree);
  if (rc != 0) {
    const std::string message = tjGetErrorStr2(handle);
    codec::discard_thread_jpeg_compressor();
    throw_error(ErrorCode::internal, "encode_jpeg", fmt::format("{}x{} at quality {}: {}", width, height, quality, message));
  }
  return std::vector<uint8_t>(buffer, buffer + size);
}

}  // namespace tandem::data
