// Fuzz target: JPEG and PNG bytes through read_image_info, decode_image (every JPEG scale
// the loader uses) and decode_image_region, as the loader, `tandem pack` and the server call
// them. Errors: tandem::Error is expected; see fuzz_target.h.
#include <vector>

#include "fuzz_target.h"
#include "tandem/data/image_codec.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tandem::data;
  std::vector<uint8_t> out;
  tandem::fuzz::expect_error_or_ok([&] {
    const ImageInfo info = read_image_info(data, size, "input");
    // The scale comes from the size so one input explores one of them deterministically.
    const int num = 1 << (size % 4);  // 1, 2, 4, 8 eighths
    const ImageScale scale = info.encoding == Encoding::jpeg ? ImageScale{num, 8} : ImageScale{};
    (void)decode_image(data, size, "input", scale, out);
    const int w = scale.scaled(info.width), h = scale.scaled(info.height);
    ImageRegion decoded;
    (void)decode_image_region(data, size, "input", scale, {w / 4, h / 4, w - w / 4, h - h / 4}, out,
                              decoded);
  });
  return 0;
}
