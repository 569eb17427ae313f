// Failed decodes leak nothing: libjpeg and libpng leave by longjmp, and the decoder state must
// still be released on that path.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "data/image_fixtures.h"
#include "tandem/data/image_codec.h"
#include "tandem/error.h"

using namespace tandem;
using namespace tandem::data;
using namespace tandem::testing;

TEST(ImageCodecMemory, TenThousandFailedDecodesKeepResidentMemoryFlat) {
  if (kAddressSanitizer || kThreadSanitizer)
    GTEST_SKIP() << "RSS is not meaningful under AddressSanitizer (it checks leaks itself) or ThreadSanitizer "
                    "(its allocator and shadow memory grow it)";
  const std::vector<uint8_t> jpeg = image_fixture("truncated.jpg");
  std::vector<uint8_t> png = image_fixture("rgb.png");
  png[png.size() / 2] ^= 0x5A;  // corrupt the image data: a CRC or zlib error mid-stream
  int failures = 0;
  auto run = [&](int n) {
    std::vector<uint8_t> out;
    for (int i = 0; i < n; ++i) {
      const std::vector<uint8_t>& bytes = i % 2 ? png : jpeg;
      try {
        decode_image(bytes.data(), bytes.size(), i % 2 ? "corrupt.png" : "truncated.jpg",
                     ImageScale{}, out);
      } catch (const Error& e) {
        if (e.code() == ErrorCode::format) ++failures;
      }
    }
  };
  const int64_t growth = resident_growth(run, 500, 10000);
  RecordProperty("rss_growth_bytes", std::to_string(growth));
  EXPECT_EQ(failures, 10500);
  // A leak of even 200 bytes per failure would show as 2 MiB.
  EXPECT_LT(growth, 2 << 20) << "resident memory grew by " << growth << " bytes";
}
