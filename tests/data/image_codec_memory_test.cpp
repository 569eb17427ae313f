// Failed decodes leak nothing: libjpeg and libpng leave by longjmp, and the decoder state must
// still be released on that path.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <string>
#include <vector>

#include "data/image_fixtures.h"
#include "tandem/data/image_codec.h"
#include "tandem/error.h"

using namespace tandem;
using namespace tandem::data;
using namespace tandem::testing;

namespace {

// Resident set size in bytes, from /proc/self/statm (second field, in pages).
int64_t resident_bytes() {
  FILE* f = std::fopen("/proc/self/statm", "r");
  if (!f) return -1;
  long size = 0, resident = 0;
  const int n = std::fscanf(f, "%ld %ld", &size, &resident);
  std::fclose(f);
  return n == 2 ? static_cast<int64_t>(resident) * sysconf(_SC_PAGESIZE) : -1;
}

#if defined(__SANITIZE_ADDRESS__)
constexpr bool kAddressSanitizer = true;  // its quarantine holds freed memory: RSS grows
#else
constexpr bool kAddressSanitizer = false;
#endif

}  // namespace

TEST(ImageCodecMemory, TenThousandFailedDecodesKeepResidentMemoryFlat) {
  if (kAddressSanitizer) GTEST_SKIP() << "RSS is not meaningful under AddressSanitizer (it checks leaks itself)";
  const std::vector<uint8_t> jpeg = image_fixture("truncated.jpg");
  std::vector<uint8_t> png = image_fixture("rgb.png");
  png[png.size() / 2] ^= 0x5A;  // corrupt the image data: a CRC or zlib error mid-stream
  int failures = 0;
  auto run = [&](int n) {
    std::vector<uint8_t> out;
    for (int i = 0; i < n; ++i) {
      const std::vector<uint8_t>& bytes = i % 2 ? png : jpeg;
      try {
        decode_image(bytes.data(), bytes.size(), i % 2 ? "corrupt.png" : "truncated.jpg", ImageScale{}, out);
      } catch (const Error& e) {
        if (e.code() == ErrorCode::format) ++failures;
      }
    }
  };
  run(500);  // warm-up: allocator pools, the thread's TurboJPEG handle
  const int64_t before = resident_bytes();
  ASSERT_GT(before, 0);
  failures = 0;
  run(10000);
  const int64_t growth = resident_bytes() - before;
  RecordProperty("rss_growth_bytes", std::to_string(growth));
  EXPECT_EQ(failures, 10000);
  // A leak of even 200 bytes per failure would show as 2 MiB.
  EXPECT_LT(growth, 2 << 20) << "resident memory grew by " << growth << " bytes";
}
